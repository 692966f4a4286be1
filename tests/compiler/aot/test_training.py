"""Training path (joint graph -> partition -> autograd.Function): gradients match eager.

Every test compiles an FX graph with `aot_module_training` and a "run the graph as is" inner
compiler (the aot_eager setup), and compares outputs, input gradients, parameter gradients
and buffers with eager PyTorch: float32 with tight tolerances, and float64 (where rounding
differences from decomposed ops vanish) with very tight ones.
"""
from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from tracetorch.compiler import config
from tracetorch.compiler.aot.autograd_function import TrainingRuntime
from tracetorch.compiler.aot.training import aot_module_training, needs_autograd
from tracetorch.logs.testing import capture as capture_logs


def run_as_is(gm, example_inputs):
    return gm


def capture(module) -> fx.GraphModule:
    # proxy_buffer_attributes: without it fx runs in-place buffer updates at trace time
    tracer = fx.Tracer()
    tracer.proxy_buffer_attributes = True
    return fx.GraphModule(module, tracer.trace(module))


def compile_training(module, inputs, inner=run_as_is):
    return aot_module_training(capture(module), inputs, inner)


def check_grads(model, make_inputs, dtype=torch.float32, seed=None, loss=lambda o: o.pow(2).sum()):
    """Compile `model`, run forward+backward on compiled and eager copies, compare everything."""
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    model = model.to(dtype)
    ref = copy.deepcopy(model)
    inputs = [x.to(dtype).requires_grad_(x.is_floating_point()) for x in make_inputs()]
    ref_inputs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    compiled = compile_training(model, inputs)
    if seed is not None:
        torch.manual_seed(seed)
    out = compiled(*inputs)
    if seed is not None:
        torch.manual_seed(seed)
    ref_out = ref(*ref_inputs)
    torch.testing.assert_close(out, ref_out, **tol)
    loss(out).backward()
    loss(ref_out).backward()
    for x, rx in zip(inputs, ref_inputs):
        if rx.requires_grad:
            torch.testing.assert_close(x.grad, rx.grad, **tol)
    for (name, p), (_, rp) in zip(model.named_parameters(), ref.named_parameters()):
        assert (p.grad is None) == (rp.grad is None), name
        if rp.grad is not None:
            torch.testing.assert_close(p.grad, rp.grad, **tol, msg=lambda m: f"{name}: {m}")
    for (name, b), (_, rb) in zip(model.named_buffers(), ref.named_buffers()):
        torch.testing.assert_close(b, rb, **tol, msg=lambda m: f"buffer {name}: {m}")
    return compiled


class MLP(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                                 nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """A pre-norm transformer block written out (symbolic_trace friendly)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        y = att.softmax(dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
        self.fc = nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        return self.fc(x.flatten(1))


class Dropouts(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(F.dropout(F.relu(self.fc1(x)), 0.3, training=True))


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.register_buffer("running", torch.zeros(8))

    def forward(self, x):
        self.calls.add_(1)                       # buffer mutation: written back
        h = self.fc(x)
        h.mul_(2.0)                              # in-place on activations
        h.relu_()
        self.running.mul_(0.9).add_(h.detach().mean(0), alpha=0.1)
        return h * x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mlp_grads(dtype):
    torch.manual_seed(0)
    check_grads(MLP(), lambda: [torch.randn(8, 16)], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_transformer_block_grads(dtype):
    torch.manual_seed(0)
    check_grads(Block(), lambda: [torch.randn(2, 5, 16)], dtype)


def test_cnn_grads_and_batchnorm_running_stats():
    torch.manual_seed(0)
    check_grads(CNN(), lambda: [torch.randn(2, 3, 12, 12)], torch.float64)
    torch.manual_seed(0)
    check_grads(CNN(), lambda: [torch.randn(2, 3, 12, 12)], torch.float32)


def test_dropout_same_seed_same_mask():
    torch.manual_seed(0)
    check_grads(Dropouts(), lambda: [torch.randn(4, 16)], torch.float32, seed=123)


def test_in_place_ops_and_buffer_writeback():
    torch.manual_seed(0)
    model = InPlace()
    compiled = check_grads(model, lambda: [torch.randn(4, 8)], torch.float32)
    assert model.calls.item() == 1
    compiled(torch.randn(4, 8, requires_grad=True))
    assert model.calls.item() == 2


def test_output_aliasing_an_input_is_a_view():
    class Alias(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x):
            return self.fc(x), x.view(-1)[2:]

    torch.manual_seed(0)
    model = Alias()
    x = torch.randn(3, 6, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    f = compile_training(model, [x])
    out, view = f(x)
    rout, rview = model(xr)
    torch.testing.assert_close(view, rview)
    assert view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    (out.sum() + (view * view).sum()).backward()
    model.zero_grad()
    (rout.sum() + (rview * rview).sum()).backward()
    torch.testing.assert_close(x.grad, xr.grad)


def test_unused_output_gets_zero_tangent():
    class TwoOut(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            h = self.fc(x)
            return h.sin(), h.cos()

    torch.manual_seed(0)
    model = TwoOut()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 4)
    f = compile_training(model, [x])
    f(x)[0].sum().backward()
    ref(x)[0].sum().backward()
    torch.testing.assert_close(model.fc.weight.grad, ref.fc.weight.grad)


def _mlp_compiled_counting(**options):
    """(compiled MLP, the kinds of graph its inner compiler was given so far, the model, its
    eager twin, an input): compiled under config `options` with an inner compiler that records
    each graph it compiles."""
    compiled = []

    def counting(gm, example_inputs):
        compiled.append(gm.__class__.__name__)
        return gm

    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    x = torch.randn(4, 16)
    with config.patch(**options):
        f = aot_module_training(capture(model), [x], counting)
    return f, compiled, model, ref, x


@pytest.mark.parametrize("ahead", [True, False])
def test_backward_compiled_once_ahead_or_lazily(ahead):
    """Ahead (the default): with the forward, on fake inputs; the real first backward reuses
    it. Lazily: at the first backward, never for a forward that is not differentiated."""
    f, compiled, model, ref, x = _mlp_compiled_counting(**{"aot.compile_backward_ahead": ahead})
    first = ["ForwardGraph", "BackwardGraph"] if ahead else ["ForwardGraph"]
    assert compiled == first
    f(x).sum()                                   # forward only: no backward compile
    assert compiled == first
    f(x).sum().backward()
    f(x).sum().backward()
    assert compiled == ["ForwardGraph", "BackwardGraph"]
    ref(x).sum().backward()
    ref(x).sum().backward()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


def test_backward_compiled_ahead_is_recompiled_when_an_input_layout_differs(monkeypatch):
    """The prediction is checked, never trusted: a saved value arriving in other strides than
    it was compiled for (here: the recorded prediction is changed after the ahead compile)
    makes the first backward compile again, with the reason logged; gradients stay right."""
    changed = []
    ahead = TrainingRuntime.compile_backward_ahead

    def mispredicting(self, predicted):
        ahead(self, predicted)
        layouts = self._ahead[1]
        i = next(i for i, lay in enumerate(layouts) if lay is not None and len(lay[0]) == 2)
        shape, _, dtype = layouts[i]
        layouts[i] = (shape, (1, shape[0]), dtype)      # "predicted" column-major
        changed.append(i)
    monkeypatch.setattr(TrainingRuntime, "compile_backward_ahead", mispredicting)
    f, compiled, model, ref, x = _mlp_compiled_counting()
    assert compiled == ["ForwardGraph", "BackwardGraph"]
    with capture_logs(["backward_recompiled"], level=logging.DEBUG) as events:
        f(x).sum().backward()
    assert compiled == ["ForwardGraph", "BackwardGraph", "BackwardGraph"]
    assert [e.name for e in events] == ["backward_recompiled"]
    assert f"input {changed[0]} arrived as" in events[0].fields["reason"]
    ref(x).sum().backward()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


def test_double_backward_raises_clear_error_only_when_attempted():
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    x = torch.randn(4, 16, requires_grad=True)
    f = compile_training(model, [x])
    (g,) = torch.autograd.grad(f(x).pow(2).sum(), x, create_graph=True)
    (rg,) = torch.autograd.grad(ref(x).pow(2).sum(), x, create_graph=True)
    torch.testing.assert_close(g, rg)            # first-order grads with create_graph are right
    with pytest.raises(RuntimeError, match="double backward"):
        g.sum().backward()


def test_no_grad_inputs_and_frozen_params():
    torch.manual_seed(0)
    model = MLP()
    model.net[0].weight.requires_grad_(False)
    check_grads(model, lambda: [torch.randn(4, 16)], torch.float32)


def test_needs_autograd():
    model = capture(MLP())
    x = torch.randn(2, 16)
    assert needs_autograd(model, [x])
    with torch.no_grad():
        assert not needs_autograd(model, [x])
    for p in model.parameters():
        p.requires_grad_(False)
    assert not needs_autograd(model, [x])
    assert needs_autograd(model, [x.requires_grad_()])


def test_graph_breaks_each_graph_its_own_pair():
    """Two separately compiled graphs with eager code between them (what a graph break gives):
    gradients flow through both compiled backwards and the eager region."""
    torch.manual_seed(0)
    first, second = MLP(), nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))
    rfirst, rsecond = copy.deepcopy(first), copy.deepcopy(second)
    x = torch.randn(5, 16)
    g1 = compile_training(first, [x])
    h = torch.randn(5, 4, requires_grad=True)
    g2 = compile_training(second, [h])
    out = g2(g1(x).exp())                        # .exp() runs eagerly between the graphs
    ref = rsecond(rfirst(x).exp())
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    for p, rp in zip(list(first.parameters()) + list(second.parameters()),
                     list(rfirst.parameters()) + list(rsecond.parameters())):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-5, atol=1e-6)


def test_other_input_sizes_get_their_own_specialisation():
    compiled = []

    def counting(gm, example_inputs):
        compiled.append(gm.__class__.__name__)
        return gm

    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    f = aot_module_training(capture(model), [torch.randn(4, 16)], counting)
    for n in (7, 4, 7):                          # 7: a new specialisation, compiled once
        x = torch.randn(n, 16)
        model.zero_grad()
        ref.zero_grad()
        f(x).sum().backward()
        ref(x).sum().backward()
        for p, rp in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, rp.grad)
    assert compiled.count("ForwardGraph") == 2 and compiled.count("BackwardGraph") == 2


def test_lstm_falls_back_to_eager_and_stays_correct():
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 8, batch_first=True)

        def forward(self, x):
            return self.lstm(x)[0]

    torch.manual_seed(0)
    check_grads(Tagger(), lambda: [torch.randn(2, 5, 6)], torch.float32)


def test_beyond_the_specialisation_limit_runs_eagerly(monkeypatch):
    from tracetorch.compiler.aot.training import SpecializingRunner
    monkeypatch.setattr(SpecializingRunner, "LIMIT", 1)
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    f = compile_training(model, [torch.randn(4, 16)])
    x = torch.randn(9, 16)
    f(x).sum().backward()
    ref(x).sum().backward()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad)
    assert len(f.runners) == 1 and len(f.failed) == 1


def test_scalar_inputs_are_specialised_on():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x, n):
            return self.fc(x) * n

    torch.manual_seed(0)
    model = Scale()
    ref = copy.deepcopy(model)
    x = torch.randn(3, 4)
    f = aot_module_training(capture(model), [x, 2], run_as_is)
    for n in (2, 3):
        model.zero_grad()
        ref.zero_grad()
        f(x, n).sum().backward()
        ref(x, n).sum().backward()
        torch.testing.assert_close(model.fc.weight.grad, ref.fc.weight.grad)
    assert len(f.runners) == 2


def test_batch_norm_running_stats_are_written_by_the_compiled_forward():
    """Training through the default backend: the forward graph writes the running statistics
    into the buffers itself (copy_ into its inputs, stored by the kernels computing them), not
    the autograd function one copy per buffer; nothing runs eagerly, and buffers, outputs and
    gradients match eager's over several steps."""
    import copy
    import logging

    from tracetorch import compiler
    from tracetorch.logs.testing import capture as capture_events
    torch.manual_seed(0)
    model = CNN().train()
    twin = copy.deepcopy(model)
    compiled = compiler.compile(twin)
    with capture_events(level=logging.DEBUG) as events:
        for step in range(3):
            x = torch.randn(2, 3, 12, 12)
            ref, got = model(x), compiled(x)
            torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
            ref.pow(2).sum().backward()
            got.pow(2).sum().backward()
            for (name, a), b in zip(model.named_buffers(), twin.buffers()):
                torch.testing.assert_close(b, a, msg=f"buffer {name} after step {step}")
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-5)
    names = [e.name for e in events]
    assert "mutations_written_in_graph" in names
    assert not {"graph_runs_eagerly", "backend_compile_failed", "aot_runs_eagerly"} & set(names), names
