"""Compiled vs eager, leaf by leaf.

Rules:
- dtype and shape must be equal; bool and integer values exactly equal.
- Floats: NaN positions equal (NaN == NaN), infinities equal (same sign), finite values within the
  dtype's tolerance: |c - e| <= atol + rtol * |e| (TOLERANCES, about a few ulps of the dtype).
- The *reference* r is the program run on float64 copies of its float inputs, with every sum
  (sum, mean, nansum, prod) computed exactly and rounded once (math.fsum, fractions;
  `exact_sums`). A sum's (or product's: overflow then a zero factor) order
  of accumulation is the implementation's choice (ATen's cascade of vector lanes, our loop), and
  with terms that cancel beyond float64's precision (1e30 - 1e30 + small) float64 in eager's
  order repeats eager's float32 answer instead of judging it.
- A float difference beyond the tolerance is *rounding* (not wrong) when the compiled value is
  at least nearly as close to the reference as eager is, elementwise:
  d(c, r) <= 2 * d(e, r) + atol + rtol * |r|, where d is |x - r| for numbers, 0 for x and r both
  NaN (or equal infinities), infinite where exactly one of them is NaN. Otherwise it is *wrong*.
  The reference decides which of two roundings is "right" instead of a wider tolerance that
  would also hide real bugs. Consequences of d:
  - where eager is NaN and the reference is not, eager has no valid value to judge by (its error
    is infinite), so any compiled value passes there: ATen's vectorized CPU kernels compute
    remainder/fmod as `a - floor(a / b) * b`, so `3.4e38 % 0.5` is NaN in a full vector and 0 in
    the scalar tail of the same call; the compiled code's exact fmod gives 0 everywhere;
  - where the reference and eager are both NaN, the compiled value must be NaN too (a finite
    value there is wrong, not rounding); where only the reference is NaN, eager's error is
    infinite and the element is decided by rounding;
  - an overflow that eager rounds to inf and the compiled code just below (or the reverse) is
    rounding if the reference is beyond half the dtype's range too.
- An integer or bool difference is rounding only where eager's own value differs from the
  reference's (a float cast to int or compared: the answer there is decided by float rounding,
  e.g. a 1-ulp different exp before .to(int16), or isinf(x / s) where the sum s cancels to 0 in
  eager's order and not in the exact one); anywhere else it is wrong.
"""

from __future__ import annotations

import fractions
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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


def _distance(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """d(x, r) of the module docstring, elementwise: |x - r|, 0 where both are NaN or equal
    (inf - inf is NaN), infinite where exactly one is NaN."""
    x_nan, r_nan = torch.isnan(x), torch.isnan(r)
    d = torch.where(x == r, torch.zeros_like(x), (x - r).abs())
    d = torch.where(x_nan & r_nan, torch.zeros_like(d), d)
    return torch.where(x_nan ^ r_nan, torch.full_like(d, math.inf), d)


def differs(expected: torch.Tensor, actual: torch.Tensor) -> torch.Tensor:
    """Elementwise: where `actual` does not match `expected` under mismatch's rules (same shape
    and dtype assumed)."""
    e, c = expected.cpu(), actual.cpu()
    if not e.dtype.is_floating_point:
        return e != c
    rtol, atol = TOLERANCES.get(e.dtype, (1e-5, 1e-8))
    return ~_float_close(c, e, rtol, atol)


def rounding_mask(expected, actual, reference, work_dtype=None) -> torch.Tensor | None:
    """Elementwise: where the float difference between actual and expected is rounding (module
    docstring rule); None where the rule does not apply (not float tensors of one shape).
    work_dtype: the coarsest float type the program computes in (a float32 sum cast to float64
    carries float32 rounding); the tolerance is that of the coarser of it and the output's."""
    if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)
            and isinstance(reference, torch.Tensor)):
        return None
    if not expected.dtype.is_floating_point or expected.dtype != actual.dtype or expected.shape != actual.shape \
            or reference.shape != expected.shape:
        return None
    rtol, atol = TOLERANCES[coarsest([expected.dtype] + ([work_dtype] if work_dtype else []))]
    c, e, r = actual.cpu().double(), expected.cpu().double(), reference.cpu().double()
    close = _float_close(c, e, rtol, atol)
    # the relative part only where the reference is a number (an infinite one would allow anything)
    tol = atol + rtol * torch.where(torch.isfinite(r), r.abs(), torch.zeros_like(r))
    fine = _distance(c, r) <= 2 * _distance(e, r) + tol
    # an overflow that eager rounds to inf and the compiled code just below (or the reverse) is
    # rounding if the reference is beyond half the dtype's range too
    half = torch.finfo(expected.dtype).max / 2
    big = (r.abs() >= half) & (c.abs() >= half)
    return close | fine | big


def is_rounding(expected, actual, reference, work_dtype=None) -> bool:
    """rounding_mask holds everywhere."""
    mask = rounding_mask(expected, actual, reference, work_dtype)
    return mask is not None and bool(mask.all())


def matches_mask(actual, answer, work_dtype=None) -> torch.Tensor | None:
    """Elementwise: where `actual` equals another valid answer of the program (ints exactly,
    floats within the tolerance of the coarser of their dtype and work_dtype); None if shapes
    or kinds differ."""
    if not (isinstance(actual, torch.Tensor) and isinstance(answer, torch.Tensor)) or actual.shape != answer.shape:
        return None
    c, a = actual.cpu(), answer.cpu()
    if not c.dtype.is_floating_point:
        return None if a.dtype.is_floating_point else c == a.to(c.dtype)
    rtol, atol = TOLERANCES[coarsest([c.dtype] + ([work_dtype] if work_dtype else []))]
    return _float_close(c, a, rtol, atol)


def strides_differ(expected, actual) -> bool:
    """Observable stride difference of a returned tensor (dims of size > 1 only)."""
    if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)) or expected.numel() <= 1:
        return False
    if expected.shape != actual.shape:
        return False
    return any(a != b for a, b, n in zip(actual.stride(), expected.stride(), expected.shape) if n > 1)


def decided_mask(expected, actual, reference) -> torch.Tensor | None:
    """Integer/bool outputs, elementwise: equal, or an element whose eager value differs from the
    float64 reference's (module docstring); None where the rule does not apply."""
    if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)
            and isinstance(reference, torch.Tensor)) or expected.dtype.is_floating_point:
        return None
    if expected.shape != actual.shape or reference.shape != expected.shape:
        return None
    differ = expected.cpu() != actual.cpu()
    unstable = expected.cpu() != reference.cpu().to(expected.dtype)
    return ~differ | unstable


def decided_by_rounding(expected, actual, reference) -> bool:
    """decided_mask holds everywhere."""
    mask = decided_mask(expected, actual, reference)
    return mask is not None and bool(mask.all())


# ---- the reference's exact sums (module docstring) ----

_SUMS = {torch.ops.aten.sum.default, torch.ops.aten.sum.dim_IntList, torch.ops.aten.mean.default,
         torch.ops.aten.mean.dim, torch.ops.aten.nansum.default}


def _fsum(row: list, skip_nan: bool) -> float:
    """The correctly rounded sum of `row`; non-finite terms as IEEE addition gives them (any
    order gives the same NaN or infinity)."""
    if skip_nan:
        row = [v for v in row if not math.isnan(v)]
    if all(math.isfinite(v) for v in row):
        try:
            return math.fsum(row)
        except OverflowError:       # the exact sum is beyond float64's range
            pass
    return sum(row)


def _exact_sum(func, x: torch.Tensor, dim=None, keepdim=False, *, dtype=None) -> torch.Tensor | None:
    """sum/mean/nansum of a float tensor with each output element's sum exact, rounded once to
    the result's dtype (a program's own cast to float32 keeps float32 there); None where the call
    is outside that (integers, an empty tensor): the op runs as it is."""
    out_dtype = dtype or x.dtype
    if not (x.dtype.is_floating_point and out_dtype.is_floating_point) or x.numel() == 0:
        return None
    n = x.dim()
    if n == 0:
        return None       # a 0-d tensor's sum is its value (`dim` is -1 or 0 there): run as it is
    dim = [dim] if isinstance(dim, int) else dim
    dims = sorted({d % n for d in dim}) if dim else list(range(n))     # [] and None: all dims
    kept = [d for d in range(n) if d not in dims]
    rows = x.permute(kept + dims).reshape(math.prod(x.shape[d] for d in kept), -1).tolist()
    count = math.prod(x.shape[d] for d in dims)
    skip_nan = func is torch.ops.aten.nansum.default
    vals = [_fsum(row, skip_nan) for row in rows]
    if func in (torch.ops.aten.mean.default, torch.ops.aten.mean.dim):
        vals = [v / count for v in vals]
    out = torch.tensor(vals, dtype=torch.float64).reshape([x.shape[d] for d in kept]).to(out_dtype)
    for d in dims if keepdim else []:
        out = out.unsqueeze(d)
    return out


def _exact_product(row: list) -> float:
    """The correctly rounded product of `row`. Overflow and underflow depend on the order of the
    factors (1e200 * 1e200 * 0 is inf * 0 = NaN one way, 0 the other); the exact product does not:
    NaN only for a NaN factor or an infinity times a zero."""
    negative = sum(math.copysign(1.0, v) < 0 for v in row if not math.isnan(v)) % 2 == 1
    sign = -1.0 if negative else 1.0
    if any(math.isnan(v) for v in row):
        return math.nan
    has_inf, has_zero = any(math.isinf(v) for v in row), any(v == 0 for v in row)
    if has_inf:
        return math.nan if has_zero else sign * math.inf
    if has_zero:
        return sign * 0.0
    exact = fractions.Fraction(1)
    for v in row:
        exact *= fractions.Fraction(abs(v))
    try:
        return sign * float(exact)
    except OverflowError:
        return sign * math.inf


def _exact_prod(func, x: torch.Tensor, dim=None, keepdim=False, *, dtype=None) -> torch.Tensor | None:
    """prod of a float tensor with each output element exact, rounded once to the result's dtype
    (None outside that, as _exact_sum): the order of a float32 product decides whether a partial
    product overflows to inf before a 0 turns it into NaN (fuzz 381039)."""
    out_dtype = dtype or x.dtype
    if not (x.dtype.is_floating_point and out_dtype.is_floating_point) or x.numel() == 0 or x.dim() == 0:
        return None
    n = x.dim()
    dims = [dim % n] if dim is not None else list(range(n))
    kept = [d for d in range(n) if d not in dims]
    rows = x.permute(kept + dims).reshape(math.prod(x.shape[d] for d in kept), -1).tolist()
    out = torch.tensor([_exact_product(r) for r in rows], dtype=torch.float64).reshape([x.shape[d] for d in kept])
    out = out.to(out_dtype)
    return out.unsqueeze(dims[0]) if keepdim and dim is not None else out


_PRODS = {torch.ops.aten.prod.default, torch.ops.aten.prod.dim_int}


def _c_remainder(a: float, b: float, python_sign: bool) -> float:
    """fmod (C's, exact) or Python's % (fmod with the divisor's sign): NaN for a zero divisor."""
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    r = math.fmod(a, b)
    if python_sign and r != 0 and (r < 0) != (b < 0):
        r += b
    elif python_sign and r == 0:
        r = math.copysign(0.0, b)
    return r


def _exact_remainder(func, a, b) -> torch.Tensor | None:
    """remainder/fmod of floats, each element exact (C's fmod): ATen's vectorized loops compute
    a - floor(a / b) * b, NaN where a / b overflows (1e308 % 0.3), finite in the scalar tail of
    the same call, so with float64 inputs the reference repeated eager's NaN (fuzz 431063)."""
    ta, tb = (x if isinstance(x, torch.Tensor) else torch.tensor(x) for x in (a, b))
    out_dtype = torch.result_type(a, b)
    if not out_dtype.is_floating_point:
        return None
    ta, tb = torch.broadcast_tensors(ta, tb)
    python_sign = func.overloadpacket is torch.ops.aten.remainder
    pairs = zip(ta.double().flatten().tolist(), tb.double().flatten().tolist())
    vals = [_c_remainder(x, y, python_sign) for x, y in pairs]
    return torch.tensor(vals, dtype=torch.float64).reshape(ta.shape).to(out_dtype)


_REMAINDERS = {torch.ops.aten.remainder.Tensor, torch.ops.aten.remainder.Scalar, torch.ops.aten.fmod.Tensor,
               torch.ops.aten.fmod.Scalar}


class exact_sums(TorchDispatchMode):
    """Within it, float sums, means, nansums and products are exact (math.fsum, fractions), in
    any order of terms, and rounded once to their dtype; so are float remainders (C's fmod)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        exact = _exact_sum if func in _SUMS else _exact_prod if func in _PRODS else \
            _exact_remainder if func in _REMAINDERS and not kwargs else None
        if exact is not None:
            out = exact(func, *args, **kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)
