"""Mixed-precision training (torch.autocast around the forward, as bench_real_models --autocast
runs it): compiled model and compiled optimizer step against eager, step by step.

Autocast decides per op which dtype it runs in; the frontend captures the casts it inserts and
the backward must cast gradients back to each parameter's float32. A convolution net with batch
norm and a transformer block with attention each train three steps in bfloat16 on the CPU with
the default backend (generated C++ kernels); losses, gradients and updated parameters are
compared with the same steps run eagerly."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.compiler.aot.test_training import Block as TransformerBlock
from tracetorch import compiler


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x, target):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)) + y)
        logits = self.head(y.mean((2, 3)))
        return F.cross_entropy(logits, target)


class Block(TransformerBlock):
    """test_training's transformer block with its attention through scaled_dot_product_attention
    (causal) and a classification loss: autocast picks each op's dtype inside fused attention too."""

    def __init__(self, d=16, heads=2):
        super().__init__(d, heads)
        self.head = nn.Linear(d, 7)

    def forward(self, x, target):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return F.cross_entropy(self.head(x).flatten(0, 1), target.flatten())


CASES = {
    "convnet": (ConvNet, lambda g: (torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 5, (4,), generator=g))),
    "block": (Block, lambda g: (torch.randn(2, 6, 16, generator=g), torch.randint(0, 7, (2, 6), generator=g))),
}


def _train(model, compiled: bool, batches):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    fn = compiler.compile(model) if compiled else model
    step = compiler.compile(opt.step) if compiled else opt.step
    losses, grads = [], []
    for x, target in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = fn(x, target)
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    return losses, grads, [p.detach() for p in model.parameters()]


def _replay_optimizer(model, grads):
    """Eager AdamW fed the compiled run's gradients, step by step: what the compiled optimizer
    step must give. Compared with the fully eager run instead, the parameters carry the bf16
    differences of the gradients through AdamW, which turns a near-zero gradient of the other
    sign into a step of the other sign (+-lr): two of ConvNet's 216 first-layer weights ended
    0.011 apart after three steps, on code whose gradients and optimizer both match eager."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step_grads in grads:
        for p, g in zip(model.parameters(), step_grads):
            p.grad = g.clone()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bfloat16_autocast_training_steps_match_eager(case):
    compiler.reset()
    make, data = CASES[case]
    torch.manual_seed(0)
    model = make().train()
    initial = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    batches = [data(g) for _ in range(3)]
    got = _train(copy.deepcopy(model), True, batches)
    want = _train(model, False, batches)
    for step, (a, b) in enumerate(zip(got[0], want[0])):
        assert a.dtype == b.dtype == torch.float32, "autocast's loss is float32 (cross_entropy runs in float32)"
        torch.testing.assert_close(a, b, rtol=2e-3, atol=2e-3, msg=f"loss of step {step}")
    for step, (ga, gb) in enumerate(zip(got[1], want[1])):
        for i, (a, b) in enumerate(zip(ga, gb)):
            assert a.dtype == b.dtype == torch.float32, f"gradient {i} of step {step} in {a.dtype}"
            torch.testing.assert_close(a, b, rtol=5e-2, atol=5e-2, msg=f"gradient {i} of step {step}")
    # the compiled optimizer step against eager AdamW on the same gradients (float32 throughout)
    for i, (a, b) in enumerate(zip(got[2], _replay_optimizer(initial, got[1]))):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"parameter {i} after three steps")
