"""More special functions as Pointwise ops: erfcx, spherical_bessel_j0, airy_ai, nextafter, frexp.

Like special.py, each follows ATen's branches (aten/src/ATen/native/Math.h) with `where` over both
sides, and data-dependent loops are unrolled to a bound proven for their whole domain (airy_ai's
power series). Where ATen's algorithm cannot be replayed (erfcx's 100-interval Chebyshev table),
an equally accurate formula is evaluated in double and rounded, which agrees with eager within the
float32/float64 tolerances.

nextafter and frexp need the binary exponent of a float, and the op vocabulary has no bitcast:
it is found with log2 plus an exact correction step, and powers of two are built by multiplying
exact power-of-two constants (no exp2, whose vectorized libmvec version is not guaranteed exact).
"""

from __future__ import annotations

import math

import torch

from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import NotLowerable, aten, make_pointwise, register_lowering
from tracetorch.compiler.backend.lowering.special import _compute_dtype, _Math

F64 = torch.float64


def _check_float(ctx):
    if not ctx.dtype.is_floating_point:
        raise NotLowerable("non-float output")


# ---------------------------------------------------------------------------- erfcx

_ISPI = 0.56418958354775628694807945156   # 1 / sqrt(pi)


def erfcx_f64(m, x):
    """erfcx(x) = exp(x^2) erfc(x) in double (m is the float64 _Math). Below 3 as exp(x^2) (1 - erf(x))
    (1 - erf(x) >= 2e-5 there, so ~5e-12 relative at worst); from 3 on, the continued fraction
    erfcx(x) = 1/sqrt(pi) / (x + (1/2) / (x + (2/2) / (x + (3/2) / ...))) with 40 terms, which is
    within 5e-16 of the true value for every x >= 3 (checked against scipy's erfcx). No erfc: the
    Triton interpreter's stand-in for it is 1 - erf, useless in the tail."""
    direct = ops.mul(ops.exp(ops.mul(x, x)), ops.sub(m.c(1.0), ops.erf(x)))
    f = x
    for k in range(_ERFCX_CF_TERMS, 0, -1):
        f = ops.add(x, ops.truediv(m.c(k / 2.0), f))
    out = ops.where(ops.lt(x, m.c(3.0)), direct, ops.truediv(m.c(_ISPI), f))   # NaN: the fraction, NaN
    return ops.where(ops.lt(x, m.c(-26.7)), m.c(math.inf), out)   # ATen's explicit overflow


_ERFCX_CF_TERMS = 40


@register_lowering(aten.special_erfcx.default)
def erfcx(ctx, x):
    _check_float(ctx)
    return make_pointwise(ctx, [x], lambda v: erfcx_f64(_Math(F64), v), compute_dtype=F64)


# ---------------------------------------------------------------------------- spherical j0

@register_lowering(aten.special_spherical_bessel_j0.default)
def spherical_bessel_j0(ctx, x):
    _check_float(ctx)
    m = _Math(_compute_dtype(ctx))

    def fn(v):
        xx = ops.mul(v, v)
        # Taylor series of sin(x)/x below 0.5, nested as ATen nests it
        poly = m.c(1.0 / 6227020800.0)
        for c in (-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0):
            poly = ops.add(m.c(c), ops.mul(xx, poly))
        small = ops.add(m.c(1.0), ops.mul(xx, poly))
        out = ops.where(ops.lt(ops.abs(v), m.c(0.5)), small, ops.truediv(ops.sin(v), v))
        return ops.where(ops.isinf(v), m.c(0.0), out)
    return make_pointwise(ctx, [x], fn, compute_dtype=m.t)


# ---------------------------------------------------------------------------- airy Ai

_AIRY_AN = (3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
            1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
            1.40264691163389668864e+01, 9.99999999999999995305e-01)
_AIRY_AD = (5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
            1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
            1.40959135607834029598e+01, 1.00000000000000000470e+00)
_AIRY_AFN = (-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
             -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
             -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08)
_AIRY_AFD = (1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
             9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
             4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07)
_AIRY_AGN = (1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
             9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
             5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
             8.11789239554389293311e-08, 3.41551784765923618484e-10)
_AIRY_AGD = (9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
             5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
             4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
             4.91834570062930015649e-09)
_SQRT_1_PI = 5.64189583547756286948e-01
# ATen runs the power series while |term / sum| > epsilon. On |x| < 2.09 (the only place its value
# is used) that is 10 (float) / 14 (double) rounds, a few more next to the zero of the sum near
# x = -1.9855. A hard bound for every x: once the term underflows to 0 the test fails (0 or NaN), and
# for |x^3| <= 2.09^3 the term is below the smallest subnormal after 24 (float) / 103 (double) rounds.
# Unrolling that many rounds, each frozen once the test has failed, replays the loop exactly.
_AIRY_SERIES_ROUNDS = {torch.float32: 26, torch.float64: 105}


def _airy_series(m, x):
    eps = m.c(torch.finfo(m.t).eps)
    f, g, mm, n, t = m.c(1.0), x, m.c(1.0), x, m.c(1.0)
    z = ops.mul(ops.mul(x, x), x)
    for i in range(1, _AIRY_SERIES_ROUNDS[m.t] + 1):
        go = ops.gt(t, eps)                       # NaN stops the loop, as in ATen
        k = 3 * i                                 # ATen's counter k runs 3i-1, 3i, 3i+1 in round i
        m2 = ops.truediv(ops.truediv(ops.mul(mm, z), m.c(k - 1)), m.c(k))
        n2 = ops.truediv(ops.truediv(ops.mul(n, z), m.c(k)), m.c(k + 1))
        f2 = ops.add(f, m2)
        g2 = ops.add(g, n2)
        t2 = ops.abs(ops.truediv(m2, f2))
        mm, n, f, g, t = (ops.where(go, a, b) for a, b in ((m2, mm), (n2, n), (f2, f), (g2, g), (t2, t)))
    return ops.sub(ops.mul(m.c(0.355028053887817239260), f), ops.mul(m.c(0.258819403792806798405), g))


def _airy_negative(m, x):
    """x < -2.09: modulus/phase asymptotic form."""
    zeta = ops.truediv(ops.mul(ops.mul(m.c(-2.0), x), ops.sqrt(ops.neg(x))), m.c(3.0))
    z = ops.truediv(m.c(1.0), zeta)
    zz = ops.mul(z, z)
    afn, afd, agn, agd = (m.polevl(zz, c) for c in (_AIRY_AFN, _AIRY_AFD, _AIRY_AGN, _AIRY_AGD))
    t = ops.add(zeta, m.c(0.25 * math.pi))
    amp = ops.truediv(m.c(_SQRT_1_PI), ops.sqrt(ops.sqrt(ops.neg(x))))
    body = ops.sub(ops.mul(ops.sin(t), ops.add(m.c(1.0), ops.truediv(ops.mul(zz, afn), afd))),
                   ops.mul(ops.cos(t), ops.truediv(ops.mul(z, agn), agd)))
    return ops.mul(amp, body)


def _airy_positive(m, x):
    """x >= 2.09: exp(-zeta) times a rational function of 1/zeta."""
    zeta = ops.truediv(ops.mul(ops.mul(m.c(2.0), x), ops.sqrt(x)), m.c(3.0))
    w = ops.truediv(m.c(1.0), zeta)
    ratio = ops.truediv(m.polevl(w, _AIRY_AN), m.polevl(w, _AIRY_AD))
    den = ops.mul(ops.mul(m.c(2.0), ops.sqrt(ops.sqrt(x))), ops.exp(zeta))
    return ops.truediv(ops.mul(m.c(_SQRT_1_PI), ratio), den)


@register_lowering(aten.special_airy_ai.default)
def airy_ai(ctx, x):
    _check_float(ctx)
    m = _Math(_compute_dtype(ctx))

    def fn(v):
        # ATen computes the series for 2.09 <= x <= 8.32 too but returns the asymptotic value there
        out = ops.where(ops.lt(v, m.c(-2.09)), _airy_negative(m, v),
                        ops.where(ops.ge(v, m.c(2.09)), _airy_positive(m, v), _airy_series(m, v)))
        out = ops.where(ops.gt(v, m.c(103.892)), m.c(0.0), out)
        return ops.where(ops.isinf(v), m.c(math.nan), out)
    return make_pointwise(ctx, [x], fn, compute_dtype=m.t)


# ---------------------------------------------------------------------------- binary exponents

def _pow2(m, e):
    """2**e for an integer-valued double e in [-1074, 1023], exactly: a product of the constants
    2**(+-2**i) chosen by the bits of |e| (all partial products are exact powers of two in range)."""
    neg = ops.lt(e, m.c(0.0))
    rest = ops.abs(e)
    out = m.c(1.0)
    for i in range(10, -1, -1):
        bit = ops.ge(rest, m.c(2.0 ** i))
        rest = ops.where(bit, ops.sub(rest, m.c(2.0 ** i)), rest)
        big = 2.0 ** (2 ** i) if i < 10 else math.inf      # 2**1024 only ever taken with e < 0
        factor = ops.where(neg, m.c(2.0 ** -(2 ** i)), m.c(big))
        out = ops.where(bit, ops.mul(out, factor), out)
    return out


def _exponent(m, a):
    """floor(log2(a)) for finite a > 0 as a double, exactly: log2 may be off by one ulp next to a
    power of two, so the guess is checked against exact powers of two and moved by one."""
    e = ops.floor(ops.log2(a))
    p = _pow2(m, e)
    e = ops.where(ops.gt(p, a), ops.sub(e, m.c(1.0)), e)
    return ops.where(ops.le(ops.mul(p, m.c(2.0)), a), ops.add(e, m.c(1.0)), e)


#: mantissa bits and smallest normal exponent per dtype
_FLOAT_FORMAT = {torch.float64: (52, -1022), torch.float32: (23, -126), torch.float16: (10, -14),
                 torch.bfloat16: (7, -126)}


@register_lowering(aten.nextafter.default)
def nextafter(ctx, x, other):
    if ctx.dtype not in _FLOAT_FORMAT:
        raise NotLowerable(f"nextafter of {ctx.dtype}")
    mant, emin = _FLOAT_FORMAT[ctx.dtype]
    m = _Math(F64)
    finfo = torch.finfo(ctx.dtype)
    tiny = 2.0 ** (emin - mant)                   # the smallest subnormal

    def fn(a, b):
        ax = ops.abs(a)
        safe = ops.where(ops.logical_and(ops.gt(ax, m.c(0.0)), ops.lt(ax, m.c(math.inf))), ax, m.c(1.0))
        e = ops.maximum(_exponent(m, safe), m.c(float(emin)))     # subnormals: the fixed spacing
        away = _pow2(m, ops.sub(e, m.c(float(mant))))             # spacing above |a|
        # below an exact power of two (not the smallest normal) the spacing halves
        at_pow2 = ops.logical_and(ops.eq(safe, _pow2(m, e)), ops.gt(e, m.c(float(emin))))
        toward = ops.where(at_pow2, ops.mul(away, m.c(0.5)), away)
        up = ops.gt(b, a)
        step_up = ops.where(ops.ge(a, m.c(0.0)), away, toward)      # +: away from zero
        step_down = ops.where(ops.gt(a, m.c(0.0)), toward, away)    # -: toward zero when a > 0
        out = ops.where(up, ops.add(a, step_up), ops.sub(a, step_down))
        out = ops.copysign(out, a)    # -tiny stepped toward zero is -0.0 (a = 0 is handled below)
        out = ops.where(ops.eq(a, m.c(0.0)), ops.copysign(m.c(tiny), b), out)
        out = ops.where(ops.isinf(a), ops.copysign(m.c(finfo.max), a), out)
        out = ops.where(ops.eq(a, b), b, out)
        return ops.where(ops.logical_or(ops.isnan(a), ops.isnan(b)), ops.add(a, b), out)
    if ctx.dtype in (torch.float16, torch.bfloat16):
        # load and store through float32 (both conversions exact): the Triton interpreter turns a
        # bfloat16 tile converted straight to float64 into garbage
        def fn32(a, b, fn64=fn):
            return ops.to_dtype(fn64(ops.to_dtype(a, F64), ops.to_dtype(b, F64)), torch.float32)
        return make_pointwise(ctx, [x, other], fn32, compute_dtype=torch.float32)
    return make_pointwise(ctx, [x, other], fn, compute_dtype=F64)


@register_lowering(aten.frexp.Tensor)
def frexp(ctx, x):
    if ctx.dtype not in _FLOAT_FORMAT:
        raise NotLowerable(f"frexp of {ctx.dtype}")
    m = _Math(F64)

    def special(a):   # zeros, infinities and NaN: (a, 0), as std::frexp gives them
        return ops.logical_or(ops.eq(a, m.c(0.0)), ops.logical_or(ops.isinf(a), ops.isnan(a)))

    def safe_exponent(a):
        return _exponent(m, ops.where(special(a), m.c(1.0), ops.abs(a)))

    def mantissa(a):
        # a / 2**(e+1) as (a / 2**e) * 0.5: 2**(e+1) overflows for the largest doubles
        return ops.where(special(a), a, ops.mul(ops.truediv(a, _pow2(m, safe_exponent(a))), m.c(0.5)))

    def exponent(a):
        return ops.where(special(a), m.c(0.0), ops.add(safe_exponent(a), m.c(1.0)))
    if ctx.dtype in (torch.float16, torch.bfloat16):   # through float32, as nextafter does
        return (make_pointwise(ctx, [x], lambda a: ops.to_dtype(mantissa(ops.to_dtype(a, F64)), torch.float32),
                               compute_dtype=torch.float32),
                make_pointwise(ctx, [x], lambda a: exponent(ops.to_dtype(a, F64)), compute_dtype=torch.float32,
                               out_dtype=torch.int32))
    return (make_pointwise(ctx, [x], mantissa, compute_dtype=F64),
            make_pointwise(ctx, [x], exponent, compute_dtype=F64, out_dtype=torch.int32))
