"""Delta reduction of a failing fuzz program: the smallest variant that still fails the same way.

Passes, repeated until nothing changes: keep only the failing call (and drop others), drop
statements one at a time (a variant that eager rejects is "invalid" and so not kept), drop
outputs, simplify inputs (contiguous layout, no special values). "The same way" is the same
status and the same first word of its detail (the exception type, or what differed).
"""

from __future__ import annotations

import copy
import dataclasses

from .generator import Program
from .runner import run_program


def _signature(res) -> tuple:
    return res.status, res.detail.split(":")[0].split(" ")[0]


def reduce(prog: Program, target: str, max_runs: int = 300) -> tuple[Program, object]:
    """(minimal program, its result)."""
    first = run_program(prog, target)
    want = _signature(first)
    runs = [0]

    def fails(p) -> bool:
        if runs[0] >= max_runs or not p.outputs:
            return False
        runs[0] += 1
        return _signature(run_program(p, target)) == want

    best = copy.deepcopy(prog)
    if first.call > 0:
        cand = dataclasses.replace(best, calls=best.calls[:1] + [best.calls[first.call]])
        only = dataclasses.replace(best, calls=[best.calls[first.call]])
        best = only if fails(only) else cand if fails(cand) else best
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(best.lines))):
            if i >= len(best.lines):
                continue
            cand = dataclasses.replace(best, lines=best.lines[:i] + best.lines[i + 1:])
            if fails(cand):
                best, changed = cand, True
        for i in reversed(range(len(best.outputs))):
            if len(best.outputs) > 1 and i < len(best.outputs):
                cand = dataclasses.replace(best, outputs=best.outputs[:i] + best.outputs[i + 1:])
                if fails(cand):
                    best, changed = cand, True
        for j, spec in enumerate(best.inputs):
            for field, value in (("layout", "contiguous"), ("special", False)):
                if getattr(spec, field) != value:
                    specs = list(best.inputs)
                    specs[j] = dataclasses.replace(spec, **{field: value})
                    cand = dataclasses.replace(best, inputs=specs)
                    if fails(cand):
                        best, changed = cand, True
        if len(best.calls) > 1:
            cand = dataclasses.replace(best, calls=best.calls[1:])
            if fails(cand):
                best, changed = cand, True
    return best, run_program(best, target)


def report(prog: Program, target: str) -> str:
    """The minimal program as text (source, inputs, calls, what differs)."""
    small, res = reduce(prog, target)
    return f"{small.describe()}# target {target}: {res.status} at call {res.call}: {res.detail}\n"
