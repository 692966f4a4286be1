"""Compiled vs eager, leaf by leaf.

Rules:
- dtype and shape must be equal; bool and integer values exactly equal.
- Floats: NaN positions equal (NaN == NaN), infinities equal (same sign), finite values within the
  dtype's tolerance: |c - e| <= atol + rtol * |e| (TOLERANCES, about a few ulps of the dtype).
- A float difference beyond that is *rounding* (not wrong) when the compiled value is at least
  nearly as close to a float64 reference (the program run on float64 copies of its float inputs)
  as eager is: |c - r| <= 2 * |e - r| + atol + rtol * |r| elementwise, NaN where r is NaN
  allowed. Otherwise it is *wrong*. The reference decides which of two roundings is "right"
  instead of a wider tolerance that would also hide real bugs.
- Where eager's value is NaN and the float64 reference's is not, eager has no valid value to
  judge by (its error counts as infinite): ATen's vectorized CPU kernels compute remainder/fmod
  as `a - floor(a / b) * b`, so `3.4e38 % 0.5` is NaN in a full vector and 0 in the scalar tail
  of the same call; the compiled code's exact fmod gives 0 everywhere.
- An integer or bool difference is rounding only where eager's own value changes when the
  program runs in float64 (a float cast to int or compared: the answer there is decided by
  float rounding, e.g. a 1-ulp different exp before .to(int16)); anywhere else it is wrong.
"""

from __future__ import annotations

import math

import torch

#: dtype -> (rtol, atol)
TOLERANCES = {torch.float64: (1e-7, 1e-9), torch.float32: (1.3e-6, 1e-5), torch.float16: (1e-3, 1e-5),
              torch.bfloat16: (1.6e-2, 1e-5)}


def leaves(x) -> list:
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            out += leaves(v)
        return out
    return [x]


def _float_close(c: torch.Tensor, e: torch.Tensor, rtol, atol) -> torch.Tensor:
    """Elementwise: equal under the module's float rules (NaN == NaN, infs exact)."""
    c64, e64 = c.double(), e.double()
    both_nan = torch.isnan(c64) & torch.isnan(e64)
    exact = c64 == e64
    finite = torch.isfinite(c64) & torch.isfinite(e64)
    near = finite & ((c64 - e64).abs() <= atol + rtol * e64.abs())
    return both_nan | exact | near


def mismatch(expected, actual) -> str | None:
    """None when `actual` matches `expected`, else a short description."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"expected a tensor, got {type(actual).__name__}"
        if expected.dtype != actual.dtype:
            return f"dtype {actual.dtype} != {expected.dtype}"
        if tuple(expected.shape) != tuple(actual.shape):
            return f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        if expected.numel() == 0:
            return None
        if not expected.dtype.is_floating_point:
            if torch.equal(expected.cpu(), actual.cpu()):
                return None
            bad = (expected.cpu() != actual.cpu()).nonzero()[0].tolist()
            return f"value at {bad}: {actual.cpu()[tuple(bad)].item()} != {expected.cpu()[tuple(bad)].item()}"
        rtol, atol = TOLERANCES.get(expected.dtype, (1e-5, 1e-8))
        ok = _float_close(actual.cpu(), expected.cpu(), rtol, atol)
        if bool(ok.all()):
            return None
        bad = (~ok).nonzero()[0].tolist()
        return (f"float value at {bad}: {actual.cpu()[tuple(bad)].item()!r} != {expected.cpu()[tuple(bad)].item()!r} "
                f"({int((~ok).sum())} of {ok.numel()})")
    if isinstance(expected, float) and isinstance(actual, float):
        if expected == actual or (math.isnan(expected) and math.isnan(actual)):
            return None
        return f"{actual!r} != {expected!r}"
    both_numbers = isinstance(expected, (int, float)) and isinstance(actual, (int, float))
    if type(expected) is not type(actual) and not both_numbers:
        return f"type {type(actual).__name__} != {type(expected).__name__}"
    return None if expected == actual else f"{actual!r} != {expected!r}"


def coarsest(dtypes) -> torch.dtype | None:
    """The float dtype of least precision among `dtypes` (None if there is none)."""
    fl = [d for d in dtypes if d in TOLERANCES]
    return max(fl, key=lambda d: TOLERANCES[d][0]) if fl else None


def is_rounding(expected, actual, reference, work_dtype=None) -> bool:
    """The float difference between actual and expected is rounding (module docstring rule).
    work_dtype: the coarsest float type the program computes in (a float32 sum cast to float64
    carries float32 rounding); the tolerance is that of the coarser of it and the output's."""
    if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)
            and isinstance(reference, torch.Tensor)):
        return False
    if not expected.dtype.is_floating_point or expected.dtype != actual.dtype or expected.shape != actual.shape \
            or reference.shape != expected.shape:
        return False
    rtol, atol = TOLERANCES[coarsest([expected.dtype] + ([work_dtype] if work_dtype else []))]
    c, e, r = actual.cpu().double(), expected.cpu().double(), reference.cpu().double()
    close = _float_close(c, e, rtol, atol)
    ref_nan = torch.isnan(r)
    err_c, err_e = (c - r).abs(), (e - r).abs()
    err_e = torch.where(torch.isnan(e) & ~ref_nan, torch.full_like(err_e, float("inf")), err_e)
    fine = err_c <= 2 * err_e + atol + rtol * r.abs()
    # an overflow that eager rounds to inf and the compiled code just below (or the reverse) is
    # rounding if the reference is beyond the dtype's range too
    big = r.abs() >= torch.finfo(expected.dtype).max / 2
    return bool((close | fine | ref_nan | big).all())


def strides_differ(expected, actual) -> bool:
    """Observable stride difference of a returned tensor (dims of size > 1 only)."""
    if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)) or expected.numel() <= 1:
        return False
    if expected.shape != actual.shape:
        return False
    return any(a != b for a, b, n in zip(actual.stride(), expected.stride(), expected.shape) if n > 1)


def decided_by_rounding(expected, actual, reference) -> bool:
    """Integer/bool outputs: every differing element is one whose eager value differs from the
    float64 reference's (module docstring)."""
    if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)
            and isinstance(reference, torch.Tensor)) or expected.dtype.is_floating_point:
        return False
    if expected.shape != actual.shape or reference.shape != expected.shape:
        return False
    differ = expected.cpu() != actual.cpu()
    unstable = expected.cpu() != reference.cpu().to(expected.dtype)
    return bool((~differ | unstable).all())
