"""Scans along one dim (cumsum, cumprod, logcumsumexp, cummax, cummin) as log-step passes.
(Short scans: one pointwise node in eager's order; Triton cumsums and cumprods up to
MASKED_REDUCTION_MAX: one masked reduction.)

The IR has no scan node, so a scan is built from Pointwise passes (Hillis-Steele): pass k
combines every element with the one 2**k positions earlier, and is stored before the next pass
reads it. ceil(log2(n)) passes, O(n log n) work, each pass one fusable elementwise kernel; an
inclusive scan with any associative combine (tuples too: cummax carries (value, index)).
The scanned dim must have a static size (the number of passes depends on it); otherwise the op
falls back to ATen.
"""

from __future__ import annotations

from typing import Callable, Sequence

import sympy
import torch

from tracetorch import logs
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import (NotLowerable, aten, inlined_origins, register_lowering,
                                                            uses_triton)

log = logs.get_logger(__name__)


def _acc(dtype, device):
    """ATen's accumulator type for cumsum/cumprod (at::acc_type): on the CPU a float32 scan runs
    in double (a running product past float32's range that a later 0 brings back is 0 there, not
    inf * 0 = nan), on CUDA in float32; fp16/bf16 in float32 on both."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    if dtype == torch.float32 and torch.device(device).type == "cpu":
        return torch.float64
    return dtype


def _norm_dim(ctx, x, dim):
    n = len(x.get_size())
    if n == 0:
        return None
    return dim + n if dim < 0 else dim


def static_length(x, dim) -> int:
    length = x.get_size()[dim]
    if not getattr(length, "is_number", False):
        raise NotLowerable("scan over a dim of symbolic size")
    return int(length)


def log_step_scan(ctx, size, dim, init: Sequence[Callable], dtypes: Sequence[torch.dtype],
                  combine: Callable, length: int, *, origins=None) -> list:
    """Inclusive scan along `dim` of the state tuple given by the loaders `init` (one per
    component, dtypes `dtypes`). `combine(earlier, later)` maps two state tuples (lists of op
    values) to one. Returns one loader per component over `size`."""
    loaders = list(init)
    origins = origins if origins is not None else ctx.origins
    step = 1
    while step < length:
        def component(k, lds=tuple(loaders), step=step):
            def fn(idx):
                later = [ld(idx) for ld in lds]
                prev_idx = list(idx)
                prev_idx[dim] = idx[dim] - step
                has_prev = ops.ge(ops.index_expr(idx[dim], torch.int64), ops.constant(step, torch.int64))
                earlier = [ops.masked(has_prev, lambda ld=ld: ld(prev_idx), 0) for ld in lds]
                return ops.where(has_prev, combine(earlier, later)[k], later[k])
            return fn
        bufs = [ctx.graph.realize(ir.Pointwise(size, component(k), dt, ctx.device, origins=origins, cost=4))
                for k, dt in enumerate(dtypes)]
        loaders = [b.make_loader() for b in bufs]
        step *= 2
    return loaders


def _cast_loader(x, dtype):
    ld = x.make_loader()
    if x.get_dtype() == dtype:
        return ld
    return lambda idx: ops.to_dtype(ld(idx), dtype)


def _single_scan(ctx, x, dim, combine, reduction=None):
    out = ctx.dtype
    acc = _acc(out, ctx.device)
    d = _norm_dim(ctx, x, dim)
    src = _cast_loader(x, acc)
    if d is not None:
        length = static_length(x, d)
        if length == 0:
            pass        # no elements: the loader is never called (a 0-step sequence had no value)
        elif length <= SEQUENTIAL_MAX:
            src = _sequential(src, d, length, combine)
        elif reduction is not None and length <= MASKED_REDUCTION_MAX and uses_triton(ctx.device):
            src = _masked_reduction(ctx, x, d, length, src, acc, reduction)
        else:
            [src] = log_step_scan(ctx, x.get_size(), d, [src], [acc], combine, length,
                                  origins=ctx.origins | inlined_origins(x))
    fn = src if acc == out else (lambda idx: ops.to_dtype(src(idx), out))
    return ir.Pointwise(x.get_size(), fn, out, ctx.device, origins=ctx.origins, cost=1)


#: scans up to this length combine in eager's order (one element after the other)
SEQUENTIAL_MAX = 64
#: longer cumsums and cumprods up to this length are, for Triton, one masked reduction per
#: element (quadratic work in one launch) instead of ceil(log2(n)) passes of one launch each
MASKED_REDUCTION_MAX = 2048


def _masked_reduction(ctx, x, dim, length, src, acc, reduction):
    """Element i reduces the elements j <= i of its row, the others masked to the reduction's
    neutral value: one persistent reduction kernel over [*size] x [length]. A launch-bound GPU
    step pays for launches, not for work: GPT-2's position ids (a cumsum over 512 tokens of the
    attention mask) were 9 launches per forward as log-step passes."""
    neutral = {"sum": 0, "prod": 1}[reduction]
    log.debug("scan_as_masked_reduction", reduction=reduction, length=length,
              reason="a Triton scan this short is one launch as a masked reduction, "
                     f"ceil(log2({length})) as log-step passes")

    def inner(idx, ridx):
        at = list(idx)
        at[dim] = ridx[0]
        keep = ops.le(ops.index_expr(ridx[0], torch.int64), ops.index_expr(idx[dim], torch.int64))
        return ops.where(keep, src(at), ops.constant(neutral, acc))
    red = ir.Reduction(x.get_size(), [sympy.Integer(length)], inner, reduction, acc, acc, ctx.device,
                       origins=ctx.origins | inlined_origins(x), cost=x.op_count() + 2)
    return ctx.graph.realize(red, ctx.node).make_loader()


def _sequential(src, dim, length, combine):
    """Element i is ((x0 . x1) . x2) ... . xi, ATen's order: a log-step scan adds in another order,
    which under cancellation is another value (cumsum of [x, 1e30, -1e30, y] is y eagerly and
    x + y or 0 in a tree). One pointwise node of `length` combines per element (quadratic work, for
    short dims only)."""
    def fn(idx):
        pos = ops.index_expr(idx[dim], torch.int64)
        value = None
        for j in range(length):
            at = list(idx)
            at[dim] = sympy.Integer(j)
            v = src(at)
            if value is None:
                value = v
            else:
                value = ops.where(ops.le(ops.constant(j, torch.int64), pos), combine([value], [v])[0], value)
        return value
    return fn


@register_lowering(aten.cumsum.default)
def cumsum(ctx, x, dim, dtype=None):
    return _single_scan(ctx, x, dim, lambda a, b: [ops.add(a[0], b[0])], reduction="sum")


@register_lowering(aten.cumprod.default)
def cumprod(ctx, x, dim, dtype=None):
    return _single_scan(ctx, x, dim, lambda a, b: [ops.mul(a[0], b[0])], reduction="prod")


def log_add_exp(a, b):
    """ATen's _log_add_exp_helper: max + log1p(exp(min - max)), and a itself when both are the
    same infinity (inf - inf would be NaN)."""
    lo, hi = ops.minimum(a, b), ops.maximum(a, b)
    finite_or_diff = ops.logical_or(ops.ne(lo, hi), ops.logical_not(ops.isinf(lo)))
    return ops.where(finite_or_diff, ops.add(hi, ops.log1p(ops.exp(ops.sub(lo, hi)))), a)


@register_lowering(aten.logcumsumexp.default)
def logcumsumexp(ctx, x, dim):
    if not ctx.dtype.is_floating_point:
        raise NotLowerable("logcumsumexp of a non-float tensor")
    return _single_scan(ctx, x, dim, lambda a, b: [log_add_exp(a[0], b[0])])


@register_lowering(aten.cummax.default, aten.cummin.default)
def cummax(ctx, x, dim):
    is_max = ctx.node.target is aten.cummax.default
    dtype = x.get_dtype()
    if dtype == torch.bool:
        raise NotLowerable("cummax of bool")
    d = _norm_dim(ctx, x, dim)
    size = x.get_size()
    values = x.make_loader()
    index = (lambda idx: ops.index_expr(idx[d], torch.int64)) if d is not None else \
        (lambda idx: ops.constant(0, torch.int64))
    if d is not None:
        floating = dtype.is_floating_point

        def combine(a, b):
            # ATen's cummax_cummin_helper: the later element wins when it is NaN, or when neither
            # is NaN and it is >= (<= for cummin) the running value: ties take the later index
            better = ops.ge(b[0], a[0]) if is_max else ops.le(b[0], a[0])
            if floating:
                better = ops.logical_or(ops.isnan(b[0]), ops.logical_and(ops.logical_not(ops.isnan(a[0])), better))
            return [ops.where(better, b[0], a[0]), ops.where(better, b[1], a[1])]
        values, index = log_step_scan(ctx, size, d, [values, index], [dtype, torch.int64], combine,
                                      static_length(x, d), origins=ctx.origins | inlined_origins(x))
    return (ir.Pointwise(size, values, dtype, ctx.device, origins=ctx.origins),
            ir.Pointwise(size, index, torch.int64, ctx.device, origins=ctx.origins))


__all__ = ["log_step_scan", "static_length", "log_add_exp"]
