"""Sorting along one dim (sort, argsort, topk, kthvalue, median, nanmedian) as a bitonic network.

The IR has no sort node, so a sort is a bitonic sorting network of Pointwise passes over the dim
padded to a power of two P: pass (k, j) compare-exchanges every element with the one at i ^ j,
and is stored before the next pass reads it. log2(P) * (log2(P) + 1) / 2 passes, O(n log^2 n)
work, each pass one elementwise kernel over (value, index) pairs.

Order: ascending puts NaN last, descending puts NaN first (like torch); equal keys keep their
input order (a stable sort), so the result is deterministic. Padding elements sort after
everything. The sorted dim must have a static size of at most MAX_SORT elements (larger sorts
have too many passes; ATen's sort is better there); otherwise the op falls back to ATen.
"""

from __future__ import annotations

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.reductions import make_reduction
from tracetorch.compiler.backend.lowering.registry import NotLowerable, aten, inlined_origins, register_lowering
from tracetorch.compiler.backend.lowering.scan import static_length

MAX_SORT = 16384


def _i64(v):
    return ops.constant(int(v), torch.int64)


def _before(a, b, n, descending, floating):
    """a = (value, index) comes strictly before b in the sorted order."""
    (av, ai), (bv, bi) = a, b
    if descending:
        key_lt, key_eq = ops.gt(av, bv), ops.eq(av, bv)
    else:
        key_lt, key_eq = ops.lt(av, bv), ops.eq(av, bv)
    if floating:
        an, bn = ops.isnan(av), ops.isnan(bv)
        nan_first = ops.logical_and(an, ops.logical_not(bn)) if descending else \
            ops.logical_and(ops.logical_not(an), bn)
        key_lt = ops.logical_or(key_lt, nan_first)
        key_eq = ops.logical_or(key_eq, ops.logical_and(an, bn))
    lt = ops.logical_or(key_lt, ops.logical_and(key_eq, ops.lt(ai, bi)))
    a_pad, b_pad = ops.ge(ai, _i64(n)), ops.ge(bi, _i64(n))
    return ops.logical_and(ops.logical_not(a_pad), ops.logical_or(b_pad, lt))


def sorted_loaders(ctx, x, dim, descending):
    """Loaders of the sorted values and their source indices along `dim`, over x's size with
    dim padded to a power of two (positions >= x.size[dim] hold padding)."""
    size = list(x.get_size())
    n = static_length(x, dim)
    if n > MAX_SORT:
        raise NotLowerable(f"sort of {n} > {MAX_SORT} elements")
    dtype = x.get_dtype()
    if dtype.is_complex:
        raise NotLowerable("complex sort")
    floating = dtype.is_floating_point
    p = 1
    while p < n:
        p *= 2
    psize = list(size)
    psize[dim] = sympy.Integer(p)
    xl = x.make_loader()
    zero = 0.0 if floating else (False if dtype == torch.bool else 0)

    def init_value(idx):
        inside = ops.lt(ops.index_expr(idx[dim], torch.int64), _i64(n))
        return ops.masked(inside, lambda: xl(idx), zero) if p != n else xl(idx)

    values, index = init_value, (lambda idx: ops.index_expr(idx[dim], torch.int64))
    origins = ctx.origins | inlined_origins(x)
    k = 2
    while k <= p:
        j = k // 2
        while j >= 1:
            def component(c, vl=values, il=index, k=k, j=j):
                def fn(idx):
                    i = idx[dim]
                    upper = ir.ModularIndexing(i, j, 2)          # 1 when the partner is i - j
                    other = list(idx)
                    other[dim] = i + j - 2 * j * upper
                    me, it = (vl(idx), il(idx)), (vl(other), il(other))
                    want_first = ops.eq(ops.index_expr(upper, torch.int64),
                                        ops.index_expr(ir.ModularIndexing(i, k, 2), torch.int64))
                    keep = ops.logical_not(ops.logical_xor(want_first, _before(me, it, n, descending, floating)))
                    return ops.where(keep, me[c], it[c])
                return fn
            vbuf = ctx.graph.realize(ir.Pointwise(psize, component(0), dtype, ctx.device, origins=origins, cost=8))
            ibuf = ctx.graph.realize(ir.Pointwise(psize, component(1), torch.int64, ctx.device, origins=origins,
                                                  cost=8))
            values, index = vbuf.make_loader(), ibuf.make_loader()
            j //= 2
        k *= 2
    return values, index


def _norm(dim, n):
    return dim + n if dim < 0 else dim


def _scalar_result(ctx, x):
    """A 0-d input sorted / selected along its only position: itself, at index 0."""
    return (ir.Pointwise([], x.make_loader(), x.get_dtype(), ctx.device, origins=ctx.origins),
            ir.Pointwise([], lambda idx: _i64(0), torch.int64, ctx.device, origins=ctx.origins))


def _sort(ctx, x, dim, descending):
    size = x.get_size()
    if not size:
        return _scalar_result(ctx, x)
    d = _norm(dim, len(size))
    values, index = sorted_loaders(ctx, x, d, descending)
    return (ir.Pointwise(size, values, x.get_dtype(), ctx.device, origins=ctx.origins),
            ir.Pointwise(size, index, torch.int64, ctx.device, origins=ctx.origins))


@register_lowering(aten.sort.default)
def sort(ctx, x, dim=-1, descending=False):
    # stable=False lets torch order equal keys any way; a stable order is one of those
    return _sort(ctx, x, dim, descending)


@register_lowering(aten.sort.stable)
def sort_stable(ctx, x, *, stable=None, dim=-1, descending=False):
    return _sort(ctx, x, dim, descending)


@register_lowering(aten.topk.default)
def topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    if not sorted:
        raise NotLowerable("topk(sorted=False): eager's order is unspecified")
    size = x.get_size()
    if not size:
        if k != 1:
            raise NotLowerable("topk of a 0-d tensor with k != 1")
        return _scalar_result(ctx, x)
    d = _norm(dim, len(size))
    values, index = sorted_loaders(ctx, x, d, descending=largest)
    out = ctx.size
    return (ir.Pointwise(out, values, x.get_dtype(), ctx.device, origins=ctx.origins),
            ir.Pointwise(out, index, torch.int64, ctx.device, origins=ctx.origins))


def _pick(ctx, x, d, keepdim, position, *, loaders=None):
    """(values, indices) of the sorted (ascending) dim d at `position(kept_idx)` (an op value)."""
    size = x.get_size()
    values, index = loaders or sorted_loaders(ctx, x, d, descending=False)
    p = 1
    while p < static_length(x, d):
        p *= 2

    def at(loader):
        def fn(idx):
            kept = list(idx)
            if keepdim:
                kept.pop(d)
            full = kept[:d] + [ops.indirect_indexing(position(kept), p)] + kept[d:]
            return loader(full)
        return fn
    out = ctx.size
    del size
    return (ir.Pointwise(out, at(values), x.get_dtype(), ctx.device, origins=ctx.origins),
            ir.Pointwise(out, at(index), torch.int64, ctx.device, origins=ctx.origins))


@register_lowering(aten.kthvalue.default)
def kthvalue(ctx, x, k, dim=-1, keepdim=False):
    if not x.get_size():
        if k != 1:
            raise NotLowerable("kthvalue of a 0-d tensor with k != 1 (eager raises)")
        return _scalar_result(ctx, x)
    d = _norm(dim, len(x.get_size()))
    if not 1 <= k <= static_length(x, d):
        raise NotLowerable("k out of range (eager raises)")
    return _pick(ctx, x, d, keepdim, lambda kept: _i64(k - 1))


def _nan_count_position(ctx, x, d, ignore_nan):
    """Position of the lower median along d: among the non-NaN values when ignore_nan, else
    (when a NaN is present) the first NaN, which a stable ascending sort puts right after them."""
    n = static_length(x, d)
    if not x.get_dtype().is_floating_point:
        return lambda kept: _i64((n - 1) // 2)
    count = make_reduction(ctx, x, [d], "sum", out_dtype=torch.int64, src_dtype=torch.int64,
                           value_fn=lambda v, full: ops.to_dtype(ops.logical_not(ops.isnan(v)), torch.int64))
    cl = count.make_loader()

    def position(kept):
        c = cl(kept)
        if ignore_nan:
            # (c - 1) // 2 with C truncation: 0 when every value is NaN
            return ops.floordiv(ops.maximum(ops.sub(c, _i64(1)), _i64(0)), _i64(2))
        return ops.where(ops.lt(c, _i64(n)), c, _i64((n - 1) // 2))
    return position


def _median_dim(ctx, x, dim, keepdim, ignore_nan):
    if not x.get_size():
        return _scalar_result(ctx, x)
    d = _norm(dim, len(x.get_size()))
    if static_length(x, d) == 0:
        raise NotLowerable("median of an empty dim (eager raises)")
    return _pick(ctx, x, d, keepdim, _nan_count_position(ctx, x, d, ignore_nan))


@register_lowering(aten.median.dim)
def median_dim(ctx, x, dim, keepdim=False):
    return _median_dim(ctx, x, dim, keepdim, ignore_nan=False)


@register_lowering(aten.nanmedian.dim)
def nanmedian_dim(ctx, x, dim, keepdim=False):
    return _median_dim(ctx, x, dim, keepdim, ignore_nan=True)


def _flat(ctx, x):
    from tracetorch.compiler.backend.lowering.views import flat_reindex
    numel = ir.product(x.get_size())
    return ir.View(x, [numel], flat_reindex(x.get_size(), [numel]), origins=ctx.origins)


@register_lowering(aten.median.default, aten.nanmedian.default)
def median_all(ctx, x):
    if not x.get_size():
        return _scalar_result(ctx, x)[0]
    flat = _flat(ctx, x)
    if static_length(flat, 0) == 0:
        raise NotLowerable("median of an empty tensor")
    ignore_nan = ctx.node.target is aten.nanmedian.default
    values, _ = _pick(ctx, flat, 0, False, _nan_count_position(ctx, flat, 0, ignore_nan))
    return values
