"""Dynamic shapes with the real capture: automatic (None), True, False; symbolic guards shown."""
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import GraphListBackend


def f(x):
    return (x * 2).sum(0)


def _run(dynamic, sizes):
    c = GraphListBackend()
    g = compiler.compile(f, backend=c, dynamic=dynamic)
    for n in sizes:
        x = torch.randn(n, 3)
        torch.testing.assert_close(g(x), f(x))
    return c


def test_automatic_dynamic_after_one_size_change(events):
    c = _run(None, [4, 4, 5, 6, 7, 8])
    assert len(c.graphs) == 2
    recompiles = [e.payload for e in events if e.name == "recompiles"]
    assert len(recompiles) == 1
    assert "tensor 'x' size mismatch at index 0. expected 4, actual 5" in recompiles[0]
    marks = [e for e in events if e.name == "automatic_dynamic"]
    assert [(e.fields["source"], e.fields["dim"]) for e in marks] == [("L['x']", 0)]
    guards = [e.payload for e in events if e.name == "guards"][-1]
    assert "size=['s?', 3]" in guards
    assert "SYMBOLIC_SHAPE" in guards        # e.g. 2 <= L['x'].size()[0]


def test_dynamic_true_compiles_once(events):
    c = _run(True, [4, 5, 6, 7])
    assert len(c.graphs) == 1
    assert [e for e in events if e.name == "recompiles"] == []


def test_dynamic_false_recompiles_every_size(events):
    c = _run(False, [4, 5, 6])
    assert len(c.graphs) == 3
    assert len([e for e in events if e.name == "recompiles"]) == 2


def test_symbolic_guard_failure_is_explained(events):
    c = GraphListBackend()
    g = compiler.compile(f, backend=c, dynamic=True)
    for n in [4, 5, 1]:        # size 1 is specialised (0/1 specialisation), as in Dynamo
        x = torch.randn(n, 3)
        torch.testing.assert_close(g(x), f(x))
    assert len(c.graphs) == 2
    [text] = [e.payload for e in events if e.name == "recompiles"]
    assert "symbolic shape guard failed:" in text and "x.size()[0] = 1" in text, text


def test_specialized_dynamic_size_is_guarded():
    """A dynamic size whose value Python needs (a list index) is specialized: the compiled
    code must be guarded on that value, not reused for the next size."""
    from tracetorch import compiler as _compiler

    def h(x):
        return x * [1, 2, 3, 4, 5, 6, 7][x.shape[0]]

    _compiler.reset()
    c = _compiler.compile(h, backend="eager", dynamic=True)
    for n in (3, 5, 6):
        x = torch.randn(n, 2)
        torch.testing.assert_close(c(x), h(x))


def _size_dependent(x):
    return x + 1, x.shape[0] * 2, x.sum(0)


def test_dynamic_dim_recompiled_at_size_0_or_1_is_checked(events):
    """A dim marked dynamic whose recompile sees size 0 or 1 is traced for that size (0/1
    specialization): its TENSOR_MATCH must check the size. It did not, and the graph traced at
    size 1 served every later size (fuzz seed 336365: a size-0 graph for a size-1 call)."""
    g = compiler.compile(_size_dependent, backend="eager")
    for n in [4, 1, 5, 0, 6, 1, 0, 7]:
        x = torch.randn(n, 3)
        got, want = g(x), _size_dependent(x)
        assert got[1] == want[1]
        for a, b in ((got[0], want[0]), (got[2], want[2])):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b)
    specialized = [(e.fields["dim"], e.fields["value"]) for e in events if e.name == "dynamic_size_specialized"]
    assert (0, 1) in specialized and (0, 0) in specialized, specialized
