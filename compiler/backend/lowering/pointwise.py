"""Elementwise aten ops -> ir.Pointwise (type promotion follows the FX node's output metadata)."""

from __future__ import annotations

import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import (NotLowerable, aten, is_tensor, make_pointwise,
                                                promoted_dtype, register_lowering)

# unary ops computed in the output dtype: aten name -> ops name
_UNARY = {
    "abs": "abs", "neg": "neg", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin",
    "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    "sigmoid": "sigmoid", "erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "lgamma": "lgamma",
    "floor": "floor", "ceil": "ceil", "trunc": "trunc", "sign": "sign", "sgn": "sign",
    "reciprocal": "reciprocal", "relu": "relu", "bitwise_not": "bitwise_not", "square": "square",
}


def _unary(opname):
    def lower(ctx, x):
        if not is_tensor(x):
            raise NotLowerable("scalar input")
        if opname == "sign" and ctx.dtype.is_complex:
            raise NotLowerable("complex")
        return make_pointwise(ctx, [x], getattr(ops, opname))
    return lower


for _aten_name, _op in _UNARY.items():
    if hasattr(aten, _aten_name):
        register_lowering(getattr(aten, _aten_name).default)(_unary(_op))


@register_lowering(aten.round.default)
def _round(ctx, x):
    return make_pointwise(ctx, [x], ops.round)


@register_lowering(aten.logical_not.default)
def _logical_not(ctx, x):
    return make_pointwise(ctx, [x], ops.logical_not, compute_dtype=torch.bool)


@register_lowering(aten.isnan.default, aten.isinf.default, aten.signbit.default)
def _float_predicate(ctx, x):
    name = ctx.node.target.__name__.split(".")[0]
    return make_pointwise(ctx, [x], getattr(ops, name), compute_dtype=x.get_dtype())


@register_lowering(aten.isfinite.default)
def _isfinite(ctx, x):
    return make_pointwise(ctx, [x], lambda v: ops.logical_not(ops.logical_or(ops.isnan(v), ops.isinf(v))),
                          compute_dtype=x.get_dtype())


# arithmetic that leaves {0, 1} on bool operands (True + True == 2): computed in int32 and
# renormalized by the final cast to bool (nonzero -> True), as torch's bool add/mul are or/and
_LEAVES_BOOL = {"add", "sub", "mul"}


def _as_operand_dtype(scalar, dtype, device):
    """A Python scalar that eager's CPU kernel takes in the op's half-precision dtype: rounded to
    it (1e20 is inf in float16; `x + 0.1001` adds float16(0.1001)). CUDA kernels keep scalars in
    their float compute type, so only CPU graphs round."""
    if device.type != "cpu":
        return scalar
    if dtype in (torch.float16, torch.bfloat16) and isinstance(scalar, (int, float)) and not isinstance(scalar, bool):
        return float(torch.tensor(float(scalar), dtype=dtype))
    return scalar


#: ops whose Python-scalar operand eager's CPU kernels take in the op's own (half) dtype; mul,
#: div and floor division keep it in float (measured on float16/bfloat16 against both roundings)
_SCALAR_IN_OP_DTYPE = {"add", "sub", "remainder", "fmod", "atan2", "hypot"}


def _binary(opname, scale_arg=False):
    def lower(ctx, a, b, alpha=1):
        if not (is_tensor(a) or is_tensor(b)):
            raise NotLowerable("no tensor operand")
        compute = torch.int32 if ctx.dtype == torch.bool and opname in _LEAVES_BOOL else None
        if not is_tensor(a) and (opname in _SCALAR_IN_OP_DTYPE or ctx.node.target._overloadname == "Scalar_Tensor"):
            a = _as_operand_dtype(a, ctx.dtype, ctx.device)
        if not is_tensor(b) and opname in _SCALAR_IN_OP_DTYPE:
            b = _as_operand_dtype(b, ctx.dtype, ctx.device)
        if ctx.dtype == torch.bool and not hasattr(alpha, "free_symbols"):
            # eager converts alpha to the op's type first (bool(-1) is True), so a + alpha * b on
            # bool is a or (alpha and b); scaling the int32 sum by -1 gave a xor b
            alpha = int(bool(alpha))
        if alpha != 1:
            return make_pointwise(ctx, [a, b, alpha], _scaled(ctx, opname), compute_dtype=compute)
        return make_pointwise(ctx, [a, b], getattr(ops, opname), compute_dtype=compute)
    return lower


def _scaled(ctx, opname):
    """a + alpha * b (or a - alpha * b). ATen's CPU kernel computes it fused, fma(b, alpha, a):
    one rounding, so `inf - 2 * 3.4e38` is inf and `-3e38 + 2 * 3e38` is 3e38 in float32, where a
    rounded product overflows to inf (inf - inf is NaN: fuzz 340101). For float32 and the half
    types (computed in float) the fused result is reproduced in double: alpha * b is exact there
    (alpha is taken in the op's type, as eager converts it), and the sum is rounded once more to
    float, which is fma's value but for rare double-rounding ties. float64 has no wider type: it
    takes a real fma on every device (ATen's CUDA kernel contracts `a + alpha * b` too), so
    `a - 2 * a` at a = 1e308 is -1e308 as in eager, not -inf (fuzz 461171). Integers keep the
    plain form."""
    op = getattr(ops, opname)
    if opname in ("add", "sub") and ctx.dtype == torch.float64:
        if opname == "add":
            return lambda x, y, al: ops.fma(y, al, x)
        return lambda x, y, al: ops.fma(y, ops.neg(al), x)
    if opname not in ("add", "sub") or ctx.device.type != "cpu" or \
            ctx.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return lambda x, y, al: op(x, ops.mul(y, al))
    wide, back = torch.float64, ctx.dtype

    def fused(x, y, al):
        return ops.to_dtype(op(ops.to_dtype(x, wide), ops.mul(ops.to_dtype(y, wide), ops.to_dtype(al, wide))), back)
    return fused


for _name, _op in {"add": "add", "sub": "sub", "mul": "mul", "div": "truediv", "true_divide": "truediv",
                   "maximum": "maximum", "minimum": "minimum", "fmax": None, "atan2": "atan2",
                   "copysign": "copysign", "hypot": "hypot", "fmod": "fmod", "remainder": "remainder",
                   "floor_divide": "floordiv", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
                   "bitwise_xor": "bitwise_xor", "bitwise_left_shift": "left_shift",
                   "bitwise_right_shift": "right_shift", "__lshift__": "left_shift",
                   "__rshift__": "right_shift"}.items():
    if _op is None or not hasattr(aten, _name):
        continue
    _packet = getattr(aten, _name)
    for _ov in ("Tensor", "Scalar", "default", "Scalar_Tensor"):
        if _ov in _packet.overloads():
            register_lowering(getattr(_packet, _ov))(_binary(_op))


@register_lowering(aten.rsub.Tensor, aten.rsub.Scalar)
def _rsub(ctx, a, b, alpha=1):
    if not is_tensor(b):
        b = _as_operand_dtype(b, ctx.dtype, ctx.device)
    return make_pointwise(ctx, [b, a, alpha], lambda y, x, al: ops.sub(y, ops.mul(x, al)))


@register_lowering(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(ctx, a, b, rounding_mode=None):
    if rounding_mode is None:
        return make_pointwise(ctx, [a, b], ops.truediv)
    if ctx.dtype.is_floating_point:
        if rounding_mode == "floor":   # not floor(a / b): ops.floordiv follows torch's fmod-based rule
            return make_pointwise(ctx, [a, b], ops.floordiv)
        dtype = ctx.dtype

        def trunc_div(x, y):
            q = ops.truediv(x, y)
            if dtype in (torch.float16, torch.bfloat16):
                # eager's kernels divide half-precision values into a value of that dtype, then
                # truncate it: 2.998 rounds to 3.0 first and truncates to 3, not 2
                q = ops.to_dtype(ops.to_dtype(q, dtype), torch.float32)
            return ops.trunc(q)
        return make_pointwise(ctx, [a, b], trunc_div)
    if rounding_mode == "trunc":
        return make_pointwise(ctx, [a, b], ops.truediv)  # C integer division truncates
    return make_pointwise(ctx, [a, b], ops.floordiv)


#: pow(x, c) for the constant exponents ATen's own pow kernels special-case (CPU and CUDA alike:
#: products for 2, 3 and -2, sqrt / rsqrt / reciprocal for 0.5, -0.5, -1), as the same arithmetic,
#: so the results are eager's; a general pow is a libdevice call several times slower (GPT-2's
#: tanh GELU has pow(x, 3.0)). `times(a, b)` is a product as eager's kernel forms it: ATen's CPU
#: kernel rounds each bfloat16 product (its float16 ones stay float until the end: both measured);
#: elsewhere the products stay float32, as inductor's. Float-only entries need a floating-point
#: result.
_POW_BY_EXPONENT = {
    1: (False, lambda x, times: x),
    2: (False, lambda x, times: times(x, x)),
    3: (False, lambda x, times: times(times(x, x), x)),
    0.5: (True, lambda x, times: ops.sqrt(x)),
    -0.5: (True, lambda x, times: ops.rsqrt(x)),
    -1: (True, lambda x, times: ops.reciprocal(x)),
    -2: (True, lambda x, times: ops.reciprocal(times(x, x))),
}


@register_lowering(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def _pow(ctx, a, b):
    if not is_tensor(b) and not hasattr(b, "free_symbols") and not isinstance(b, bool):
        float_only, fn = _POW_BY_EXPONENT.get(b, (None, None))
        if fn is not None and (ctx.dtype.is_floating_point or not float_only):
            dtype = ctx.dtype
            if dtype == torch.bfloat16 and ctx.device.type == "cpu":
                def times(x, y):
                    return ops.to_dtype(ops.to_dtype(ops.mul(x, y), dtype), torch.float32)
            else:
                times = ops.mul
            return make_pointwise(ctx, [a], lambda x: fn(x, times))
    return make_pointwise(ctx, [a, b], ops.pow)


def _compare(opname):
    def lower(ctx, a, b):
        return make_pointwise(ctx, [a, b], getattr(ops, opname), compute_dtype=promoted_dtype(ctx))
    return lower


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _packet = getattr(aten, _name)
    for _ov in ("Tensor", "Scalar"):
        register_lowering(getattr(_packet, _ov))(_compare(_name))


def _logical(opname):
    def lower(ctx, a, b):
        return make_pointwise(ctx, [a, b], getattr(ops, opname), compute_dtype=torch.bool)
    return lower


for _name in ("logical_and", "logical_or", "logical_xor"):
    register_lowering(getattr(aten, _name).default)(_logical(_name))


@register_lowering(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(ctx, cond, a, b):
    return make_pointwise(ctx, [cond, a, b], lambda c, x, y: ops.where(ops.to_dtype(c, torch.bool), x, y),
                          compute_dtype=ctx.dtype)


def _at_least(x, lo):
    """clamp's lower bound as ATen's: x itself where x equals the bound (clamp_min(-0.0, 0) is
    -0.0 in eager, where maximum may answer either zero: fuzz 441355), NaN from either side."""
    return ops.where(ops.logical_or(ops.lt(x, lo), ops.ne(lo, lo)), lo, x)


def _at_most(x, hi):
    return ops.where(ops.logical_or(ops.gt(x, hi), ops.ne(hi, hi)), hi, x)


def _clamp_fn(lo, hi):
    def fn(x, *bounds):
        it = iter(bounds)
        if lo is not None:
            x = _at_least(x, next(it))
        if hi is not None:
            x = _at_most(x, next(it))
        return x
    return fn


@register_lowering(aten.clamp.default, aten.clamp.Tensor)
def _clamp(ctx, x, min=None, max=None):
    bounds = [b for b in (min, max) if b is not None]
    return make_pointwise(ctx, [x, *bounds], _clamp_fn(min, max))


@register_lowering(aten.clamp_min.default, aten.clamp_min.Tensor)
def _clamp_min(ctx, x, lo):
    return make_pointwise(ctx, [x, lo], _at_least)


@register_lowering(aten.clamp_max.default, aten.clamp_max.Tensor)
def _clamp_max(ctx, x, hi):
    return make_pointwise(ctx, [x, hi], _at_most)


@register_lowering(aten._to_copy.default)
def _to_copy(ctx, x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if device is not None and torch.device(device) != x.get_device():
        raise NotLowerable("device copy")
    if x.get_dtype().is_complex or ctx.dtype.is_complex:
        raise NotLowerable("complex dtype")
    return make_pointwise(ctx, [x], lambda v: v, compute_dtype=ctx.dtype)


@register_lowering(aten.clone.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _identity(ctx, x, memory_format=None):
    return make_pointwise(ctx, [x], lambda v: v)


@register_lowering(aten.alias.default, aten.detach.default)
def _alias(ctx, x):
    """An alias shares its input's memory, so a value already in memory is passed on as it is: an
    extern call reading alias(saved value) read a copy of it (the attention backward's `out`
    argument: one copy kernel per layer of a ViT's backward). A lazy value stays lazy, inlined
    where it is read. Where the graph returns the alias, the caller gets a tensor of its own,
    as eager's alias is a new tensor object (the output path regenerates views: _output_view)."""
    returned = any(u.op == "output" for u in ctx.node.users)
    if isinstance(x, (ir.Buffer, ir.ReinterpretView)) and not returned:
        return x
    return make_pointwise(ctx, [x], lambda v: v)


@register_lowering(aten.copy.default)
def _copy(ctx, dst, src, non_blocking=False):
    return make_pointwise(ctx, [src], lambda v: v)


@register_lowering(aten.fmax.default, aten.fmin.default)
def _fmax(ctx, a, b):
    # NaN-ignoring max/min: a NaN operand yields the other one; of two equal operands (0.0 and
    # -0.0) the first, as ATen's kernels give it (fuzz 380100: fmin(-0.0, 0.0) was 0.0 in C++,
    # and 1 / it inf instead of -inf)
    beats = ops.gt if ctx.node.target is aten.fmax.default else ops.lt

    def fn(x, y):
        return ops.where(ops.isnan(x), y, ops.where(ops.isnan(y), x, ops.where(beats(y, x), y, x)))
    return make_pointwise(ctx, [a, b], fn)


@register_lowering(aten.round.decimals)
def _round_decimals(ctx, x, decimals=0):
    if not ctx.dtype.is_floating_point:
        raise NotLowerable("integer round")
    scale = 10.0 ** decimals
    return make_pointwise(ctx, [x], lambda v: ops.truediv(ops.round(ops.mul(v, ops.constant(scale, ctx.dtype))),
                                                          ops.constant(scale, ctx.dtype)))
