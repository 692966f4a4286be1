"""searchsorted and bucketize as a Pointwise binary search (indirect loads, unrolled).

Every output element runs ATen's own binary search (cus_lower_bound / cus_upper_bound: the same
midpoints, the same `!(mid >= v)` test), so NaNs and unsorted boundaries give eager's answer, not
just "a" valid one. The loop is unrolled to bit_length(n) steps (its worst case) for a static
boundary length n: O(log n) loads per element; a symbolic length falls back to ATen.
"""

from __future__ import annotations

import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import (NotLowerable, aten, is_tensor, register_lowering,
                                                value_loader)
from tracetorch.compiler.backend.lowering.scan import static_length


def _i64(v):
    return ops.constant(int(v), torch.int64)


def _binary_search(ctx, seq, value_load, lead_of, n, right, compute_dtype, sorter=None):
    """Pointwise over ctx.size: the insertion position of value_load(idx) in the last dim of seq
    (its leading coordinates are lead_of(idx)); with `sorter`, seq's order is seq[sorter]."""
    if n == 0:      # nothing to search: every position is 0
        return ir.Pointwise(ctx.size, lambda idx: ops.constant(0, ctx.dtype), ctx.dtype, ctx.device,
                            origins=ctx.origins)
    seq_load = seq.make_loader()
    sorter_load = sorter.make_loader() if sorter is not None else None
    steps = max(n, 1).bit_length()
    out_dtype = ctx.dtype

    def fn(idx):
        v = value_load(idx)
        start, end = _i64(0), _i64(n)
        for _ in range(steps):
            active = ops.lt(start, end)
            mid = ops.add(start, ops.floordiv(ops.sub(end, start), _i64(2)))
            pos = ops.indirect_indexing(ops.minimum(mid, _i64(max(n - 1, 0))), n)
            if sorter_load is not None:
                pos = ops.indirect_indexing(sorter_load(list(lead_of(idx)) + [pos]), n)
            m = seq_load(list(lead_of(idx)) + [pos])
            if seq.get_dtype() != compute_dtype:
                m = ops.to_dtype(m, compute_dtype)
            go_right = ops.logical_not(ops.gt(m, v) if right else ops.ge(m, v))
            start = ops.where(ops.logical_and(active, go_right), ops.add(mid, _i64(1)), start)
            end = ops.where(ops.logical_and(active, ops.logical_not(go_right)), mid, end)
        return ops.to_dtype(start, out_dtype) if out_dtype != torch.int64 else start

    return ir.Pointwise(ctx.size, fn, out_dtype, ctx.device, origins=ctx.origins, cost=8 * steps)


def _check(seq, side, right):
    if seq.get_dtype().is_complex or seq.get_dtype() == torch.bool:
        raise NotLowerable("searchsorted of complex/bool boundaries")
    return right or side == "right"


def _compute_dtype(seq, value):
    vd = value.get_dtype() if is_tensor(value) else torch.tensor(value).dtype
    return torch.promote_types(seq.get_dtype(), vd)


@register_lowering(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def searchsorted(ctx, seq, value, *, out_int32=False, right=False, side=None, sorter=None):
    right = _check(seq, side, right)
    if not seq.get_size():
        raise NotLowerable("0-d boundaries")
    n = static_length(seq, len(seq.get_size()) - 1)
    dtype = _compute_dtype(seq, value)
    value_load = value_loader(value, ctx.size, dtype)
    lead = len(seq.get_size()) - 1
    return _binary_search(ctx, seq, value_load, lambda idx: idx[:lead], n, right, dtype, sorter)


@register_lowering(aten.bucketize.Tensor, aten.bucketize.Scalar)
def bucketize(ctx, value, boundaries, *, out_int32=False, right=False):
    right = _check(boundaries, None, right)
    if len(boundaries.get_size()) != 1:
        raise NotLowerable("bucketize boundaries must be 1-D")
    n = static_length(boundaries, 0)
    dtype = _compute_dtype(boundaries, value)
    value_load = value_loader(value, ctx.size, dtype)
    return _binary_search(ctx, boundaries, value_load, lambda idx: [], n, right, dtype)
