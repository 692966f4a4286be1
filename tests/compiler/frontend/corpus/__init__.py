"""The frontend corpus: small programs as data, run eagerly and compiled by test_corpus.py.

Each group module (tensor_ops, python_values, containers, control_flow, functions, modules,
graph_breaks, numpy_ops) defines PROGRAMS: a list of `Program`s. A program's `calls` is a list of argument
tuples; an item that is an `In` (e.g. `T(3, 4)`) is made fresh for each call (the same values
for the eager and the compiled run), anything else is passed as is.

Expected counts are TorchDynamo's: scripts/check_corpus_vs_dynamo.py runs every program under
torch.compile and writes Dynamo's numbers to dynamo_counts.json (committed), which the test
uses wherever a Program does not set its own. `graphs` and `breaks` are the graphs compiled and
the distinct graph-break SITES seen during the FIRST call (`break_sites`: the user file:line of
each `graph_break` event, as Dynamo's counts are the distinct file:line of its own graph_breaks
log, so a break met again on a second capture attempt, or in a callee inlined twice, counts
once); `recompiles` counts recompiles of any frame
(resume functions included) over all calls: the records of the `recompiles` log. A Program that sets its own numbers must say why in `note` (e.g. Dynamo makes a
changed int argument a SymInt where we specialise).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch


@dataclasses.dataclass
class Program:
    name: str
    fn: Callable
    calls: list
    graphs: int | None = None      # None: Dynamo's recorded count (dynamo_counts.json)
    breaks: int | None = None
    recompiles: int | None = None
    dynamic: Any = None
    dynamo: tuple | None = None
    note: str = ""
    xfail: str | None = None      # a described capture bug (strict xfail)
    before_call: Callable | None = None   # before_call(fn, i): e.g. toggle a module's training flag


class In:
    """A fresh input per call."""

    def __init__(self, make):
        self.make = make

    def __call__(self):
        return self.make()


def T(*shape, dtype=torch.float32, requires_grad=False):
    def make():
        if dtype.is_floating_point:
            t = torch.randn(*shape, dtype=dtype)
        elif dtype is torch.bool:
            t = torch.randn(*shape) > 0
        else:
            t = torch.randint(-5, 6, shape, dtype=dtype)
        return t.requires_grad_(requires_grad) if requires_grad else t
    return In(make)


def L(*items):
    """A fresh list of fresh inputs."""
    return In(lambda: [i() if isinstance(i, In) else i for i in items])


def TUP(*items):
    return In(lambda: tuple(i() if isinstance(i, In) else i for i in items))


def D(**items):
    return In(lambda: {k: (i() if isinstance(i, In) else i) for k, i in items.items()})


def shapes(*shape_list, extra=()):
    """One tensor argument per call, of these shapes (plus constant extra arguments)."""
    return [(T(*s), *extra) for s in shape_list]


# The default schedule: same shape twice (a cache hit), then two new sizes of dim 0
# (Dynamo: one recompile that makes dim 0 dynamic, then no more).
STD = shapes((3, 4), (3, 4), (5, 4), (6, 4))
STD2 = [(T(*s), T(*s)) for s in [(3, 4), (3, 4), (5, 4), (6, 4)]]


def P(fn, calls=None, graphs=None, breaks=None, recompiles=None, name=None, **kw) -> Program:
    calls = STD if calls is None else calls
    name = name or getattr(fn, "__name__", None) or type(fn).__name__
    return Program(name, fn, calls, graphs, breaks, recompiles, **kw)


class KW(dict):
    """Keyword arguments of a call (the last item of the call tuple)."""


def make_args(call) -> tuple[tuple, dict]:
    kwargs = {}
    if call and isinstance(call[-1], KW):
        kwargs = {k: (v() if isinstance(v, In) else v) for k, v in call[-1].items()}
        call = call[:-1]
    return tuple(a() if isinstance(a, In) else a for a in call), kwargs


def break_sites(events) -> int:
    """Distinct user file:line of the `graph_break` events (ours): the corpus's break count.

    Dynamo's number (scripts/check_corpus_vs_dynamo.py) is the same measure taken from its
    TORCH_LOGS=graph_breaks records, including breaks in frames it then skips as a whole."""
    import os
    return len({(os.path.realpath(e.payload["filename"]), e.payload["lineno"])
                for e in events if e.name == "graph_break"})


def all_programs() -> list[Program]:
    from tests.compiler.frontend.corpus import (containers, control_flow, functions, graph_breaks,
                                                modules, numpy_ops, python_values, tensor_ops)
    out = []
    for mod in (tensor_ops, python_values, containers, control_flow, functions, modules, graph_breaks,
                numpy_ops):
        for p in mod.PROGRAMS:
            p.name = f"{mod.__name__.rsplit('.', 1)[-1]}.{p.name}"
            out.append(p)
    return out
