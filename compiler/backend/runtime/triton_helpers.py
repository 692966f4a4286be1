"""@triton.jit helpers that generated Triton kernels call (imported as `th`).

They give Triton torch's semantics where its built-ins differ: NaN-propagating max/min (torch's
max/maximum return NaN if any input is NaN; tl.maximum does not promise that), argmax/argmin
with "first occurrence wins, NaN is the extreme", floor division and remainder with the sign
rules of Python/torch (Triton's `//` and `%` on integers truncate like C).
"""
import triton
import triton.language as tl


@triton.jit
def maximum(a, b):
    # floats: one max.NaN instruction per element (sm80+) instead of compare, NaN test, or and
    # select; it made a bf16 online softmax measurably less bound by arithmetic than by memory
    if a.dtype.is_floating():
        return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    else:
        return tl.where(a > b, a, b)


@triton.jit
def minimum(a, b):
    if a.dtype.is_floating():
        return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    else:
        return tl.where(a < b, a, b)


@triton.jit
def prod_combine(a, b):
    return a * b


@triton.jit
def argmax_combine(va, ia, vb, ib):
    a_nan = va != va
    b_nan = vb != vb
    pick_a = (va > vb) | (a_nan & (b_nan == 0)) | ((va == vb) & (ia < ib)) | (a_nan & b_nan & (ia < ib))
    return tl.where(pick_a, va, vb), tl.where(pick_a, ia, ib)


@triton.jit
def argmin_combine(va, ia, vb, ib):
    a_nan = va != va
    b_nan = vb != vb
    pick_a = (va < vb) | (a_nan & (b_nan == 0)) | ((va == vb) & (ia < ib)) | (a_nan & b_nan & (ia < ib))
    return tl.where(pick_a, va, vb), tl.where(pick_a, ia, ib)


@triton.jit
def int_floordiv(a, b):
    q = a // b
    fix = ((a % b) != 0) & ((a < 0) != (b < 0))
    return tl.where(fix, q - 1, q)


@triton.jit
def int_remainder(a, b):
    m = a % b
    fix = (m != 0) & ((m < 0) != (b < 0))
    return tl.where(fix, m + b, m)


@triton.jit
def float_remainder(a, b, m):
    # m = fmod(a, b) (exact; passed in because the caller owns libdevice): moved to b's sign
    fix = (m != 0) & ((m < 0) != (b < 0))
    return tl.where(fix, m + b, m)


@triton.jit
def float_floordiv(a, b, m):
    # torch's floor division of floats, from the exact m = fmod(a, b): floor(a / b) rounds a / b
    # first (1.0 // 0.1 gave 10; torch and Python give 9). (a - m) / b is near an integer; it is
    # moved down when m has the other sign than b, then rounded to the nearest integer.
    d = (a - m) / b
    d = tl.where((m != 0) & ((b < 0) != (m < 0)), d - 1.0, d)
    f = tl.floor(d)
    f = tl.where(d - f > 0.5, f + 1.0, f)
    q = a / b
    q_neg = (q < 0) | ((q == 0) & ((1.0 / q) < 0))
    zero = tl.where(q_neg, -0.0, 0.0)    # a zero quotient keeps the sign of a / b
    r = tl.where(d == 0, zero, f)
    return tl.where(b == 0, q, r)


@triton.jit
def round_to_bf16_bits(x):
    # float32 x rounded to the nearest bfloat16 (ties to even), still as float32: the interpreter's
    # own cast truncates (and turns float64 into 0), so it is only given values it keeps exactly
    f = x.to(tl.float32)
    u = f.to(tl.uint32, bitcast=True)
    r = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return tl.where(f != f, f, r.to(tl.float32, bitcast=True))


@triton.jit
def bf16_bits_to_bf16(x):
    # a float32 holding a bfloat16 value (round_to_bf16_bits) as a bfloat16, through its bits: the
    # interpreter's value cast flushes subnormals (-1.8e-40 became -0.0)
    return (x.to(tl.uint32, bitcast=True) >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def bf16_to_float(x):
    # a bfloat16 as float32 through its bits (the interpreter's value cast flushes subnormals)
    return (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def int_pow(a, b):
    # integer power by squaring over the exponent's 63 value bits (wrapping like torch's);
    # negative exponents: 1 for a == 1, +-1 for a == -1, else 0 (torch's integer rule)
    r = tl.full(a.shape, 1, a.dtype)
    base = a
    e = tl.where(b < 0, 0, b)
    for _ in tl.static_range(63):
        r = tl.where((e & 1) != 0, r * base, r)
        base = base * base
        e = e >> 1
    if a.dtype.is_int_signed():
        neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where((b & 1) != 0, -1, 1), 0)).to(a.dtype)
        r = tl.where(b < 0, neg, r)
    return r
