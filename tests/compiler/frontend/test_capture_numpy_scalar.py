"""numpy scalar types called with constants (np.float32(2.0)) fold to a constant at trace
time, so float()/arithmetic on them stays in the graph's Python scalars (no graph break)."""
import logging

import numpy as np
import pytest
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import CountingBackend
from tracetorch import logs


@pytest.fixture
def metrics():
    with logs.testing.capture(level=logging.DEBUG, artifacts={"compile_metrics"}) as got:
        compiler.reset()
        yield got
    compiler.reset()


def scale(x):
    return x * float(np.float32(2.5)) + int(np.int64(3))


def test_numpy_scalar_of_constants_folds(metrics):
    c = CountingBackend()
    g = compiler.compile(scale, backend=c)
    for _ in range(2):
        x = torch.randn(4)
        torch.testing.assert_close(g(x), scale(x))
    assert c.graphs == 1
    assert sum(e.payload["graph_break_count"] for e in metrics if e.name == "compile_metrics") == 0


def from_tensor(x):
    return x * float(np.float32(x.sum()))     # not a constant: still a break, still correct


def test_numpy_scalar_of_a_tensor_still_breaks(metrics):
    g = compiler.compile(from_tensor, backend=CountingBackend())
    x = torch.randn(4)
    torch.testing.assert_close(g(x), from_tensor(x))
    assert sum(e.payload["graph_break_count"] for e in metrics if e.name == "compile_metrics") >= 1
