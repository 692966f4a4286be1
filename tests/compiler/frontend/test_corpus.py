"""The frontend corpus (tests/compiler/frontend/corpus/): every program run eagerly and
compiled over several calls with changing inputs; results (and mutated inputs) must match, and
the graphs / distinct graph-break sites (corpus.break_sites) of the first call and the recompiles
over all calls must equal TorchDynamo's (corpus/dynamo_counts.json, written by scripts/check_corpus_vs_dynamo.py).
"""
import json
import os

import pytest
import torch

from tracetorch import compiler
from tracetorch import logs
from tests.compiler.frontend.capture_harness import CountingBackend
from tests.compiler.frontend.corpus import all_programs, break_sites, make_args

PROGRAMS = all_programs()
with open(os.path.join(os.path.dirname(__file__), "corpus", "dynamo_counts.json")) as fh:
    DYNAMO = json.load(fh)


def expected_counts(prog):
    d = DYNAMO.get(prog.name)
    out = []
    for key in ("graphs", "breaks", "recompiles"):
        value = getattr(prog, key)
        if value is None:
            assert d is not None, (f"{prog.name}: no Dynamo counts recorded; "
                                   "run scripts/check_corpus_vs_dynamo.py --write")
            value = d[key]
        out.append(value)
    return tuple(out)


def clone(v):
    if isinstance(v, torch.Tensor):
        return v.detach().clone().requires_grad_(v.requires_grad)
    if isinstance(v, (list, tuple)):
        return type(v)(clone(i) for i in v)
    if isinstance(v, dict):
        return {k: clone(i) for k, i in v.items()}
    return v


def tensors(v) -> list:
    """The tensors inside (nested) arguments: what an in-place mutation could have changed."""
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for i in v for t in tensors(i)]
    if isinstance(v, dict):
        return [t for i in v.values() for t in tensors(i)]
    return []


def count_recompiles(events) -> int:
    """Every recompile of any frame (the `recompiles` log; Dynamo's count is the same log's)."""
    return sum(1 for e in events if e.name == "recompile")


def _params():
    for p in PROGRAMS:
        marks = [pytest.mark.xfail(strict=True, reason=p.xfail)] if p.xfail else []
        yield pytest.param(p, id=p.name, marks=marks)


@pytest.mark.parametrize("prog", _params())
def test_program(prog):
    compiler.reset()
    backend = CountingBackend()
    first = None
    with logs.testing.capture(artifacts={"recompile", "graph_break"}) as events:
        compiled = compiler.compile(prog.fn, backend=backend, dynamic=prog.dynamic)
        for i, call in enumerate(prog.calls):
            torch.manual_seed(i)
            args, kwargs = make_args(call)
            eager_args, eager_kwargs = clone(args), clone(kwargs)
            if prog.before_call:
                prog.before_call(prog.fn, i)
            expected = prog.fn(*eager_args, **eager_kwargs)
            if prog.before_call:
                prog.before_call(prog.fn, i)
            got = compiled(*args, **kwargs)
            torch.testing.assert_close(got, expected, msg=lambda m: f"call {i}: result differs: {m}")
            torch.testing.assert_close(tensors((args, kwargs)), tensors((eager_args, eager_kwargs)),
                                       msg=lambda m: f"call {i}: inputs mutated differently: {m}")
            if i == 0:
                first = (backend.graphs, break_sites(events))
    recompiles = count_recompiles(events)
    assert (*first, recompiles) == expected_counts(prog), "(graphs, breaks, recompiles) vs Dynamo's"
