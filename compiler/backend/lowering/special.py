"""Special functions (i0, i0e, i1, i1e, modified Bessel, ndtri, digamma, trigamma, angle) as
Pointwise ops built from the op vocabulary.

Each one evaluates the same Cephes series as ATen (aten/src/ATen/native/Math.h; the coefficient
tables are in special_coefficients.py) in the same precision: float for float32/float16/bfloat16
(ATen computes the half types in float), double for float64. Branches become `where` over both
sides (the unselected side may be inf/NaN; `where` does not propagate it), and ATen's loops
either have a fixed trip count (Chebyshev/polynomial series) or are unrolled to their bound
(digamma's shift to x >= 10 takes at most 10 steps).
"""

from __future__ import annotations

import math

import torch

from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering import special_coefficients as C
from tracetorch.compiler.backend.lowering.registry import NotLowerable, aten, make_pointwise, register_lowering


class _Math:
    """Shorthands over op values of one compute dtype."""

    def __init__(self, dtype):
        self.t = dtype

    def c(self, v):
        return ops.constant(float(v), self.t)

    def chbevl(self, x, coeffs):
        """Clenshaw's recurrence for a Chebyshev series (Cephes chbevl)."""
        b0, b1, b2 = self.c(coeffs[0]), self.c(0.0), self.c(0.0)
        for a in coeffs[1:]:
            b2 = b1
            b1 = b0
            b0 = ops.add(ops.sub(ops.mul(x, b1), b2), self.c(a))
        return ops.mul(self.c(0.5), ops.sub(b0, b2))

    def polevl(self, x, coeffs):
        """Horner's scheme, highest power first (Cephes polevl)."""
        r = self.c(coeffs[0])
        for a in coeffs[1:]:
            r = ops.add(ops.mul(r, x), self.c(a))
        return r

    def where_neg(self, x, v):
        return ops.where(ops.lt(x, self.c(0.0)), ops.neg(v), v)


def _compute_dtype(ctx):
    return torch.float64 if ctx.dtype == torch.float64 else torch.float32


def _unary_special(*overloads):
    """Register `fn(m, x)` (m: _Math of the compute dtype) as the Pointwise lowering of overloads."""
    def deco(fn):
        def lower(ctx, x):
            if not ctx.dtype.is_floating_point:
                raise NotLowerable("non-float output")
            t = _compute_dtype(ctx)
            return make_pointwise(ctx, [x], lambda v: fn(_Math(t), v), compute_dtype=t)
        for op in overloads:
            register_lowering(op)(lower)
        return fn
    return deco


# ---------------------------------------------------------------------------- Bessel I0, I1

def _small_arg(m, ax):
    return ops.sub(ops.truediv(ax, m.c(2.0)), m.c(2.0))          # x/2 - 2 maps [0, 8] to [-2, 2]


def _large_arg(m, ax):
    return ops.sub(ops.truediv(m.c(32.0), ax), m.c(2.0))         # 32/x - 2 maps (8, inf) to (-2, 2)


def i0e(m, x):
    ax = ops.abs(x)
    small = m.chbevl(_small_arg(m, ax), C.I0E_A)
    large = ops.truediv(m.chbevl(_large_arg(m, ax), C.I0E_B), ops.sqrt(ax))
    return ops.where(ops.le(ax, m.c(8.0)), small, large)


@_unary_special(aten.i0.default)
def i0(m, x):
    ax = ops.abs(x)
    small = ops.mul(ops.exp(ax), m.chbevl(_small_arg(m, ax), C.I0E_A))
    large = ops.truediv(ops.mul(ops.exp(ax), m.chbevl(_large_arg(m, ax), C.I0E_B)), ops.sqrt(ax))
    return ops.where(ops.le(ax, m.c(8.0)), small, large)


_unary_special(aten.special_i0e.default)(i0e)


def _i1e_tables(m):
    if m.t == torch.float64:
        return C.I1E_A_DOUBLE, C.I1E_B_DOUBLE
    return C.I1E_A_FLOAT, C.I1E_B_FLOAT


@_unary_special(aten.special_i1.default)
def i1(m, x):
    a, b = _i1e_tables(m)
    ax = ops.abs(x)
    small = ops.mul(ops.mul(ops.exp(ax), ax), m.chbevl(_small_arg(m, ax), a))
    large = ops.truediv(ops.mul(ops.exp(ax), m.chbevl(_large_arg(m, ax), b)), ops.sqrt(ax))
    return m.where_neg(x, ops.where(ops.le(ax, m.c(8.0)), small, large))


@_unary_special(aten.special_i1e.default)
def i1e(m, x):
    a, b = _i1e_tables(m)
    ax = ops.abs(x)
    small = ops.mul(m.chbevl(_small_arg(m, ax), a), ax)
    large = ops.truediv(m.chbevl(_large_arg(m, ax), b), ops.sqrt(ax))
    return m.where_neg(x, ops.where(ops.le(ax, m.c(8.0)), small, large))


# the special_modified_bessel_* family: same series, ATen's own coefficient copies and formulas

@_unary_special(aten.special_modified_bessel_i0.default)
def modified_bessel_i0(m, x):
    ax = ops.abs(x)
    small = ops.mul(ops.exp(ax), m.chbevl(_small_arg(m, ax), C.MOD_I0_A))
    large = ops.truediv(ops.mul(ops.exp(ax), m.chbevl(_large_arg(m, ax), C.MOD_I0_B)), ops.sqrt(ax))
    return ops.where(ops.le(ax, m.c(8.0)), small, large)


@_unary_special(aten.special_modified_bessel_i1.default)
def modified_bessel_i1(m, x):
    ax = ops.abs(x)
    small = ops.mul(ops.mul(m.chbevl(_small_arg(m, ax), C.MOD_I1_A), ax), ops.exp(ax))
    large = ops.truediv(ops.mul(ops.exp(ax), m.chbevl(_large_arg(m, ax), C.MOD_I1_B)), ops.sqrt(ax))
    return m.where_neg(x, ops.where(ops.le(ax, m.c(8.0)), small, large))


def _k_domain(m, x, value):
    """K0/K1 and their scaled forms: inf at 0, NaN below 0."""
    return ops.where(ops.eq(x, m.c(0.0)), m.c(math.inf),
                     ops.where(ops.lt(x, m.c(0.0)), m.c(math.nan), value))


def _k_small_arg(m, x):
    return ops.sub(ops.mul(x, x), m.c(2.0))


def _k_large_arg(m, x):
    return ops.sub(ops.truediv(m.c(8.0), x), m.c(2.0))


def _k0_small(m, x, table):
    # 0.5 * (a - p) - log(0.5 * x) * I0(x)
    log_term = ops.mul(ops.log(ops.mul(m.c(0.5), x)), modified_bessel_i0(m, x))
    return ops.sub(m.chbevl(_k_small_arg(m, x), table), log_term)


def _k1_small(m, x, table):
    # log(0.5 * x) * I1(x) + 0.5 * (a - p) / x
    return ops.add(ops.mul(ops.log(ops.mul(m.c(0.5), x)), modified_bessel_i1(m, x)),
                   ops.truediv(m.chbevl(_k_small_arg(m, x), table), x))


@_unary_special(aten.special_modified_bessel_k0.default)
def modified_bessel_k0(m, x):
    large = ops.truediv(ops.mul(ops.exp(ops.neg(x)), m.chbevl(_k_large_arg(m, x), C.MOD_K0_B)), ops.sqrt(x))
    return _k_domain(m, x, ops.where(ops.le(x, m.c(2.0)), _k0_small(m, x, C.MOD_K0_A), large))


@_unary_special(aten.special_modified_bessel_k1.default)
def modified_bessel_k1(m, x):
    large = ops.truediv(ops.mul(ops.exp(ops.neg(x)), m.chbevl(_k_large_arg(m, x), C.MOD_K1_B)), ops.sqrt(x))
    return _k_domain(m, x, ops.where(ops.le(x, m.c(2.0)), _k1_small(m, x, C.MOD_K1_A), large))


@_unary_special(aten.special_scaled_modified_bessel_k0.default)
def scaled_modified_bessel_k0(m, x):
    small = ops.mul(_k0_small(m, x, C.SCALED_K0_A), ops.exp(x))
    large = ops.truediv(m.chbevl(_k_large_arg(m, x), C.SCALED_K0_B), ops.sqrt(x))
    return _k_domain(m, x, ops.where(ops.le(x, m.c(2.0)), small, large))


@_unary_special(aten.special_scaled_modified_bessel_k1.default)
def scaled_modified_bessel_k1(m, x):
    small = ops.mul(_k1_small(m, x, C.SCALED_K1_A), ops.exp(x))
    large = ops.truediv(m.chbevl(_k_large_arg(m, x), C.SCALED_K1_B), ops.sqrt(x))
    return _k_domain(m, x, ops.where(ops.le(x, m.c(2.0)), small, large))


# ---------------------------------------------------------------------------- Bessel J0, J1, Y0, Y1

_PI_4, _3PI_4 = 0.785398163397448309615660845819875721, 2.356194490192344928846982537459627163
_SQRT_2_PI = 0.797884560802865355879892119868763737
_TWO_PI = 0.636619772367581343075535053490057448


def _bessel_asymptotic(m, x, w, tables, phase, j_kind):
    """x > 5: (P(w) cos(x - phase) - 5/x Q(w) sin(x - phase)) * sqrt(2/pi) / sqrt(x) for J (sin and
    cos swapped, + for Y), with w = 25 / x^2 (or (5/x)^2, as ATen writes each)."""
    pp, pq, qp, qq = (m.polevl(w, t) for t in tables)
    arg = ops.sub(x, m.c(phase))
    p_term = ops.truediv(pp, pq)
    q_term = ops.mul(ops.truediv(m.c(5.0), x), ops.truediv(qp, qq))
    if j_kind:
        body = ops.sub(ops.mul(p_term, ops.cos(arg)), ops.mul(q_term, ops.sin(arg)))
    else:
        body = ops.add(ops.mul(p_term, ops.sin(arg)), ops.mul(q_term, ops.cos(arg)))
    return ops.truediv(ops.mul(body, m.c(_SQRT_2_PI)), ops.sqrt(x))


def _w25(m, x):
    return ops.truediv(m.c(25.0), ops.mul(x, x))


def _w5(m, x):
    f = ops.truediv(m.c(5.0), x)
    return ops.mul(f, f)


def _j0_abs(m, x):
    """J0 of x >= 0."""
    xx = ops.mul(x, x)
    # ATen: (xx - a) * (xx - b) * rp / rq (left to right)
    small = ops.truediv(ops.mul(ops.mul(ops.sub(xx, m.c(5.78318596294678452118e+00)),
                                        ops.sub(xx, m.c(3.04712623436620863991e+01))), m.polevl(xx, C.J0_RP)),
                        m.polevl(xx, C.J0_RQ))
    tiny = ops.sub(m.c(1.0), ops.truediv(xx, m.c(4.0)))
    large = _bessel_asymptotic(m, x, _w25(m, x), (C.J0_PP, C.J0_PQ, C.J0_QP, C.J0_QQ), _PI_4, True)
    return ops.where(ops.le(x, m.c(5.0)), ops.where(ops.lt(x, m.c(0.00001)), tiny, small), large)


@_unary_special(aten.special_bessel_j0.default)
def bessel_j0(m, x):
    return _j0_abs(m, ops.abs(x))


def _j1_pos(m, x):
    """J1 of x >= 0."""
    xx = ops.mul(x, x)
    small = ops.mul(ops.mul(ops.mul(ops.truediv(m.polevl(xx, C.J1_RP), m.polevl(xx, C.J1_RQ)), x),
                            ops.sub(xx, m.c(1.46819706421238932572e+01))), ops.sub(xx, m.c(4.92184563216946036703e+01)))
    large = _bessel_asymptotic(m, x, _w5(m, x), (C.J1_PP, C.J1_PQ, C.J1_QP, C.J1_QQ), _3PI_4, True)
    return ops.where(ops.le(x, m.c(5.0)), small, large)


@_unary_special(aten.special_bessel_j1.default)
def bessel_j1(m, x):
    return m.where_neg(x, _j1_pos(m, ops.abs(x)))


def _y_domain(m, x, value):
    return ops.where(ops.eq(x, m.c(0.0)), m.c(-math.inf), ops.where(ops.lt(x, m.c(0.0)), m.c(math.nan), value))


@_unary_special(aten.special_bessel_y0.default)
def bessel_y0(m, x):
    xx = ops.mul(x, x)
    small = ops.add(ops.truediv(m.polevl(xx, C.Y0_YP), m.polevl(xx, C.Y0_YQ)),
                    ops.mul(ops.mul(m.c(_TWO_PI), ops.log(x)), _j0_abs(m, x)))
    large = _bessel_asymptotic(m, x, _w25(m, x), (C.Y0_PP, C.Y0_PQ, C.Y0_QP, C.Y0_QQ), _PI_4, False)
    return ops.where(ops.le(x, m.c(5.0)), _y_domain(m, x, small), large)


@_unary_special(aten.special_bessel_y1.default)
def bessel_y1(m, x):
    xx = ops.mul(x, x)
    small = ops.add(ops.mul(x, ops.truediv(m.polevl(xx, C.Y1_YP), m.polevl(xx, C.Y1_YQ))),
                    ops.mul(m.c(_TWO_PI), ops.sub(ops.mul(_j1_pos(m, x), ops.log(x)), ops.truediv(m.c(1.0), x))))
    large = _bessel_asymptotic(m, x, _w5(m, x), (C.Y1_PP, C.Y1_PQ, C.Y1_QP, C.Y1_QQ), _3PI_4, False)
    return ops.where(ops.le(x, m.c(5.0)), _y_domain(m, x, small), large)


# ---------------------------------------------------------------------------- ndtri

_EXP_M2 = 0.13533528323661269189      # exp(-2)
_S2PI = 2.50662827463100050242


@_unary_special(aten.special_ndtri.default)
def ndtri(m, y0):
    one = m.c(1.0)
    upper = ops.gt(y0, m.c(1.0 - _EXP_M2))       # ATen: one - T{0.135...} in T
    y = ops.where(upper, ops.sub(one, y0), y0)
    # central range: y in (exp(-2), 1 - exp(-2))
    yc = ops.sub(y, m.c(0.5))
    y2 = ops.mul(yc, yc)
    central = ops.mul(ops.add(yc, ops.mul(yc, ops.truediv(ops.mul(y2, m.polevl(y2, C.NDTRI_P0)),
                                                          m.polevl(y2, C.NDTRI_Q0)))), m.c(_S2PI))
    # tails
    x = ops.sqrt(ops.mul(m.c(-2.0), ops.log(y)))
    x0 = ops.sub(x, ops.truediv(ops.log(x), x))
    z = ops.truediv(one, x)
    x1_near = ops.truediv(ops.mul(z, m.polevl(z, C.NDTRI_P1)), m.polevl(z, C.NDTRI_Q1))
    x1_far = ops.truediv(ops.mul(z, m.polevl(z, C.NDTRI_P2)), m.polevl(z, C.NDTRI_Q2))
    tail = ops.sub(x0, ops.where(ops.lt(x, m.c(8.0)), x1_near, x1_far))
    tail = ops.where(upper, tail, ops.neg(tail))
    out = ops.where(ops.gt(y, m.c(_EXP_M2)), central, tail)
    out = ops.where(ops.logical_or(ops.lt(y0, m.c(0.0)), ops.gt(y0, one)), m.c(math.nan), out)
    out = ops.where(ops.eq(y0, one), m.c(math.inf), out)
    return ops.where(ops.eq(y0, m.c(0.0)), m.c(-math.inf), out)


# ---------------------------------------------------------------------------- digamma, trigamma

_PSI_10 = 2.25175258906672110764
_DIGAMMA_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
              -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
              8.33333333333333333333E-2)


def _digamma_positive(m, x):
    """ATen's calc_digamma for x > 0 (or NaN/inf): shift x up to >= 10, then the asymptotic series."""
    result = m.c(0.0)
    for _ in range(10):                      # x > 0 reaches 10 within 10 steps
        below = ops.lt(x, m.c(10.0))
        result = ops.where(below, ops.sub(result, ops.truediv(m.c(1.0), x)), result)
        x = ops.where(below, ops.add(x, m.c(1.0)), x)
    z = ops.truediv(m.c(1.0), ops.mul(x, x))
    y = ops.where(ops.lt(x, m.c(1.0e17)), ops.mul(z, m.polevl(z, _DIGAMMA_A)), m.c(0.0))
    series = ops.sub(ops.sub(ops.add(result, ops.log(x)), ops.truediv(m.c(0.5), x)), y)
    return ops.where(ops.eq(x, m.c(10.0)), ops.add(result, m.c(_PSI_10)), series)


def digamma(m, x):
    neg = ops.lt(x, m.c(0.0))
    pos_value = _digamma_positive(m, ops.where(neg, ops.sub(m.c(1.0), x), x))
    # reflection: digamma(1 - x) - pi / tan(pi * frac(x)), the tan term in double like ATen
    xd = ops.to_dtype(x, torch.float64) if m.t != torch.float64 else x
    r = ops.sub(xd, ops.trunc(xd))
    cot = ops.truediv(ops.constant(math.pi, torch.float64),
                      ops.tan(ops.mul(ops.constant(math.pi, torch.float64), r)))
    if m.t != torch.float64:
        cot = ops.to_dtype(cot, m.t)
    out = ops.where(neg, ops.sub(pos_value, cot), pos_value)
    out = ops.where(ops.logical_and(neg, ops.eq(x, ops.trunc(x))), m.c(math.nan), out)
    # x == +-0: -inf for +0, +inf for -0 (copysign(inf, -x))
    return ops.where(ops.eq(x, m.c(0.0)), ops.copysign(m.c(math.inf), ops.neg(x)), out)


_unary_special(aten.digamma.default)(digamma)


def trigamma(m, x):
    """ATen's trigamma: reflection below 0.5, six recurrence steps, then the asymptotic series."""
    small = ops.lt(x, m.c(0.5))
    s = ops.sin(ops.mul(m.c(math.pi), x))
    result = ops.where(small, ops.neg(ops.truediv(m.c(math.pi * math.pi), ops.mul(s, s))), m.c(0.0))
    sign = ops.where(small, m.c(-1.0), m.c(1.0))
    x = ops.where(small, ops.sub(m.c(1.0), x), x)
    for _ in range(6):
        result = ops.add(result, ops.truediv(m.c(1.0), ops.mul(x, x)))
        x = ops.add(x, m.c(1.0))
    ixx = ops.truediv(m.c(1.0), ops.mul(x, x))
    inner = ops.mul(ixx, ops.sub(m.c(1.0 / 30), ops.mul(ixx, m.c(1.0 / 42))))
    tail = ops.add(ops.add(m.c(1.0), ops.truediv(m.c(1.0), ops.mul(m.c(2.0), x))),
                   ops.mul(ixx, ops.sub(m.c(1.0 / 6), inner)))
    return ops.mul(sign, ops.add(result, ops.truediv(tail, x)))


@register_lowering(aten.polygamma.default)
def polygamma(ctx, n, x):
    if not ctx.dtype.is_floating_point or n not in (0, 1):
        raise NotLowerable("polygamma of order > 1 (zeta series)")
    t = _compute_dtype(ctx)
    fn = digamma if n == 0 else trigamma
    return make_pointwise(ctx, [x], lambda v: fn(_Math(t), v), compute_dtype=t)


# ---------------------------------------------------------------------------- angle

@register_lowering(aten.angle.default)
def angle(ctx, x):
    if x.get_dtype().is_complex or not ctx.dtype.is_floating_point:
        raise NotLowerable("complex angle")
    t = _compute_dtype(ctx)
    m = _Math(t)
    # real input: pi below zero, 0 otherwise, NaN stays NaN
    return make_pointwise(ctx, [x], lambda v: ops.where(ops.isnan(v), v, ops.where(ops.lt(v, m.c(0.0)),
                                                                                   m.c(math.pi), m.c(0.0))),
                          compute_dtype=t)
