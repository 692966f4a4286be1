"""Stand-ins for `triton.language.extra.libdevice` under the Triton interpreter (CPU tests).

On a GPU, generated kernels call libdevice (CUDA's accurate math library). The interpreter has
no libdevice, so kernels generated for CPU tensors import this module under the same name; the
kernel text is otherwise identical. Each function is written with interpreter-supported tl ops;
accuracy is within the tolerances the tests use (a few float32 ulps, or ~1e-7 absolute where a
formula cancels). Functions that need a real implementation (asin, acos, atan, atan2, lgamma,
erfinv) are absent: the code generator reports them unsupported under the interpreter, and the
graph then runs eagerly.
"""
import triton
import triton.language as tl


@triton.jit
def tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def sinh(x):
    return 0.5 * (tl.exp(x) - tl.exp(-x))


@triton.jit
def cosh(x):
    return 0.5 * (tl.exp(x) + tl.exp(-x))


@triton.jit
def tan(x):
    return tl.sin(x) / tl.cos(x)


@triton.jit
def asinh(x):
    a = tl.abs(x)
    r = tl.log(a + tl.sqrt(a * a + 1.0))
    return tl.where(x < 0, -r, r)


@triton.jit
def acosh(x):
    return tl.log(x + tl.sqrt(x * x - 1.0))


@triton.jit
def atanh(x):
    return 0.5 * tl.log((1.0 + x) / (1.0 - x))


@triton.jit
def log1p(x):
    return tl.log(1.0 + x)


@triton.jit
def expm1(x):
    return tl.exp(x) - 1.0


@triton.jit
def log10(x):
    return tl.log(x) * 0.43429448190325176


@triton.jit
def erfc(x):
    return 1.0 - tl.erf(x)


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
    return tl.sqrt(a * a + b * b)


@triton.jit
def pow(a, b):
    mag = tl.exp2(b * tl.log2(tl.abs(a)))
    b_int = tl.floor(b) == b
    b_odd = b_int & ((b - 2.0 * tl.floor(b * 0.5)) != 0)
    r = tl.where(a < 0, tl.where(b_int, tl.where(b_odd, -mag, mag), float("nan")), mag)
    r = tl.where(b == 0, 1.0, r)
    return tl.where(a == 1, 1.0, r)
