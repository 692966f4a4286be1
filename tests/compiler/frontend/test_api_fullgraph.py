"""fullgraph=True violations: a clear GraphBreakError naming the reason and the user's file:line."""
import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler.errors import CompilerError, GraphBreakError


def prints(x):
    y = x + 1
    print("fullgraph test")
    return y


def item_branch(x):
    if x.sum().item() > 0:
        return x
    return -x


def _inner(x):
    return x.tolist()


def nested(x):
    return _inner(x * 2)


@pytest.mark.parametrize("fn, reason, line", [
    (prints, "print", prints.__code__.co_firstlineno + 2),
    (item_branch, "item", item_branch.__code__.co_firstlineno + 1),
    (nested, "tolist", _inner.__code__.co_firstlineno + 1),
])
def test_fullgraph_break_is_a_clear_error(fn, reason, line):
    compiler.reset()
    f = compiler.compile(fn, backend="eager", fullgraph=True)
    with pytest.raises(GraphBreakError) as info:
        f(torch.randn(3))
    err = info.value
    assert isinstance(err, CompilerError)
    assert reason in err.reason
    assert (err.filename, err.lineno) == (__file__, line)
    text = str(err)
    assert f"{__file__}:{line}" in text and "fullgraph=True" in text


def test_fullgraph_without_breaks_works():
    f = compiler.compile(lambda x: x.relu() * 2, backend="eager", fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(f(x), x.relu() * 2)


def test_backend_failure_is_named():
    def broken(gm, example_inputs):
        raise RuntimeError("boom")

    f = compiler.compile(lambda x: x + 1, backend=broken)
    with pytest.raises(compiler.errors.BackendCompilerFailed, match="backend 'broken' raised RuntimeError: boom"):
        f(torch.ones(2))
