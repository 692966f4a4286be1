"""embedding_bag (sum / mean) as a scatter: every index position p adds weight[indices[p]] to the
row of its bag, found by a binary search of p among the bag starts (offsets).

One ir.ScatterBuffer (lowering/scatter.py) over the (position, feature) space; mean adds a count
scatter and a division. Lowered only when the graph reads just the first output (the pooled
rows): offset2bag, bag_size and max_indices are ATen bookkeeping for the backward.
"""

from __future__ import annotations

import operator

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import NotLowerable, aten, register_lowering
from tracetorch.compiler.backend.lowering.scan import static_length
from tracetorch.compiler.backend.lowering.scatter import SizedCtx, _acc_dtype, _apply, _finish, _init_buffer


def _i64(v):
    return ops.constant(int(v), torch.int64)


def _bag_of(off_load, n, p):
    """upper_bound(offsets[:n], p) - 1: the last bag starting at or before position p (empty bags,
    i.e. repeated offsets, are skipped over). Unrolled to bit_length(n) steps."""
    v = ops.index_expr(p, torch.int64)
    start, end = _i64(0), _i64(n)
    for _ in range(n.bit_length()):
        active = ops.lt(start, end)
        mid = ops.add(start, ops.floordiv(ops.sub(end, start), _i64(2)))
        m = off_load([ops.indirect_indexing(ops.minimum(mid, _i64(n - 1)), n)])
        go_right = ops.le(ops.to_dtype(m, torch.int64), v)
        start = ops.where(ops.logical_and(active, go_right), ops.add(mid, _i64(1)), start)
        end = ops.where(ops.logical_and(active, ops.logical_not(go_right)), mid, end)
    return ops.sub(start, _i64(1))


@register_lowering(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in ctx.node.users):
        raise NotLowerable("offset2bag / bag_size / max_indices are read")
    if mode not in (0, 1):
        raise NotLowerable("embedding_bag mode max")
    if include_last_offset:
        raise NotLowerable("include_last_offset")
    if len(indices.get_size()) != 1 or len(offsets.get_size()) != 1 or len(weight.get_size()) != 2:
        raise NotLowerable("embedding_bag of other ranks")
    n_bags = static_length(offsets, 0)           # the binary search is unrolled: a static count
    if n_bags == 0:
        raise NotLowerable("no bags")
    acc = _acc_dtype(ctx, "sum")
    n_pos, dim = indices.get_size()[0], weight.get_size()[1]
    rows = weight.get_size()[0]
    il, wl, ol = indices.make_loader(), weight.make_loader(), offsets.make_loader()
    pl = per_sample_weights.make_loader() if per_sample_weights is not None else None
    kept = (lambda i: ops.ne(ops.to_dtype(il(i), torch.int64), _i64(padding_idx))) if padding_idx >= 0 else None

    def indexer(i):
        # ATen rejects negative indices and a first offset other than 0: no wrapping, flagged
        return [ops.indirect_indexing(_bag_of(ol, n_bags, i[0]), n_bags, wrap_neg=False), i[1]]

    def value(i):
        v = wl([ops.indirect_indexing(il(i[:1]), rows, wrap_neg=False), i[1]])
        if pl is not None:
            v = ops.mul(v, pl(i[:1]))
        if weight.get_dtype() != acc:
            v = ops.to_dtype(v, acc)
        return ops.where(kept(i[:1]), v, ops.constant(0, acc)) if kept else v

    ranges = [n_pos, dim]
    sources = [weight, indices, offsets] + ([per_sample_weights] if per_sample_weights is not None else [])
    total = _apply(ctx, _init_buffer(ctx, None, acc, fill=0), ranges, value, indexer, "sum", sources)
    if mode == 0:
        return (_finish(ctx, total, acc), None, None, None)
    # mean: divide by the number of (non-padding) positions in the bag; an empty bag stays 0
    ones = (lambda i: ops.where(kept(i[:1]), ops.constant(1, acc), ops.constant(0, acc))) if kept else \
        (lambda i: ops.constant(1, acc))
    count_ctx = SizedCtx(ctx, [n_bags])
    count = _apply(count_ctx, _init_buffer(count_ctx, None, acc, fill=0), [n_pos], ones,
                   lambda i: [indexer([i[0], sympy.Integer(0)])[0]], "sum", [indices, offsets])
    tl_, cl = total.make_loader(), count.make_loader()

    def mean(idx):
        c = cl(idx[:1])
        v = ops.truediv(tl_(idx), ops.where(ops.eq(c, ops.constant(0, acc)), ops.constant(1, acc), c))
        return ops.to_dtype(v, ctx.dtype) if acc != ctx.dtype else v

    return (ir.Pointwise(ctx.size, mean, ctx.dtype, ctx.device, origins=ctx.origins), None, None, None)
