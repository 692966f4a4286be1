"""Orthogonal polynomials of torch.special as Pointwise ops: hermite_polynomial_h/he (degree n a
tensor or a number), and the Chebyshev / Legendre / Laguerre families when the degree is a number.

ATen (aten/src/ATen/native/Math.h) evaluates these with the three-term recurrence over k = 1..n,
so the trip count is the *value* of n. The op vocabulary has no loops, so a recurrence is unrolled
to a bound and every step is frozen (`where`) once k passes the element's n; replaying the same
operations in the same order gives ATen's rounding too.

- Hermite: ATen returns NaN above n = 128 (float) / 512 (double), so the recurrence never runs
  more than that many steps: exact for every n, tensor or not.
- Chebyshev T/U/V/W (also shifted), Legendre, Laguerre: for |x| > 1 (Legendre, Laguerre: for any
  x) the recurrence runs all n steps with no bound (overflow to inf/NaN takes ~10^5 steps near
  x = 1 in float and ~10^10 in double), and closed forms disagree with the recurrence's rounding
  by far more than the float tolerance there. So they are lowered only when n is a number known
  at compile time and small enough to unroll; a tensor n keeps the ATen op (reason logged).

n is converted to int64 as ATen's `static_cast<int64_t>(n)` does on the device that runs it.
"""

from __future__ import annotations

import math
import platform

import torch

from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import NotLowerable, aten, make_pointwise, register_lowering
from tracetorch.compiler.backend.lowering.special import _compute_dtype, _Math

_I64_MIN = -2.0 ** 63

# ATen's getHermitianLimit: above this degree hermite_polynomial_h/he return NaN
_HERMITE_LIMIT = {torch.float32: 128, torch.float64: 512}

# the most recurrence steps unrolled for a number n (Chebyshev/Legendre/Laguerre)
MAX_STATIC_DEGREE = 64


def _as_int64(m, n, device):
    """trunc(n) as the value static_cast<int64_t>(n) has. Out-of-range and NaN casts are undefined
    in C++; x86 CPUs give INT64_MIN (so ATen returns 0), CUDA and other CPUs saturate (NaN -> 0)."""
    t = ops.trunc(n)
    too_big, too_small = ops.ge(t, m.c(2.0 ** 63)), ops.lt(t, m.c(_I64_MIN))
    if device.type == "cpu" and platform.machine().lower() in ("x86_64", "amd64", "i386", "i686"):
        bad = ops.logical_or(ops.isnan(t), ops.logical_or(too_big, too_small))
        return ops.where(bad, m.c(_I64_MIN), t)
    t = ops.where(too_big, m.c(2.0 ** 63), ops.where(too_small, m.c(_I64_MIN), t))
    return ops.where(ops.isnan(t), m.c(0.0), t)


def _fms(m, a, b, c):
    """a * b - c as ATen's compiled kernel computes it: fused, fma(a, b, -c) (GCC contracts the
    expression that way). Near the polynomial's roots the recurrence cancels, and plain float
    rounding of a * b ends up ~1e-4 away from eager there. For float32 the fused result is
    reproduced in double: a * b is exact in double, leaving one double and one float rounding.
    For float64 the plain form stays (its error is far below the float64 tolerance)."""
    if m.t != torch.float32:
        return ops.sub(ops.mul(a, b), c)
    d = torch.float64
    fused = ops.sub(ops.mul(ops.to_dtype(a, d), ops.to_dtype(b, d)), ops.to_dtype(c, d))
    return ops.to_dtype(fused, torch.float32)


def _hermite(m, x, n, *, physicists):
    """H_n (physicists) or He_n; n: the degree as an int64-valued compute-dtype value."""
    limit = _HERMITE_LIMIT[m.t]
    first = ops.add(x, x) if physicists else x                    # H_1 = 2x, He_1 = x
    p, q = m.c(1.0), first
    for k in range(1, limit):                                     # ATen's steps, at most limit - 1
        active = ops.lt(m.c(float(k)), n)
        # H_{j+1} = 2x H_j - 2j H_{j-1};  He_{j+1} = x He_j - j He_{j-1}
        r = _fms(m, ops.add(x, x) if physicists else x, q, ops.mul(m.c(float(2 * k if physicists else k)), p))
        p, q = ops.where(active, q, p), ops.where(active, r, q)
    out = ops.where(ops.gt(n, m.c(float(limit))), m.c(math.nan), q)
    out = ops.where(ops.eq(n, m.c(1.0)), first, out)
    out = ops.where(ops.eq(n, m.c(0.0)), m.c(1.0), out)
    return ops.where(ops.lt(n, m.c(0.0)), m.c(0.0), out)


def _hermite_lowering(physicists):
    def lower(ctx, x, n):
        if not ctx.dtype.is_floating_point or ctx.dtype not in _HERMITE_LIMIT:
            raise NotLowerable(f"hermite polynomial of {ctx.dtype}")
        m = _Math(_compute_dtype(ctx))

        def fn(xv, nv):
            if physicists:   # ATen maps a NaN/inf degree of H (not He) to -1 before the cast
                nv = ops.where(ops.logical_or(ops.isnan(nv), ops.isinf(nv)), m.c(-1.0), nv)
            return _hermite(m, xv, _as_int64(m, nv, ctx.device), physicists=physicists)
        return make_pointwise(ctx, [x, n], fn, compute_dtype=m.t)
    return lower


for _op, _phys in ((aten.special_hermite_polynomial_h, True), (aten.special_hermite_polynomial_he, False)):
    register_lowering(_op.default, _op.x_scalar, _op.n_scalar)(_hermite_lowering(_phys))
