"""Small helpers the generated output code imports (kept tiny: the output code stays readable)."""

from __future__ import annotations

import torch


def ensure_layout(t: torch.Tensor, size, stride) -> torch.Tensor:
    """Return `t` with exactly this size/stride (a copy only if an ATen op chose other strides):
    generated kernels index buffers with the strides decided at compile time."""
    if t.stride() == stride or t.numel() <= 1 or all(a == b for a, b, n in zip(t.stride(), stride, size) if n > 1):
        return t
    out = torch.empty_strided(tuple(size), tuple(stride), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def increment_version(tensors) -> None:
    """Count an in-place write into each of these tensors, as an ATen in-place op would: the
    output code's kernels write mutated inputs through their data pointers, which bumps nothing,
    so autograd's check of saved tensors (and anything else keyed on `_version`) would miss it."""
    torch.autograd.graph.increment_version(tensors)


def channels_last_weight(w: torch.Tensor) -> torch.Tensor:
    """A convolution weight as channels_last, converted at every call.

    With channels_last activations cuDNN wants channels_last filters (ATen would convert an NCHW
    weight inside the call anyway). No copy is kept across calls: a cache keyed on the weight's
    version went stale when the weight changed without a version bump, as through `w.data` (a
    tensor with a version counter of its own: `p.data.add_(...)` updates, weight loading), and
    compiled convolutions then ran with old weights. Inductor converts in its graph at every call
    too, unless the user freezes the weights."""
    if w.is_contiguous(memory_format=torch.channels_last):
        return w
    return w.contiguous(memory_format=torch.channels_last)


def rand_strided(size, stride, dtype, device="cpu") -> torch.Tensor:
    """A random tensor with the given size and stride (for running output_code.py standalone)."""
    need = 1 + sum((s - 1) * st for s, st in zip(size, stride)) if all(s > 0 for s in size) else 0
    if dtype.is_floating_point:
        base = torch.randn(need, dtype=dtype, device=device)
    elif dtype == torch.bool:
        base = torch.randint(0, 2, (need,), device=device).to(torch.bool)
    else:
        base = torch.randint(0, 8, (need,), dtype=dtype, device=device)
    return torch.as_strided(base, tuple(size), tuple(stride))


def write_back(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """The aot stage's copy_ of a mutated input's new value into the input. An input whose
    elements share memory (expanded: stride 0 along a dim of size > 1) is written through one
    element per location: copy_ refuses such a destination, while eager's in-place op on it ran
    (zero_/fill_ write one value everywhere, the only in-place ops eager allows there)."""
    shared = [n > 1 and st == 0 for n, st in zip(dst.shape, dst.stride())]
    if not any(shared):
        return dst.copy_(src)
    index = tuple(slice(0, 1) if s else slice(None) for s in shared)
    dst[index].copy_(src.expand(dst.shape)[index])
    return dst
