"""numpy on tensors traced into the graph (frontend/numpy_calls.py): numpy's values and dtypes,
arrays and numpy scalars that leave the graph, and the graph breaks (with reasons) for what is
not traced. Every compiled result is compared with eager."""
import numpy as np
import pytest
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import CountingBackend


def _compile(fn, backend=None):
    compiler.reset()
    backend = backend or CountingBackend()
    return compiler.compile(fn, backend=backend), backend


def _same(got, expected):
    assert type(got) is type(expected)
    if isinstance(expected, (np.ndarray, np.generic)):
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
    else:
        assert got == expected


def test_dtypes_follow_numpy():
    def f(x):
        a = x.numpy()
        return (np.cos(a), np.array([1.0, 2.0]), a * 2.0, a + np.float64(1.0),
                np.sum(a), np.mean(a.astype(np.int64)), a.dtype, a.shape)

    x = torch.randn(3, 2)
    compiled, backend = _compile(f)
    _same(compiled(x), f(x))
    assert backend.graphs == 1


def test_array_across_a_graph_break():
    def f(x):
        a = np.exp(x.numpy())
        print("numpy: break")
        return torch.from_numpy(a) + 1

    x = torch.randn(4)
    compiled, _ = _compile(f)
    report = compiler.explain(f)(x)
    _same(compiled(x), f(x))
    assert report.graph_break_count == 1 and "print" in str(report.break_reasons[0].reason)


def test_in_place_change_breaks_and_mutates_like_eager():
    def f(x):
        a = x.numpy()
        a += 1                       # writes through to x, as in eager
        return torch.from_numpy(np.sin(a))

    x, x_eager = torch.randn(3), None
    x_eager = x.clone()
    compiled, _ = _compile(f)
    got = compiled(x)
    expected = f(x_eager)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x, x_eager)
    report = compiler.explain(f)(torch.randn(3))
    assert report.graph_break_count >= 1
    assert any("numpy array" in str(r.reason) for r in report.break_reasons)


def test_tensor_requiring_grad_raises_like_eager():
    def f(x):
        return np.cos(x.numpy())

    x = torch.randn(3, requires_grad=True)
    compiled, _ = _compile(f)
    with pytest.raises(RuntimeError) as eager_error:
        f(x)
    with pytest.raises(RuntimeError) as compiled_error:
        compiled(x)
    assert str(compiled_error.value) == str(eager_error.value)


def test_untraced_numpy_breaks_with_reason():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(a * np.random.default_rng(0).random(a.shape))

    x = torch.randn(3)
    compiled, _ = _compile(f)
    _same(compiled(x), f(x))
    report = compiler.explain(f)(x)
    assert report.graph_break_count >= 1


def test_through_aot_eager():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(np.where(a > 0, np.sqrt(np.abs(a)), (a @ a.T)[:, :1].sum()))

    x = torch.randn(3, 3)
    compiled, _ = _compile(f, backend="aot_eager")
    _same(compiled(x), f(x))


def test_ndarray_argument_traced_and_returned_as_itself():
    def f(a, x):
        b = np.tanh(a) * 2
        return a, torch.from_numpy(b) + x, b

    compiled, backend = _compile(f)
    a, x = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32), torch.randn(3, 2)
    got = compiled(a, x)
    assert got[0] is a                   # the caller's array, not a new view of it
    _same(got[1:], f(a, x)[1:])
    assert backend.graphs == 1
    # an array torch.from_numpy rejects (negative strides): the guard misses, then a break
    b = np.arange(6.0).reshape(2, 3)[:, ::-1]
    _same(compiled(b, torch.randn(2, 3))[2], f(b, torch.randn(2, 3))[2])


def test_builtins_on_arrays():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(abs(a) * len(a)), isinstance(a, np.ndarray), type(a) is np.ndarray

    x = torch.randn(3, 2)
    compiled, backend = _compile(f)
    _same(compiled(x), f(x))
    assert backend.graphs == 1 and compiler.explain(f)(x).graph_break_count == 0
