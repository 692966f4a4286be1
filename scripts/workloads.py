"""The benchmark workload suite (issue 4): small programs that stress one part of the backend each.

Every workload is a `Workload`: a name, a builder that returns `(fn, inputs)` for a device, dtype
and size preset, and `min_bytes(inputs, out)`: the fewest bytes the program must move through
device memory (each input read once, each output written once). Memory-bound workloads report
achieved GB/s from that number; compute-bound ones (matmul/conv heavy) set `memory_bound=False`
and report no GB/s, because bandwidth is not their ceiling.

Sizes: "cuda" sizes fill an H100 (tens to hundreds of MB per tensor) so that launch overhead does
not dominate; "cpu" sizes keep a CPU run to seconds; "quick" shrinks either for smoke tests.
The programs run in inference mode (modules in eval(), called under torch.no_grad()).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

# the model suite's attention (GPT-2's causal SDPA): one definition for the suite and the workloads
from scripts.models.transformers_zoo import CausalSelfAttention


@dataclasses.dataclass
class Workload:
    name: str
    build: Callable[[str, torch.dtype, str], tuple[Callable, tuple]]  # (device, dtype, preset)
    memory_bound: bool
    description: str

    def min_bytes(self, inputs, out) -> int:
        """Bytes read (every tensor input once) plus bytes written (every tensor output once)."""
        return _nbytes(inputs) + _nbytes(out)


def _nbytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_nbytes(o) for o in obj.values())
    return 0


def _pick(preset: str, cuda, cpu, quick):
    return {"cuda": cuda, "cpu": cpu, "quick": quick}[preset]


def _randn(shape, device, dtype, scale=1.0):
    return (torch.randn(shape, device=device, dtype=torch.float32) * scale).to(dtype)


# ---------------------------------------------------------------- memory-bound workloads

def pointwise_chain(x, y):
    # Five eager kernels; one fused kernel reads x, y once and writes once.
    return torch.sigmoid(x * 1.5 + y).sin() * y - x.relu()


def _build_pointwise(device, dtype, preset):
    n = _pick(preset, 1 << 26, 1 << 20, 1 << 14)
    return pointwise_chain, (_randn((n,), device, dtype), _randn((n,), device, dtype))


def softmax(x):
    return torch.softmax(x, dim=-1)


def _build_softmax(device, dtype, preset):
    m, n = _pick(preset, (32768, 4096), (1024, 1024), (64, 128))
    return softmax, (_randn((m, n), device, dtype),)


def layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _build_layernorm(device, dtype, preset):
    m, n = _pick(preset, (32768, 4096), (1024, 1024), (64, 128))
    return layernorm, (_randn((m, n), device, dtype), _randn((n,), device, dtype),
                       _randn((n,), device, dtype))


def rmsnorm(x, w):
    # Written the way nanoGPT/Llama code writes it (upcast, mean of squares, rsqrt, downcast).
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
    return y.to(x.dtype) * w


def _build_rmsnorm(device, dtype, preset):
    m, n = _pick(preset, (32768, 4096), (1024, 1024), (64, 128))
    return rmsnorm, (_randn((m, n), device, dtype), _randn((n,), device, dtype))


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def _build_cross_entropy(device, dtype, preset):
    b, v = _pick(preset, (8192, 32768), (512, 4096), (32, 100))
    logits = _randn((b, v), device, dtype)
    target = torch.randint(0, v, (b,), device=device)
    return cross_entropy, (logits, target)


# ---------------------------------------------------------------- compute-heavy workloads

class GeluMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        # The bias add + gelu is the epilogue a fusing backend puts in one kernel after the matmul.
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class TransformerBlock(nn.Module):
    """nanoGPT's Block: pre-norm attention and MLP with residual adds."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = GeluMLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class CNNBlock(nn.Module):
    """A ResNet basic block in eval mode: conv-bn-relu-conv-bn + residual, relu."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


def _module(mod, device, dtype):
    torch.manual_seed(0)
    mod = mod.to(device=device, dtype=dtype).eval()
    for m in mod.modules():
        if isinstance(m, nn.BatchNorm2d):   # non-trivial running stats, so bn is not the identity
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return mod


def _build_gelu_mlp(device, dtype, preset):
    tokens, d = _pick(preset, (8192, 2048), (256, 256), (16, 32))
    return _module(GeluMLP(d), device, dtype), (_randn((tokens, d), device, dtype),)


def _build_attention(device, dtype, preset):
    b, t, d, h = _pick(preset, (8, 1024, 1024, 16), (2, 128, 128, 4), (1, 16, 32, 2))
    return _module(CausalSelfAttention(d, h), device, dtype), (_randn((b, t, d), device, dtype),)


def _build_transformer(device, dtype, preset):
    b, t, d, h = _pick(preset, (8, 1024, 1024, 16), (2, 128, 128, 4), (1, 16, 32, 2))
    return _module(TransformerBlock(d, h), device, dtype), (_randn((b, t, d), device, dtype),)


def _build_cnn(device, dtype, preset):
    n, c, hw = _pick(preset, (32, 128, 56), (4, 32, 28), (1, 8, 8))
    x = _randn((n, c, hw, hw), device, dtype)
    return _module(CNNBlock(c), device, dtype), (x,)


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("pointwise_chain", _build_pointwise, True, "sigmoid(x*1.5+y).sin()*y - relu(x), 1-D"),
    Workload("softmax", _build_softmax, True, "softmax over the last dim of [M, N]"),
    Workload("layernorm", _build_layernorm, True, "F.layer_norm with weight and bias"),
    Workload("rmsnorm", _build_rmsnorm, True, "x*rsqrt(mean(x^2)+eps)*w, float32 statistics"),
    Workload("cross_entropy", _build_cross_entropy, True, "F.cross_entropy(logits[B,V], target)"),
    Workload("gelu_mlp", _build_gelu_mlp, False, "Linear(d,4d) -> gelu(tanh) -> Linear(4d,d)"),
    Workload("attention", _build_attention, False, "qkv Linear -> causal SDPA -> out Linear"),
    Workload("transformer_block", _build_transformer, False, "nanoGPT Block (ln, attn, ln, mlp)"),
    Workload("cnn_block", _build_cnn, False, "ResNet basic block, eval-mode batchnorm"),
]}


def get(name: str) -> Workload:
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]


from scripts.harness import geomean  # noqa: E402,F401  (re-exported for the bench scripts)
