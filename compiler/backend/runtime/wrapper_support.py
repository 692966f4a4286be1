"""Small helpers the generated output code imports (kept tiny: the output code stays readable)."""

from __future__ import annotations

import weakref

import torch

from tracetorch import logs

_log = logs.get_logger(__name__)


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
    so autograd's check of saved tensors and caches keyed on `_version` would miss the write."""
    torch.autograd.graph.increment_version(tensors)


#: id(weight) -> (weak reference, version, data pointer, channels_last copy); see below
_CHANNELS_LAST: dict = {}


def channels_last_weight(w: torch.Tensor) -> torch.Tensor:
    """A convolution weight as channels_last, converted once per value of the weight.

    With channels_last activations cuDNN wants channels_last filters, and ATen converts an NCHW
    weight inside every call: ResNet-50 paid 17 copy kernels and ~0.2 ms of host time per call
    for its 3x3 and 7x7 filters (1x1 filters are both layouts at once). The copy is kept while
    the weight is the same tensor at the same address and version (`_version` counts in-place
    writes: an optimizer step converts anew). While a CUDA graph records, the conversion is
    recorded too, never a cached copy: a replay must see later in-place updates of the weight."""
    if w.is_contiguous(memory_format=torch.channels_last):
        return w
    if w.is_cuda and torch.cuda.is_current_stream_capturing():
        return w.contiguous(memory_format=torch.channels_last)
    key = id(w)
    hit = _CHANNELS_LAST.get(key)
    if hit is not None and hit[0]() is w and hit[1] == w._version and hit[2] == w.data_ptr():
        return hit[3]
    converted = w.detach().contiguous(memory_format=torch.channels_last)
    _log.debug("channels_last_weight", shape=list(w.shape), renewed=hit is not None,
               reason="a channels_last convolution's NCHW filter, converted once per value of the weight")
    if len(_CHANNELS_LAST) > 4096:      # weights of models no longer alive
        for k in [k for k, v in _CHANNELS_LAST.items() if v[0]() is None]:
            del _CHANNELS_LAST[k]
    _CHANNELS_LAST[key] = (weakref.ref(w), w._version, w.data_ptr(), converted)
    return converted


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
