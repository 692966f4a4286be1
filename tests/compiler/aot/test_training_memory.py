"""Memory of a compiled training step against eager's: what is saved for backward, when it is
freed, and the peak of forward + backward (profiler allocation tracking, CPU)."""
from __future__ import annotations

import copy
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from tracetorch import compiler
from tests.compiler.aot.test_training import compile_training


class ResidualStack(nn.Module):
    """x + f(LN(x)) blocks: the residual stream is what the backward needs (LayerNorm's
    input); the summands are not."""

    def __init__(self, d=64, depth=3):
        super().__init__()
        self.lns = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.fcs = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))

    def forward(self, x):
        for ln, fc in zip(self.lns, self.fcs):
            x = x + F.gelu(fc(ln(x)))
        return x


class SavedBytes:
    """saved_tensors_hooks counting distinct non-parameter storages autograd saves."""

    def __init__(self, model):
        self.skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.storages = {}

    def pack(self, t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.skip:
            self.storages[ptr] = t.untyped_storage().nbytes()
        return t

    def total(self):
        return sum(self.storages.values())


def _step_memory(fwd, model, x):
    """(saved bytes, peak bytes allocated above the start) of forward + backward."""
    saved = SavedBytes(model)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
            loss = fwd(x).square().mean()
        loss.backward()
        del loss
    live = peak = 0
    for _, nbytes in sorted((e.start_ns(), e.nbytes())
                            for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"):
        live += nbytes
        peak = max(peak, live)
    return saved.total(), peak


def test_saved_and_peak_bytes_never_exceed_eager():
    torch.manual_seed(0)
    model = ResidualStack(d=256, depth=3)
    ref = copy.deepcopy(model)
    compiled = compiler.compile(model)
    x = torch.randn(512, 256)
    for _ in range(2):                      # compile forward and (lazily) backward first
        compiled(x).square().mean().backward()
        ref(x).square().mean().backward()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-4, atol=1e-5)
        p.grad = rp.grad = None
    ours_saved, ours_peak = _step_memory(compiled, model, x)
    eager_saved, eager_peak = _step_memory(ref, ref, x)
    assert 0 < ours_saved <= eager_saved
    # the backward frees each saved value after its last use (as eager frees a node's saved
    # tensors once it has run) and recomputes from the residual stream, not its summands
    assert ours_peak <= eager_peak, (ours_peak, eager_peak)
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-4, atol=1e-5)


class LinearResidualStack(nn.Module):
    """x + fc(LN(x)): the backward needs neither summand fc(...) (a linear's backward needs its
    input) but needs each residual stream value (the next LayerNorm's input)."""

    def __init__(self, d=32, depth=3):
        super().__init__()
        self.lns = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.fcs = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))

    def forward(self, x):
        for ln, fc in zip(self.lns, self.fcs):
            x = x + fc(ln(x))
        return x


def test_partition_saves_the_residual_stream_not_its_summands():
    """Saving x1 = x0 + a1 costs the bytes of saving a1: the tie goes to the later value, so
    the backward does not rebuild the stream from every summand (long live ranges). A
    LayerNorm output the backward's matrix product reads, whose rebuilding would read the
    stream's summands, is saved (partition.materialized_in_backward); never more full-size
    values than eager saves (each layer's LayerNorm input and output: 6)."""
    from tests.compiler.aot.test_training import run_as_is
    torch.manual_seed(0)
    model = LinearResidualStack()
    x = torch.randn(8, 32)
    f = compile_training(model, [x], run_as_is)
    saved = [n.name for n in f.runtime.backward_graph.graph.nodes if n.op == "placeholder"
             and tuple(n.meta["val"].shape) == (8, 32) and not n.name.startswith("tangents")]
    assert len(saved) <= 6 and not [s for s in saved if s.startswith("addmm")], saved
    torch.testing.assert_close(f(x), model(x))


def test_saved_activation_is_released_by_backward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = torch.randn(8, 16)
    f = compile_training(model, [x])
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept = []

    def pack(t):
        if t.untyped_storage().data_ptr() not in params and t is not x:
            kept.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = f(x).sum()
    assert kept and all(r() is not None for r in kept)
    loss.backward()
    assert all(r() is None for r in kept)


def test_compiled_backward_is_called_boxed_and_drops_its_inputs():
    """Our backend's backward frees each saved input after its last use: it is called with a
    list it clears (no caller frame keeps the inputs) and its output code dels them."""
    from tracetorch.compiler.backend import inner_compile
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = torch.randn(8, 16)
    ref = copy.deepcopy(model)
    f = compile_training(model, [x], inner_compile)
    f(x).sum().backward()
    ref(x).sum().backward()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad)
    rt = f.runtime
    assert hasattr(rt._compiled_backward, "call_boxed")
    code = rt._compiled_backward.code
    assert "args.clear()" in code and "del arg" in code
