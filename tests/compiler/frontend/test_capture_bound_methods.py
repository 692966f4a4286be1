"""A bound method of a list/dict that reaches a frame as a value (a resume function's stack
slot holding `_LOG.append` across a graph break, or an argument) is the container's method:
calls on it are traced (an append stays a side effect, replayed on the real list) with no
length guard on the list, instead of an opaque call that breaks the graph again."""
import logging

import pytest
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import CountingBackend
from tracetorch import logs

LOG = []


@pytest.fixture
def events():
    with logs.testing.capture(level=logging.DEBUG,
                              artifacts={"recompile", "guards", "compile_metrics"}) as got:
        compiler.reset()
        yield got
    compiler.reset()
    LOG.clear()


def log_sum(x):
    y = x * 2
    LOG.append(float(y.sum()))      # float(tensor) breaks; LOG.append crosses on the stack
    return y


def test_append_across_break_is_traced_without_length_guard(events):
    g = compiler.compile(log_sum, backend=CountingBackend())
    for i in range(4):
        x = torch.randn(3, 4)
        LOG.clear()
        expected = log_sum(x)
        want = list(LOG)
        LOG.clear()
        torch.testing.assert_close(g(x), expected)
        assert LOG == want
    metrics = [e.payload for e in events if e.name == "compile_metrics"]
    assert sum(m["graph_break_count"] for m in metrics if m["has_guarded_code"]) == 1
    assert [e for e in events if e.name == "recompile"] == []
    assert not any("LENGTH_CHECK" in e.payload for e in events if e.name == "guards")


def push_sum(x, push):
    push(x.sum() * 2)
    return x + 1


def test_bound_append_argument_goes_to_its_own_list(events):
    c = CountingBackend()
    g = compiler.compile(push_sum, backend=c)
    a, b = [], []
    ea, eb = [], []
    for target, eager_target in ((a, ea), (b, eb), (a, ea)):
        x = torch.randn(3)
        expected = push_sum(x, eager_target.append)
        torch.testing.assert_close(g(x, target.append), expected)
    torch.testing.assert_close(a, ea)
    torch.testing.assert_close(b, eb)
    assert c.graphs == 1                  # the method is guarded by type and name, not identity
    guards = [e.payload for e in events if e.name == "guards"][-1]
    assert "L['push'].__name__ == 'append'" in guards


def test_other_bound_method_name_recompiles(events):
    g = compiler.compile(push_sum, backend=CountingBackend())
    a, ea = [], []
    for name in ("append", "count", "append"):
        x = torch.randn(3)
        torch.testing.assert_close(g(x, getattr(a, name)), push_sum(x, getattr(ea, name)))
    torch.testing.assert_close(a, ea)
    reasons = [str(e.payload["reasons"]) for e in events if e.name == "recompile"]
    assert len(reasons) == 1 and "__name__" in reasons[0], reasons
