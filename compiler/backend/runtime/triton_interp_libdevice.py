"""Stand-ins for `triton.language.extra.libdevice` under the Triton interpreter (CPU tests).

On a GPU, generated kernels call libdevice (CUDA's accurate math library). The interpreter has
no libdevice, so kernels generated for CPU tensors import this module under the same name; the
kernel text is otherwise identical. Each function is written with interpreter-supported tl ops;
accuracy is within a few float32 ulps, relative as well near 0 (tanh, sinh, expm1, log1p, asinh,
atanh avoid the cancellation of 1 + x; erfc is C's, on the host, at every dtype;
hypot, pow, the hyperbolic/log functions and the inverse trigonometric, lgamma and erfinv
stand-ins work in float64, then round once). With these, every libdevice function the code
generator emits has a stand-in, so CPU tests check the Triton code of every op.

float64 arguments are the exception: a formula in float64 is itself a few float64 ulps off (pow's
exp2(b * log2 a) was 5 ulps off at 397.8, and `1e20 % that` made it a different number: fuzz
421129), and there is no wider type to work in. Under the interpreter a kernel body is plain
Python over numpy arrays, so float64 calls go to C's math library on the host (`_on_host`),
within an ulp as libdevice's double functions are.
"""
import math

import numpy as np
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _libm(c_fn, np_fn):
    """C's function elementwise (Python's math module is libm, as ATen's scalar code calls);
    where Python raises instead of answering (a pole, overflow, a domain error), numpy's answer:
    C's inf or NaN. numpy's own vectorized tanh was 2 ulps off."""
    def one(*xs):
        try:
            return c_fn(*xs)
        except (ValueError, OverflowError):
            with np.errstate(all="ignore"):
                return float(np_fn(*xs))
    return np.vectorize(one, otypes=[np.float64])


def _lgamma_raised(x):
    # Python raises at a pole (0, -1, ...) and on overflow (|x| > 2.6e305); C's lgamma is +inf
    # at both
    return np.inf


_HOST = {name: _libm(getattr(math, name), np_fn) for name, np_fn in [
    ("tanh", np.tanh), ("sinh", np.sinh), ("cosh", np.cosh), ("tan", np.tan), ("asinh", np.arcsinh),
    ("acosh", np.arccosh), ("atanh", np.arctanh), ("log1p", np.log1p), ("expm1", np.expm1),
    ("log10", np.log10), ("atan", np.arctan), ("asin", np.arcsin), ("acos", np.arccos),
    ("atan2", np.arctan2), ("hypot", np.hypot), ("lgamma", _lgamma_raised), ("erfc", lambda x: np.nan)]}
_HOST["pow"] = np.power        # numpy's float64 power is C's pow (math.pow raises on overflow)


def _on_host(name, *args):
    """C's `name` over the arguments' arrays (interpreter only: a plain call from a kernel
    body), as a float64 block of their broadcast shape."""
    with np.errstate(all="ignore"):
        data = np.asarray(_HOST[name](*[a.handle.data for a in args]), dtype=np.float64)
    ty = tl.block_type(tl.float64, list(data.shape)) if data.ndim else tl.float64
    return tl.tensor(TensorHandle(data, tl.float64), ty)


@triton.jit
def log(x):
    return tl.log(x)


@triton.jit
def _tanh(x):
    # from expm1 (accurate near 0: tanh of 1e-308 is 1e-308, not 0)
    e = _expm1(-2.0 * tl.abs(x))
    t = -e / (2.0 + e)
    return tl.where(x == 0, x, tl.where(x < 0, -t, t))


@triton.jit
def _sinh(x):
    a = tl.abs(x)
    e = _expm1(a)
    s = tl.where(a < 20.0, 0.5 * (e + e / (e + 1.0)), tl.exp(a - 0.6931471805599453))   # exp(a) / 2 without overflow
    return tl.where(x == 0, x, tl.where(x < 0, -s, s))


@triton.jit
def _cosh(x):
    a = tl.abs(x)
    big = tl.exp(a - 0.6931471805599453)       # e^a / 2, without overflowing before e^a does
    return tl.where(a < 1.0, 0.5 * (tl.exp(a) + tl.exp(-a)), big + 0.25 / big)


@triton.jit
def _tan(x):
    return tl.sin(x) / tl.cos(x)


@triton.jit
def _asinh(x):
    a = tl.abs(x)
    r = tl.where(a > 1e18, tl.log(a) + 0.6931471805599453, _log1p(a + a * a / (1.0 + tl.sqrt(a * a + 1.0))))
    return tl.where(x == 0, x, tl.where(x < 0, -r, r))


@triton.jit
def _acosh(x):
    r = tl.where(x > 1e8, tl.log(x) + 0.6931471805599453, _log1p((x - 1.0) + tl.sqrt((x - 1.0) * (x + 1.0))))
    return tl.where(x < 1.0, float("nan"), r)


@triton.jit
def _atanh(x):
    a = tl.abs(x)
    r = 0.5 * _log1p(2.0 * a / (1.0 - a))
    return tl.where(x == 0, x, tl.where(x < 0, -r, r))


@triton.jit
def _log1p(x):
    # log(u) * x / (u - 1) with u = 1 + x cancels the rounding of u (log(1 + 1e-36) is not 0)
    u = 1.0 + x
    small = log(u) * (x / (u - 1.0))
    return tl.where(u == 1.0, x, tl.where(tl.abs(x) < 0.5, small, tl.log(u)))


@triton.jit
def _expm1(x):
    # (u - 1) * x / log(u) with u = exp(x) cancels the rounding of u near 0
    u = tl.exp(x)
    small = (u - 1.0) * (x / tl.log(u))
    return tl.where(u == 1.0, x, tl.where(tl.abs(x) < 0.5, small, u - 1.0))


@triton.jit
def _log10(x):
    return tl.log(x) * 0.43429448190325176


@triton.jit
def erfc(x):
    # C's erfc on the host in float64, rounded once to x's type: computed here, 1 - erf(x) in
    # float32 kept erfc's value only to ~1e-5 for x in [1, 2) (fuzz 470431, a sum 2e-7 off)
    return _on_host("erfc", x.to(tl.float64)).to(x.dtype)


@triton.jit
def trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def nearbyint(x):
    # round half to even, like torch.round; a negative value that rounds to 0 gives -0.0, as
    # rint does (f + 1.0 = -1.0 + 1.0 was +0.0: round(-0.4) lost its sign, fuzz 400232)
    f = tl.floor(x)
    d = x - f
    half_odd = (d == 0.5) & ((f - 2.0 * tl.floor(f * 0.5)) != 0)
    r = tl.where(d > 0.5, f + 1.0, tl.where(half_odd, f + 1.0, f))
    return tl.where((r == 0) & (x < 0), -0.0, tl.where(r == 0, x * 0.0, r))


@triton.jit
def fmod(a, b):
    # `%` on floats is the exact IEEE fmod (LLVM frem; numpy.fmod in the interpreter); the
    # quotient formula a - trunc(a / b) * b rounds a / b first (fmod(1, 0.1) came out 0, not 0.1)
    return a % b


@triton.jit
def signbit(x):
    return (x < 0) | ((x == 0) & ((1.0 / x) < 0))


@triton.jit
def copysign(a, b):
    neg = (b < 0) | ((b == 0) & ((1.0 / b) < 0))
    return tl.where(neg, -tl.abs(a), tl.abs(a))


@triton.jit
def hypot(a, b):
    if a.dtype == tl.float64:
        return _on_host("hypot", a, b)
    # in float64 (a * a overflowed float32 from 2e19 on)
    a64 = a.to(tl.float64)
    b64 = b.to(tl.float64)
    r = tl.sqrt(a64 * a64 + b64 * b64).to(a.dtype)
    return tl.where((tl.abs(a) == float("inf")) | (tl.abs(b) == float("inf")), float("inf"), r)


@triton.jit
def pow(a, b):
    if a.dtype == tl.float64:
        return _on_host("pow", a, b.to(tl.float64))
    # |a| ** b as exp2(b * log2|a|) in float64 (its error grows with |b * log2 a|: 3 ** 20 was
    # 2e-6 off in float32), then C's special cases (libdevice's and ATen's pow follow them):
    # the sign of a negative base (-0.0 included) for odd integer exponents, NaN for a negative
    # finite base with a finite non-integer exponent (an infinite base or exponent is not NaN:
    # (-inf) ** 0.5 = inf, (-2) ** inf = inf), and 1 for b == 0, a == 1 and (-1) ** +-inf
    mag = tl.exp2(b.to(tl.float64) * tl.log2(tl.abs(a).to(tl.float64))).to(a.dtype)
    b_finite = tl.abs(b) != float("inf")
    b_int = (tl.floor(b) == b) & b_finite
    b_odd = b_int & ((b - 2.0 * tl.floor(b * 0.5)) != 0)
    negative = (a < 0) | ((a == 0) & ((1.0 / a) < 0))          # -0.0 too
    r = tl.where(negative & b_odd, -mag, mag)
    r = tl.where((a < 0) & (tl.abs(a) != float("inf")) & b_finite & ~b_int, float("nan"), r)
    r = tl.where(b == 0, 1.0, r)
    r = tl.where((a == -1) & ~b_finite, 1.0, r)
    return tl.where(a == 1, 1.0, r)


@triton.jit
def _atan(x):
    # |x| > 1 reflects (atan x = pi/2 - atan 1/x), then three half-angle steps
    # (atan t = 2 atan(t / (1 + sqrt(1 + t^2)))) bring |t| under 0.1, where 11 terms of the Taylor
    # series are exact in float64 (the next term is below 1e-23)
    a = tl.abs(x)
    big = a > 1.0
    t = tl.where(big, 1.0 / a, a)
    for _ in tl.static_range(3):
        t = t / (1.0 + tl.sqrt(1.0 + t * t))
    t2 = t * t
    s = t * 0.0
    for k in tl.static_range(21, 0, -2):       # t - t^3/3 + t^5/5 - ..., Horner from t^21
        s = (1.0 / k) - t2 * s
    r = 8.0 * t * s
    r = tl.where(big, 1.5707963267948966 - r, r)
    return tl.where(x == 0, x, tl.where(x < 0, -r, r))


@triton.jit
def _atan2(y, x):
    # the angle of |y|/|x| in [0, pi/2] (both infinite: pi/4, both zero: 0), mirrored to
    # pi - angle when x's sign bit is set, then given y's sign: C's atan2, signed zeros included
    ay = tl.abs(y)
    ax = tl.abs(x)
    both_inf = (ay == float("inf")) & (ax == float("inf"))
    both_zero = (ay == 0) & (ax == 0)
    a = tl.where(both_inf, 0.7853981633974483, tl.where(both_zero, 0.0, _atan(ay / tl.where(both_zero, 1.0, ax))))
    a = tl.where(signbit(x), 3.141592653589793 - a, a)
    r = copysign(a, y)
    return tl.where((x != x) | (y != y), x + y, r)


@triton.jit
def _lgamma(x):
    # x > 0: shift to z >= 10 (lgamma x = lgamma(x + n) - log(x (x+1) ... (x+n-1))), then
    # Stirling's series to 1/z^7 (next term < 1e-12 there); x <= 0: the reflection
    # lgamma x = log(pi / |sin(pi x)|) - lgamma(1 - x), inf at the poles (integers <= 0)
    neg = x <= 0.0
    z = tl.where(neg, 1.0 - x, x)
    shift = z * 0.0
    for _ in tl.static_range(10):
        small = z < 10.0
        shift = tl.where(small, shift + tl.log(tl.where(small, z, 1.0)), shift)
        z = tl.where(small, z + 1.0, z)
    iz = 1.0 / z
    iz2 = iz * iz
    series = iz * (1.0 / 12.0 - iz2 * (1.0 / 360.0 - iz2 * (1.0 / 1260.0 - iz2 * (1.0 / 1680.0))))
    pos = (z - 0.5) * tl.log(z) - z + 0.9189385332046728 + series - shift
    # |sin(pi x)| from x's distance to the nearest integer (x - floor(x) rounds -1e-30 to 1)
    d = x - tl.floor(x + 0.5)
    refl = tl.log(3.141592653589793 / tl.abs(tl.sin(3.141592653589793 * d))) - pos
    r = tl.where(neg, tl.where(d == 0, float("inf"), refl), pos)
    r = tl.where((x == 1.0) | (x == 2.0), 0.0, r)       # exact zeros, as C's lgamma gives
    return tl.where(tl.abs(x) == float("inf"), float("inf"), tl.where(x != x, x, r))


@triton.jit
def _erfinv(y):
    # Winitzki's closed-form estimate (a = 0.147), then three Newton steps on erf in float64:
    # x -= (erf x - y) / (2/sqrt(pi) exp(-x^2)); +-1 give +-inf, |y| > 1 NaN
    a = tl.abs(y)
    w = tl.log((1.0 - a) * (1.0 + a))
    u = 4.330746750799873 + 0.5 * w                 # 2 / (pi * 0.147) + w / 2
    x = tl.sqrt(tl.sqrt(u * u - w / 0.147) - u)
    for _ in tl.static_range(3):
        x = x - (tl.erf(x) - a) / (1.1283791670955126 * tl.exp(-x * x))
    x = tl.where(a == 1.0, float("inf"), tl.where(a > 1.0, float("nan"), x))
    return tl.where(y == 0, y, tl.where(y < 0, -x, x))


# the public stand-ins: the formulas above in float64, rounded once to the argument's type
# (float64 arguments: C's math on the host, module docstring)


@triton.jit
def atan(x):
    if x.dtype == tl.float64:
        return _on_host("atan", x)
    return _atan(x.to(tl.float64)).to(x.dtype)


@triton.jit
def atan2(y, x):
    if y.dtype == tl.float64:
        return _on_host("atan2", y, x.to(tl.float64))
    return _atan2(y.to(tl.float64), x.to(tl.float64)).to(y.dtype)


@triton.jit
def asin(x):
    if x.dtype == tl.float64:
        return _on_host("asin", x)
    x64 = x.to(tl.float64)
    return _atan2(x64, tl.sqrt((1.0 - x64) * (1.0 + x64))).to(x.dtype)


@triton.jit
def acos(x):
    if x.dtype == tl.float64:
        return _on_host("acos", x)
    x64 = x.to(tl.float64)
    return _atan2(tl.sqrt((1.0 - x64) * (1.0 + x64)), x64).to(x.dtype)


@triton.jit
def lgamma(x):
    if x.dtype == tl.float64:
        return _on_host("lgamma", x)
    return _lgamma(x.to(tl.float64)).to(x.dtype)


@triton.jit
def erfinv(x):
    return _erfinv(x.to(tl.float64)).to(x.dtype)


@triton.jit
def tanh(x):
    if x.dtype == tl.float64:
        return _on_host("tanh", x)
    return _tanh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def sinh(x):
    if x.dtype == tl.float64:
        return _on_host("sinh", x)
    return _sinh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def cosh(x):
    if x.dtype == tl.float64:
        return _on_host("cosh", x)
    return _cosh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def tan(x):
    if x.dtype == tl.float64:
        return _on_host("tan", x)
    return _tan(x.to(tl.float64)).to(x.dtype)


@triton.jit
def asinh(x):
    if x.dtype == tl.float64:
        return _on_host("asinh", x)
    return _asinh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def acosh(x):
    if x.dtype == tl.float64:
        return _on_host("acosh", x)
    return _acosh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def atanh(x):
    if x.dtype == tl.float64:
        return _on_host("atanh", x)
    return _atanh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def log1p(x):
    if x.dtype == tl.float64:
        return _on_host("log1p", x)
    return _log1p(x.to(tl.float64)).to(x.dtype)


@triton.jit
def expm1(x):
    if x.dtype == tl.float64:
        return _on_host("expm1", x)
    return _expm1(x.to(tl.float64)).to(x.dtype)


@triton.jit
def log10(x):
    if x.dtype == tl.float64:
        return _on_host("log10", x)
    return _log10(x.to(tl.float64)).to(x.dtype)
