"""Random programs for the differential fuzzer, seeded and reproducible.

A Program is Python source `def fn(a0, a1, ...):` with 3-25 statements, plus its input specs and
the calls to make (the first call's sizes, then new values, then new sizes). Generation is by
trial: each candidate line is executed eagerly on the first call's inputs and kept only if eager
runs it, so the program is always valid eager code for the first call (later calls that eager
rejects are skipped by the runner, not counted).
"""

from __future__ import annotations

import dataclasses
import random
import warnings

import torch
import torch.nn.functional as F

from . import ops
from .values import (DTYPE_WEIGHTS, DTYPES, LAYOUT_WEIGHTS, LAYOUTS, InputSpec,
                                                draw_size, make_input)

NAMESPACE = {"torch": torch, "F": F}


@dataclasses.dataclass
class Program:
    seed: int
    inputs: list                     # [InputSpec]
    lines: list                      # statement lines of the body
    outputs: list                    # returned expressions
    calls: list                      # [(sizes dict, value seed)], first call first

    def source(self, name="fn") -> str:
        args = ", ".join(s.name for s in self.inputs)
        body = [f"    {line}" for line in self.lines]
        body.append(f"    return {', '.join(self.outputs)}{',' if len(self.outputs) == 1 else ''}"
                    if self.outputs else "    return None")
        return f"def {name}({args}):\n" + "\n".join(body) + "\n"

    def function(self):
        ns = dict(NAMESPACE)
        exec(compile(self.source(), f"<fuzz program {self.seed}>", "exec"), ns)
        ns["fn"].__fuzz_source__ = self.source()
        return ns["fn"]

    def make_inputs(self, call: int) -> list:
        sizes, vseed = self.calls[call]
        return [make_input(s, sizes, vseed * 101 + i) for i, s in enumerate(self.inputs)]

    def describe(self) -> str:
        ins = "; ".join(f"{s.name}: dims={s.dims} {s.dtype} {s.layout}{' special' if s.special else ''}"
                        for s in self.inputs)
        calls = "; ".join(f"sizes={c[0]} seed={c[1]}" for c in self.calls)
        return f"# seed {self.seed}\n# inputs: {ins}\n# calls: {calls}\n{self.source()}"


def _specs(rng: random.Random) -> tuple[list, dict]:
    rank = rng.choices([0, 1, 2, 3, 4], [1, 4, 5, 3, 2])[0]
    dim_ids = [f"d{k}" for k in range(rank)]
    sizes = {d: draw_size(rng) for d in dim_ids}
    if rng.random() < 0.85:      # mostly non-empty programs; zero sizes still come up
        for d in dim_ids:
            if sizes[d] == 0:
                sizes[d] = rng.choice([1, 2, 3])
    specs = []
    for i in range(rng.choice([1, 2, 2, 3, 3, 4])):
        dims = [d if rng.random() < 0.8 else 1 for d in dim_ids]
        if rng.random() < 0.15 and dims:
            dims = dims[rng.randrange(len(dims)):]      # a lower-rank input (broadcast from the left)
        dtype = rng.choices(DTYPES, DTYPE_WEIGHTS)[0] if i else rng.choices(DTYPES[:4], [6, 1, 1, 1])[0]
        specs.append(InputSpec(f"a{i}", dims, dtype, rng.choices(LAYOUTS, LAYOUT_WEIGHTS)[0],
                               special=rng.random() < 0.3))
    return specs, sizes


def _later_calls(rng: random.Random, sizes: dict) -> list:
    calls = []
    for k in range(rng.choice([0, 1, 1, 2, 3])):
        if rng.random() < 0.5:
            calls.append((dict(sizes), rng.randrange(1 << 30)))           # new values
        else:
            new = {d: (s if s == 1 and rng.random() < 0.5 else draw_size(rng)) for d, s in sizes.items()}
            calls.append((new, rng.randrange(1 << 30)))                  # new sizes
    return calls


def _run_line(line: str, env: dict) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(line, {**NAMESPACE}, env)
        return True
    except Exception:
        return False


def generate(seed: int, min_lines: int = 3, max_lines: int = 25) -> Program:
    rng = random.Random(seed)
    specs, sizes = _specs(rng)
    first = (sizes, rng.randrange(1 << 30))
    prog = Program(seed, specs, [], [], [first])
    env = dict(zip([s.name for s in specs], prog.make_inputs(0)))
    live = [s.name for s in specs]
    target = rng.randint(min_lines, max_lines)
    templates, weights = zip(*ops.TEMPLATES)
    tries = 0
    while len(prog.lines) < target and tries < target * 12:
        tries += 1
        tmpl = rng.choices(templates, weights)[0]

        def pick(pred):
            ok = [v for v in live if isinstance(env.get(v), torch.Tensor) and pred(env[v])]
            if not ok:
                return None
            recent = ok[-3:]
            return rng.choice(recent) if rng.random() < 0.6 else rng.choice(ok)

        code = tmpl(rng, pick)
        if not code:
            continue
        out = f"v{len(prog.lines)}"
        first_var = next((v for v in live if v in code), None)
        dim = 0
        if first_var is not None and isinstance(env.get(first_var), torch.Tensor):
            t = env[first_var]
            dim = rng.randrange(-t.dim(), t.dim()) if t.dim() else 0
        line = code.replace("{out}", out).replace("{dim}", str(dim))
        if not _run_line(line, env):
            continue   # (a rejected in-place op may have written part of its target: env is a guide only)
        if out in env and not isinstance(env[out], torch.Tensor):
            del env[out]
            continue
        if out in env and env[out].numel() > 1 << 16:
            del env[out]
            continue
        prog.lines.append(line)
        if out in env:
            live.append(out)
    produced = [v for v in live if v.startswith("v")]
    # the last value and a few earlier ones (otherwise most of the program would be dead code)
    outs = (produced[-1:] + rng.sample(produced[:-1], min(len(produced) - 1, rng.choice([0, 1, 2, 3])))
            if produced else [])
    if rng.random() < 0.2:
        outs.append(rng.choice([s.name for s in specs]))       # a returned input (alias)
    prog.outputs = list(dict.fromkeys(outs)) or [specs[0].name]
    prog.calls += _later_calls(rng, sizes)
    return prog
