"""The capture constructs and graph breaks through the public compiler.compile (the runtime
of frontend-runtime: cache, guards, recompiles, resume functions compiled on first call),
each call compared with eager, on changing inputs."""
import pytest
import torch

from tracetorch import compiler
from tests.compiler.frontend import test_capture_breaks as B
from tests.compiler.frontend import test_capture_constructs as C
from tests.compiler.frontend.capture_harness import same

PROGRAMS = C.PROGRAMS + [fn for fn, _ in B.BREAKS]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_compiled_matches_eager(fn):
    compiler.reset()
    opt = compiler.compile(fn, backend="eager")
    for shape in [(4, 3), (4, 3), (6, 3)]:
        x, y = torch.randn(shape), torch.randn(shape)
        assert same(fn(x, y), opt(x, y)), fn.__name__


def test_explain_counts_breaks():
    compiler.reset()
    x = torch.randn(3)
    report = compiler.explain(B.brk_multi)(x, x)
    assert report.graph_count == 3 and report.graph_break_count == 2


def test_fullgraph_raises_through_api():
    compiler.reset()
    opt = compiler.compile(B.brk_nested, backend="eager", fullgraph=True)
    with pytest.raises(compiler.errors.GraphBreakError) as info:
        opt(torch.randn(3), torch.randn(3))
    assert "print(" in str(info.value)


def test_automatic_dynamic_recompiles_once():
    from tests.compiler.frontend.test_capture_guards import dyn
    from tracetorch import logs
    with logs.testing.capture(artifacts={"recompile"}) as events:
        compiler.reset()
        opt = compiler.compile(dyn, backend="eager")
        for n in (3, 4, 5, 6, 7):
            x, y = torch.randn(n, 3), torch.randn(n, 3)
            assert same(opt(x, y), dyn(x, y))
    assert len([e for e in events if e.name == "recompile"]) == 1
