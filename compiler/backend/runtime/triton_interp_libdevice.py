"""Stand-ins for `triton.language.extra.libdevice` under the Triton interpreter (CPU tests).

On a GPU, generated kernels call libdevice (CUDA's accurate math library). The interpreter has
no libdevice, so kernels generated for CPU tensors import this module under the same name; the
kernel text is otherwise identical. Each function is written with interpreter-supported tl ops;
accuracy is within a few float32 ulps, relative as well near 0 (tanh, sinh, expm1, log1p, asinh,
atanh avoid the cancellation of 1 + x; erfc uses a continued fraction where 1 - erf(x) vanishes;
hypot, pow and the hyperbolic/log functions work in float64, then round once). Functions that
need a real implementation (asin, acos, atan, atan2, lgamma, erfinv) are absent: the code
generator reports them unsupported under the interpreter, and the graph then runs eagerly.
"""
import triton
import triton.language as tl


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
    # 1 - erf(x) for x < 2; beyond, the continued fraction erfc(x) = exp(-x^2) / (sqrt(pi) * K),
    # K = x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))), evaluated from its 60th term in float64
    # (1 - erf(x) is 0 in float32 from x = 4 on, where erfc is 1.5e-8)
    z = tl.maximum(x.to(tl.float64), 2.0)
    k = z
    for n in tl.static_range(60, 0, -1):
        k = z + (n * 0.5) / k
    tail = (tl.exp(-z * z) / (1.7724538509055159 * k)).to(x.dtype)
    return tl.where(x != x, x, tl.where(x < 2.0, 1.0 - tl.erf(x), tail))


@triton.jit
def trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def nearbyint(x):
    # round half to even, like torch.round
    f = tl.floor(x)
    d = x - f
    half_odd = (d == 0.5) & ((f - 2.0 * tl.floor(f * 0.5)) != 0)
    return tl.where(d > 0.5, f + 1.0, tl.where(half_odd, f + 1.0, f))


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
    # in float64 (a * a overflowed float32 from 2e19 on)
    a64 = a.to(tl.float64)
    b64 = b.to(tl.float64)
    r = tl.sqrt(a64 * a64 + b64 * b64).to(a.dtype)
    return tl.where((tl.abs(a) == float("inf")) | (tl.abs(b) == float("inf")), float("inf"), r)


@triton.jit
def pow(a, b):
    # exp2(b * log2|a|) in float64: its error grows with |b * log2 a| (3 ** 20 was 2e-6 off in float32)
    mag = tl.exp2(b.to(tl.float64) * tl.log2(tl.abs(a).to(tl.float64))).to(a.dtype)
    b_int = tl.floor(b) == b
    b_odd = b_int & ((b - 2.0 * tl.floor(b * 0.5)) != 0)
    r = tl.where(a < 0, tl.where(b_int, tl.where(b_odd, -mag, mag), float("nan")), mag)
    r = tl.where(b == 0, 1.0, r)
    return tl.where(a == 1, 1.0, r)


# the public stand-ins: the formulas above in float64, rounded once to the argument's type

@triton.jit
def tanh(x):
    return _tanh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def sinh(x):
    return _sinh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def cosh(x):
    return _cosh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def tan(x):
    return _tan(x.to(tl.float64)).to(x.dtype)


@triton.jit
def asinh(x):
    return _asinh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def acosh(x):
    return _acosh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def atanh(x):
    return _atanh(x.to(tl.float64)).to(x.dtype)


@triton.jit
def log1p(x):
    return _log1p(x.to(tl.float64)).to(x.dtype)


@triton.jit
def expm1(x):
    return _expm1(x.to(tl.float64)).to(x.dtype)


@triton.jit
def log10(x):
    return _log10(x.to(tl.float64)).to(x.dtype)
