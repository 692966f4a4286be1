"""Training end to end through compiler.compile: graph breaks, loss curves, our C++ backend."""
from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tracetorch import compiler
from tracetorch import logs
from tracetorch.compiler.backends import aot_eager
from tests.compiler.aot.test_training import CNN, MLP, capture


class Breaky(nn.Module):
    """Two graphs: the print() is a graph break between the layers."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        print("graph break")
        return self.fc2(F.dropout(h, 0.2, training=self.training))


def _counting(inner):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return inner(gm, example_inputs)

    return backend, graphs


def test_graph_break_each_graph_gets_forward_and_backward(capsys):
    torch.manual_seed(0)
    model = Breaky()
    ref = copy.deepcopy(model)
    backend, graphs = _counting(aot_eager)
    cm = compiler.compile(model, backend=backend)
    x = torch.randn(8, 16, requires_grad=True)
    rx = x.detach().clone().requires_grad_()
    torch.manual_seed(5)
    out = cm(x)
    torch.manual_seed(5)
    rout = ref(rx)
    assert len(graphs) == 2
    torch.testing.assert_close(out, rout)
    out.square().sum().backward()
    rout.square().sum().backward()
    torch.testing.assert_close(x.grad, rx.grad)
    for (n, p), (_, rp) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, rp.grad, msg=lambda m: f"{n}: {m}")


def _train(model, opt, step, data, steps=20):
    losses = []
    for i in range(steps):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        step()
        losses.append(loss.item())
    return losses


def _data(n=4):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(16, 16, generator=g), torch.randint(0, 4, (16,), generator=g))
            for _ in range(n)]


@pytest.mark.parametrize("backend,opt_cls,tol", [
    ("aot_eager", torch.optim.SGD, 1e-6),
    ("default", torch.optim.Adam, 1e-5),
])
def test_loss_curve_20_steps_matches_eager(backend, opt_cls, tol):
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    kw = dict(lr=0.05, momentum=0.9) if opt_cls is torch.optim.SGD else dict(lr=0.01)
    opt, ref_opt = opt_cls(model.parameters(), **kw), opt_cls(ref.parameters(), **kw)
    cm = compiler.compile(model, backend=backend)
    step = compiler.compile(opt.step, backend=backend)
    data = _data()
    with logs.testing.capture(level=logging.DEBUG) as events:
        losses = _train(cm, opt, step, data)
    names = {e.name for e in events}
    # really compiled: joint graph partitioned, backward compiled, optimizer graph compiled
    assert {"partitioned", "compile_backward", "compile_optimizer_step"} <= names
    assert not names & {"aot_training_fallback", "optimizer_step_fallback"}
    ref_losses = _train(ref, ref_opt, ref_opt.step, data)
    torch.testing.assert_close(losses, ref_losses, rtol=tol, atol=tol)
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=tol * 10, atol=tol * 10)


def test_cpp_backend_cnn_grads():
    from tracetorch.compiler.backend import inner_compile
    from tracetorch.compiler.aot.training import aot_module_training
    torch.manual_seed(0)
    model = CNN()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 3, 12, 12, requires_grad=True)
    rx = x.detach().clone().requires_grad_()
    f = aot_module_training(capture(model), [x], inner_compile)
    out, rout = f(x), ref(rx)
    torch.testing.assert_close(out, rout, rtol=1e-5, atol=1e-5)
    out.pow(2).sum().backward()
    rout.pow(2).sum().backward()
    torch.testing.assert_close(x.grad, rx.grad, rtol=1e-4, atol=1e-5)
    for (n, p), (_, rp) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"{n}: {m}")


class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))


def test_guarded_training_graph_skips_its_key_and_new_sizes_still_recompile():
    """A training graph our frontend captured with static sizes is called only after its guards
    passed, so its runner calls the compiled graph without keying the inputs again; a batch of
    another size misses those guards and is compiled anew (then keyed: dynamic sizes). Losses,
    gradients and running statistics match eager's at every step."""
    torch.manual_seed(0)
    model = BNNet().train()
    ref = copy.deepcopy(model)
    compiled = compiler.compile(model)
    with logs.testing.capture(level=logging.DEBUG, names={"training_input_key_skipped"}) as events:
        for step, batch in enumerate((4, 4, 6, 6)):
            g = torch.Generator().manual_seed(step)
            x = torch.randn(batch, 3, 8, 8, generator=g)
            loss, ref_loss = compiled(x).pow(2).sum(), ref(x).pow(2).sum()
            loss.backward()
            ref_loss.backward()
            torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
            for p, rp in zip(model.parameters(), ref.parameters()):
                torch.testing.assert_close(p.grad, rp.grad, rtol=1e-4, atol=1e-5)
            for b, rb in zip(model.buffers(), ref.buffers()):
                torch.testing.assert_close(b, rb, rtol=1e-5, atol=1e-6)
    skipped = [e for e in events if e.name == "training_input_key_skipped"]
    assert len(skipped) == 1        # the static graph; the recompiled one has dynamic sizes
