"""Autotuning sweeps never change results. A sweep launches a kernel once per candidate config
before its real launch; those timing runs must write only into scratch copies (in the written
arguments' own layouts), whatever the kernel reads and writes: in-place buffers, slices of larger
buffers, mutated inputs (batch-norm statistics, optimizer state).

On a GPU the sweep runs at every first launch of a looped reduction; under the Triton interpreter
(CPU) it is skipped, so here it is forced: every kernel with more than one candidate is swept
(pointwise and persistent ones too, and reductions made looped by a small persistent limit), each
candidate launched twice, and the candidate timed fastest is not always the default. Whole
training steps (forward, backward, compiled AdamW step) are compared with eager's, step by step.
"""
import copy
import itertools
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

pytest.importorskip("triton")

from tracetorch import compiler  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend import autotune  # noqa: E402

SWEEP_EVERYTHING = {"backend.cpu_codegen": "triton", "backend.cache_enabled": False,
                    "triton.autotune_pointwise": True, "triton.persistent_reduction_max": 16,
                    "triton.autotune_max_configs": 2}


@pytest.fixture
def forced_sweeps(monkeypatch, tmp_path):
    """Sweep under the interpreter, with timings that make the second candidate win every other
    time (so real launches use configs other than the default too)."""
    import triton.testing
    from tracetorch.compiler.backend.runtime import triton_launch
    monkeypatch.setattr(triton_launch, "kernel_dir", lambda: str(tmp_path))
    monkeypatch.setattr(autotune, "_no_sweep_reason",
                        lambda kernel, candidates: None if len(candidates) > 1 else "single candidate")
    fake_ms = itertools.cycle([2.0, 1.0, 1.0, 2.0])
    swept = []

    def do_bench(fn, **kw):
        fn()
        fn()
        swept.append(1)
        return next(fake_ms)
    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    autotune.clear_memory_cache()
    yield swept
    autotune.clear_memory_cache()


class _Block(torch.nn.Module):
    """A transformer block: the q, k, v gradients are slices of one buffer (the qkv projection's
    input gradient), and bias gradients sum over flattened tokens."""
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


class _ConvNet(torch.nn.Module):
    """Batch norm in training: per-channel statistics and running-statistics updates (mutated
    inputs) over channels-last activations."""
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.conv2, self.bn2 = torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + y)


def _train_against_eager(model, batch, options):
    ours = copy.deepcopy(model)
    # eps well above the rounding noise of gradients that are 0 in exact arithmetic (a key
    # projection's bias: softmax ignores a shift shared by all keys), which Adam would otherwise
    # scale up to a full step of either sign
    opt_e = torch.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-3)
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-2, eps=1e-3)
    with config.patch(**options):
        fwd = compiler.compile(ours)
        step = compiler.compile(opt_o.step)
        for i in range(3):
            x = batch(i)
            want = model(x).square().mean()
            want.backward()
            opt_e.step()
            opt_e.zero_grad(set_to_none=True)
            got = fwd(x).square().mean()
            got.backward()
            step()
            opt_o.zero_grad(set_to_none=True)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5,
                                       msg=f"loss of step {i}: {float(got)}, eager's {float(want)}")
            for (name, a), b in zip(model.state_dict().items(), ours.state_dict().values()):
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5,
                                           msg=lambda m, name=name, i=i: f"{name} after step {i}: {m}")


def test_sweeps_leave_a_transformer_blocks_training_steps_as_eager(forced_sweeps):
    torch.manual_seed(0)
    _train_against_eager(_Block(), lambda i: torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(i)),
                         SWEEP_EVERYTHING)
    assert len(forced_sweeps) > 10


def test_sweeps_leave_batch_norm_training_steps_as_eager(forced_sweeps):
    torch.manual_seed(0)
    _train_against_eager(_ConvNet(), lambda i: torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(i)),
                         {**SWEEP_EVERYTHING, "backend.conv_layout": "channels_last"})
    assert len(forced_sweeps) > 10
