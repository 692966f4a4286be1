"""Float -> integer casts of values the integer type cannot hold: undefined, in eager too.

PyTorch documents a cast of a float out of the target's range (NaN and infinities included) as
undefined behaviour, and eager's answers do differ by code path: on x86, `x.to(torch.uint8)` of
1.29e16 gives 0 in a vectorized loop (through int32) and 126 in the scalar one (c10 converts to
uint8 through int64), in the same call at different positions (fuzz 421129). A GPU saturates.

`CHOICES` are the values such a cast is seen to give; `UndefinedCasts(choice)` runs a program
with every undefined element of every cast set to that choice (None: only counts the casts that
had one). ulp_envelope adds these runs to eager's envelope, so an element decided by an
undefined cast may hold any of them, and everything else must still match exactly.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten


def _in_range(src: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where a float -> dtype cast is defined the same way by every path: finite, and inside
    int32 for the narrower types (their paths go through int32 or int64), else inside dtype."""
    info = torch.iinfo(torch.int32 if torch.iinfo(dtype).bits < 32 else dtype)
    x = src.double()
    return torch.isfinite(x) & (x > info.min - 1.0) & (x < info.max + 1.0)


def _through(src: torch.Tensor, dtype: torch.dtype, wide: torch.dtype) -> torch.Tensor:
    """x86's conversion to `wide` (out of its range: its minimum), then the low bits."""
    info = torch.iinfo(wide)
    x = src.double()
    ok = torch.isfinite(x) & (x > info.min - 1.0) & (x < info.max + 1.0)
    wide_value = torch.where(ok, x.nan_to_num(0.0).clamp(info.min, info.max).trunc(), float(info.min))
    return wide_value.to(torch.int64).to(dtype)


def _saturated(src: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    info = torch.iinfo(dtype)
    return src.double().nan_to_num(0.0).clamp(info.min, info.max).trunc().to(torch.int64).to(dtype)


CHOICES = {
    "through int64": lambda src, dtype: _through(src, dtype, torch.int64),
    "through int32": lambda src, dtype: _through(src, dtype, torch.int32),
    "saturated": _saturated,
    "zero": lambda src, dtype: torch.zeros(src.shape, dtype=dtype),
}


def _cast(func, args, kwargs, out):
    """(float source, integer destination) of a cast call, else (None, None)."""
    if func in (aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.to.device):
        src, dst = args[0], out
    elif func is aten.copy_.default:
        dst, src = args[0], args[1]
    else:
        return None, None
    if not (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)) or not src.dtype.is_floating_point \
            or dst.dtype.is_floating_point or dst.dtype.is_complex or dst.dtype == torch.bool:
        return None, None
    return src.expand(dst.shape) if src.shape != dst.shape else src, dst


class UndefinedCasts(TorchDispatchMode):
    """Counts (`found`) float -> integer casts with an undefined element and, with a `choice`,
    gives those elements the value CHOICES[choice] computes."""

    def __init__(self, choice: str | None = None):
        super().__init__()
        self.choice, self.found = choice, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        src, dst = _cast(func, args, kwargs, out)
        if src is None or not dst.numel():
            return out
        undefined = ~_in_range(src, dst.dtype)
        if bool(undefined.any()):
            self.found += 1
            if self.choice is not None:
                dst.copy_(torch.where(undefined, CHOICES[self.choice](src, dst.dtype), dst))
        return out
