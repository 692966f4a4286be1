"""Input tensors for the fuzzer: a spec (dims, dtype, layout, special values) made concrete for
one call (sizes and a value seed)."""

from __future__ import annotations

import dataclasses
import random

import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.uint8, torch.bool]
DTYPE_WEIGHTS = [10, 2, 2, 2, 3, 1, 1, 2]
LAYOUTS = ["contiguous", "transposed", "strided", "expanded", "channels_last", "offset"]
LAYOUT_WEIGHTS = [8, 2, 2, 2, 1, 1]
#: sizes drawn for a dimension; 0 rarely (empty tensors), odd sizes often
SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 13, 16, 31]
SIZE_WEIGHTS = [1, 3, 4, 5, 3, 4, 4, 2, 2, 1, 1]


@dataclasses.dataclass
class InputSpec:
    name: str
    dims: list          # per dimension: a dim id (str, shared between inputs) or 1 (broadcast)
    dtype: torch.dtype
    layout: str
    special: bool       # mix in nan/inf/-0.0/huge values

    def shape(self, sizes: dict) -> list[int]:
        return [1 if d == 1 else sizes[d] for d in self.dims]


def draw_size(rng: random.Random) -> int:
    return rng.choices(SIZES, SIZE_WEIGHTS)[0]


def _values(shape, dtype, special, gen: torch.Generator, rng: random.Random) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=gen, dtype=torch.int64).to(torch.uint8)
    if not dtype.is_floating_point:
        lo, hi = (-2**31, 2**31) if special and rng.random() < 0.3 else (-9, 10)
        return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)
    t = torch.randn(shape, generator=gen, dtype=torch.float64) * rng.choice([1.0, 1.0, 3.0, 0.01, 100.0])
    if special and n:
        pool = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e30, -1e30, 1e-30,
                torch.finfo(dtype).max, torch.finfo(dtype).tiny, 0.5, -0.5, 2.5]
        flat = t.view(-1)
        for _ in range(max(1, n // 4)):
            flat[rng.randrange(n)] = rng.choice(pool)
    return t.to(dtype)


def make_input(spec: InputSpec, sizes: dict, seed: int) -> torch.Tensor:
    """The spec's tensor for one call: values from `seed`, memory layout from spec.layout."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    shape = spec.shape(sizes)
    layout = spec.layout
    if layout == "channels_last" and len(shape) != 4:
        layout = "contiguous"
    if layout == "transposed" and len(shape) < 2:
        layout = "contiguous"
    if layout == "expanded":
        # size-1 storage along the first non-broadcast dim, expanded to its size (stride 0)
        small = list(shape)
        for i, d in enumerate(spec.dims):
            if d != 1:
                small[i] = 1 if shape[i] > 0 else 0
                break
        return _values(small, spec.dtype, spec.special, gen, rng).expand(shape)
    if layout == "transposed":
        perm = list(range(len(shape)))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        base = _values([shape[p] for p in perm], spec.dtype, spec.special, gen, rng)
        return base.permute(perm)
    if layout == "strided" and shape:
        big = list(shape)
        big[-1] = 2 * shape[-1]
        return _values(big, spec.dtype, spec.special, gen, rng)[..., ::2]
    if layout == "offset":
        n = 1
        for s in shape:
            n *= s
        return _values([n + 3], spec.dtype, spec.special, gen, rng)[3:].view(shape)
    t = _values(shape, spec.dtype, spec.special, gen, rng)
    if layout == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last)
    return t


def clone_input(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same sizes, strides and storage offset (and expanded dims still stride 0)."""
    if t.numel() == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + t.storage_offset()
    base = torch.empty(span, dtype=t.dtype)
    out = base.as_strided(t.shape, t.stride(), t.storage_offset())
    # copy through a non-overlapping view of the same memory locations
    src = t.as_strided(t.shape, t.stride(), t.storage_offset())
    if any(st == 0 and s > 1 for s, st in zip(t.shape, t.stride())):
        idx = tuple(slice(0, 1) if st == 0 and s > 1 else slice(None) for s, st in zip(t.shape, t.stride()))
        out[idx].copy_(src[idx])
    else:
        out.copy_(src)
    return out


def clone_all(xs) -> list:
    """clone_input of every tensor of a call's arguments; other arguments as they are."""
    return [clone_input(x) if isinstance(x, torch.Tensor) else x for x in xs]
