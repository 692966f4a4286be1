"""Drive capture_frame directly (no runtime cache): a recording backend that runs the graph,
and a make_compiled_callable that captures a resume function / callee on each call."""
from __future__ import annotations

import torch

from tracetorch.compiler.frontend.capture import capture_frame


class CountingBackend:
    """A torch.compile-style backend that runs each graph as captured and counts the graphs."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


class GraphListBackend:
    """A torch.compile-style backend that runs each graph as captured and keeps the graphs."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


class Recorder:
    def __init__(self):
        self.graphs = []
        self.results = []
        self.breaks = []

    def backend(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def make(self, fn):
        def run(*args, **kwargs):
            r = self.capture(fn, args, kwargs)
            return r.fn(*args, **kwargs)
        run.__wrapped__ = fn
        return run

    def capture(self, fn, args, kwargs, fullgraph=False, dynamic_dims=None):
        r = capture_frame(fn, args, kwargs, compile_id=None, backend=self.backend,
                          fullgraph=fullgraph, dynamic_dims=dynamic_dims or {},
                          make_compiled_callable=self.make)
        self.results.append(r)
        self.breaks += r.graph_breaks
        return r


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and \
            torch.allclose(a, b, equal_nan=True, atol=1e-6)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def check(fn, *args, **kwargs):
    """Capture fn on args, run the transformed function, compare with eager; returns the
    Recorder (graphs, breaks) of the capture."""
    rec = Recorder()
    expected = fn(*args, **kwargs)
    r = rec.capture(fn, args, kwargs)
    got = r.fn(*args, **kwargs)
    assert same(expected, got), f"{fn.__name__}: eager {expected!r} != compiled {got!r}"
    return rec
