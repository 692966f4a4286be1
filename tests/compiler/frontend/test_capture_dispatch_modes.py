"""Capture of code that asks which dispatch modes are active.

Capture runs under modes of its own (FakeTensorMode), so a mode-stack query answered at capture
time describes the capture, not the compiled call. These must run at call time (a graph break),
except the predicates with a fixed answer inside a compiled call (nn.MultiheadAttention's
`_is_make_fx_tracing`), which are answered like Dynamo answers them.
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

from tracetorch import compiler


def stack_depth_plus(x):
    return x + len(_get_current_dispatch_mode_stack())


class CountingMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_mode_stack_query_runs_at_call_time():
    compiler.reset()
    opt = compiler.compile(stack_depth_plus)
    x = torch.zeros(3)
    torch.testing.assert_close(opt(x), stack_depth_plus(x))
    with CountingMode():
        expected = stack_depth_plus(x)
        got = opt(x)
    torch.testing.assert_close(got, expected)
    report = compiler.explain(stack_depth_plus)(x)
    assert report.graph_break_count >= 1
    assert any("dispatch mode stack" in str(r) for r in report.break_reasons)


def test_multihead_attention_is_one_graph_and_matches_eager():
    compiler.reset()
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()

    def f(x):
        return mha(x, x, x, need_weights=False)[0] * 2

    opt = compiler.compile(f)
    with torch.no_grad():
        for n in (5, 5, 7):
            x = torch.randn(2, n, 16)
            torch.testing.assert_close(opt(x), f(x))
        report = compiler.explain(f)(torch.randn(2, 5, 16))
    assert (report.graph_count, report.graph_break_count) == (1, 0)
