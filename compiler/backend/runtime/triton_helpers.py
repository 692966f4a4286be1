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
def float_remainder(a, b):
    m = a - b * tl.floor(a / b)
    return m
