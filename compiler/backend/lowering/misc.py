"""Factories (full, arange), concatenation and padding (masked loads), and indexing
(embedding, index, gather, index_select through ops.indirect_indexing)."""

from __future__ import annotations

import math

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import (NotLowerable, aten, broadcast_loader,
                                                            register_lowering, same, to_sympy)


def _const_node(ctx, value):
    dtype = ctx.dtype
    if isinstance(value, sympy.Basic) and not value.is_number:
        fn = lambda idx: ops.index_expr(value, dtype)  # noqa: E731
    else:
        if dtype == torch.bool:
            v = bool(value)
        elif dtype.is_floating_point:
            v = float(value)
        elif isinstance(value, float) and not math.isfinite(value):
            # an integer fill of inf/nan (a decomposition's -inf start on an empty integer tensor):
            # the value ATen's float -> integer conversion gives, where int() would raise
            v = int(torch.tensor(value, dtype=torch.float64).to(dtype).item())
        else:
            v = int(value)
        fn = lambda idx: ops.constant(v, dtype)  # noqa: E731
    return ir.Pointwise(ctx.size, fn, dtype, ctx.device, origins=ctx.origins)


@register_lowering(aten.full.default, aten.scalar_tensor.default)
def full(ctx, size_or_value, value=None, **kwargs):
    if ctx.dtype.is_complex:
        raise NotLowerable("complex")
    return _const_node(ctx, size_or_value if value is None else value)


@register_lowering(aten.full_like.default)
def full_like(ctx, x, value, **kwargs):
    return _const_node(ctx, value)


@register_lowering(aten.zeros_like.default, aten.new_zeros.default, aten.zeros.default)
def zeros(ctx, *args, **kwargs):
    if ctx.dtype.is_complex:
        raise NotLowerable("complex")
    return _const_node(ctx, 0)


@register_lowering(aten.empty_like.default, aten.new_empty.default, aten.empty.memory_format,
                   aten.empty_strided.default, aten.new_empty_strided.default, aten.empty_permuted.default)
def empty(ctx, *args, **kwargs):
    """Values nobody defined: zeros where a kernel reads them (inlined, free), and a fresh
    allocation without a fill where an ATen call takes the tensor (lowering/extern.py): dropout's
    `bernoulli(empty_like(x), p)` zero-filled a tensor per dropout layer that ATen never reads
    (37 kernels in GPT-2's training forward)."""
    node = zeros(ctx)
    node.uninitialized = True
    return node


@register_lowering(aten.ones_like.default, aten.new_ones.default, aten.ones.default)
def ones(ctx, *args, **kwargs):
    return _const_node(ctx, 1)


@register_lowering(aten.new_full.default)
def new_full(ctx, x, size, value, **kwargs):
    return _const_node(ctx, value)


@register_lowering(aten.fill.Scalar)
def fill(ctx, x, value):
    return _const_node(ctx, value)


@register_lowering(aten.arange.start_step, aten.arange.default, aten.arange.start)
def arange(ctx, start, end=None, step=1, **kwargs):
    if end is None:
        start, end = 0, start
    dtype = ctx.dtype
    acc = torch.float64 if dtype.is_floating_point else torch.int64

    def fn(idx):
        i = ops.index_expr(idx[0], acc)
        v = ops.add(ops.mul(i, _scalar(step, acc)), _scalar(start, acc))
        return ops.to_dtype(v, dtype) if acc != dtype else v

    return ir.Pointwise(ctx.size, fn, dtype, ctx.device, origins=ctx.origins)


def _scalar(v, dtype):
    if isinstance(v, sympy.Basic) and not v.is_number:
        return ops.index_expr(v, dtype)
    return ops.constant(float(v) if dtype.is_floating_point else int(v), dtype)


def iota(ctx, length, *, start, step, dtype=None, device=None, requires_grad=False):
    return arange(ctx, start, start + step * length, step)


if hasattr(torch.ops.prims, "iota"):
    register_lowering(torch.ops.prims.iota.default)(iota)


def _index_value(i):
    return ops.index_expr(i, torch.int64)


def _in_range(i, lo, hi):
    """lo <= i < hi as a bool value (sympy bounds)."""
    return ops.logical_and(ops.ge(_index_value(i), _index_value(lo)), ops.lt(_index_value(i), _index_value(hi)))


@register_lowering(aten.cat.default)
def cat(ctx, tensors, dim=0):
    size = ctx.size
    n = len(size)
    dim = dim + n if dim < 0 else dim
    parts = [t for t in tensors if not (len(t.get_size()) == 1 and same(t.get_size()[0], 0) and n > 1)]
    dtype = ctx.dtype
    offsets, off = [], sympy.Integer(0)
    for t in parts:
        offsets.append(off)
        off = off + t.get_size()[dim]
    loaders = [t.make_loader() for t in parts]

    def fn(idx):
        result = None
        for k in reversed(range(len(parts))):
            lo, hi = offsets[k], offsets[k] + parts[k].get_size()[dim]
            src = list(idx)
            src[dim] = idx[dim] - lo
            ld, t = loaders[k], parts[k]

            def body(ld=ld, src=src, t=t):
                v = ld(src)
                return ops.to_dtype(v, dtype) if t.get_dtype() != dtype else v
            # every part is masked: its loads are out of bounds outside its slice of the output
            m = ops.masked(_in_range(idx[dim], lo, hi), body, 0)
            result = m if result is None else ops.where(_in_range(idx[dim], lo, hi), m, result)
        return result

    return ir.Pointwise(size, fn, dtype, ctx.device, origins=ctx.origins,
                        cost=sum(t.op_count() for t in parts) + len(parts))


@register_lowering(aten.constant_pad_nd.default)
def constant_pad_nd(ctx, x, pad, value=0):
    size = ctx.size
    n = len(size)
    lows = [sympy.Integer(0)] * n
    for k in range(len(pad) // 2):
        lows[n - 1 - k] = to_sympy(pad[2 * k])
    in_size = x.get_size()
    loader = x.make_loader()
    dtype = ctx.dtype

    def fn(idx):
        src = [i - lo for i, lo in zip(idx, lows)]
        conds = [_in_range(s, 0, sz) for s, lo, sz in zip(src, lows, in_size) if lo != 0 or True]
        padded = [d for d in range(n) if lows[d] != 0 or not same(in_size[d], size[d])]
        if not padded:
            return loader(src)
        mask = None
        for d in padded:
            c = conds[d]
            mask = c if mask is None else ops.logical_and(mask, c)
        return ops.masked(mask, lambda: loader(src), value)

    return ir.Pointwise(size, fn, dtype, ctx.device, origins=ctx.origins, cost=x.op_count() + 2)


@register_lowering(aten.embedding.default)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    wl = weight.make_loader()
    il = indices.make_loader()
    nrows = weight.get_size()[0]
    k = len(indices.get_size())

    def fn(idx):
        row = ops.indirect_indexing(il(idx[:k]), nrows)
        return wl([row, idx[k]])

    return ir.Pointwise(ctx.size, fn, ctx.dtype, ctx.device, origins=ctx.origins)


@register_lowering(aten.index_select.default)
def index_select(ctx, x, dim, index):
    n = len(x.get_size())
    if n == 0:
        # a 0-d tensor has one element: every (valid) index selects it; indirect_indexing keeps
        # the bounds check of the index
        xl, il = x.make_loader(), index.make_loader()

        def scalar(idx):
            ops.indirect_indexing(il([sympy.Integer(0)] * len(index.get_size())), 1)
            return xl([])
        return ir.Pointwise(ctx.size, scalar, ctx.dtype, ctx.device, origins=ctx.origins)
    dim = dim + n if dim < 0 else dim
    xl, il = x.make_loader(), index.make_loader()
    size_d = x.get_size()[dim]

    def fn(idx):
        src = list(idx)
        src[dim] = ops.indirect_indexing(il([idx[dim]] if index.get_size() else []), size_d)
        return xl(src)

    return ir.Pointwise(ctx.size, fn, ctx.dtype, ctx.device, origins=ctx.origins)


@register_lowering(aten.gather.default)
def gather(ctx, x, dim, index, sparse_grad=False):
    n = len(x.get_size())
    dim = dim + n if dim < 0 else dim
    if n == 0:
        raise NotLowerable("0-d gather")
    xl, il = x.make_loader(), index.make_loader()
    size_d = x.get_size()[dim]

    def fn(idx):
        src = list(idx)
        src[dim] = ops.indirect_indexing(il(idx), size_d)
        return xl(src)

    return ir.Pointwise(ctx.size, fn, ctx.dtype, ctx.device, origins=ctx.origins)


@register_lowering(aten.index.Tensor, aten._unsafe_index.Tensor)
def index(ctx, x, indices):
    size = x.get_size()
    pos = [d for d, t in enumerate(indices) if t is not None]
    if not pos or any(t.get_dtype() not in (torch.int64, torch.int32) for t in indices if t is not None):
        raise NotLowerable("boolean or empty index")
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    out = ctx.size
    idx_tensors = [indices[d] for d in pos]
    bdim = max(len(t.get_size()) for t in idx_tensors)
    rest = [d for d in range(len(size)) if d not in pos]
    first = pos[0] if adjacent else 0
    bshape = out[first:first + bdim]
    loaders = [broadcast_loader(t, bshape) for t in idx_tensors]
    xl = x.make_loader()

    def fn(o):
        b = o[first:first + bdim]
        others = list(o[:first]) + list(o[first + bdim:])
        src = [None] * len(size)
        for d, ld in zip(pos, loaders):
            src[d] = ops.indirect_indexing(ld(b), size[d])
        for d, i in zip(rest, others):
            src[d] = i
        return xl(src)

    return ir.Pointwise(out, fn, ctx.dtype, ctx.device, origins=ctx.origins)


def _norm_bound(v, size, default):
    if v is None:
        return default
    if isinstance(v, int):
        if v < 0:
            v = size + v
        if isinstance(size, sympy.Integer) or getattr(size, "is_number", False):
            v = max(0, min(int(v), int(size)))
    return to_sympy(v)


@register_lowering(aten.slice_scatter.default)
def slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    size = x.get_size()
    n = len(size)
    dim = dim + n if dim < 0 else dim
    start = _norm_bound(start, size[dim], sympy.Integer(0))
    end = _norm_bound(end, size[dim], size[dim])
    xl, sl = x.make_loader(), src.make_loader()
    dtype = ctx.dtype

    def fn(idx):
        j = idx[dim]
        jv = _index_value(j)
        hit = ops.logical_and(_in_range(j, start, end),
                              ops.eq(ops.remainder(ops.sub(jv, _index_value(start)),
                                                           ops.constant(int(step), torch.int64)),
                                     ops.constant(0, torch.int64)))
        sub = list(idx)
        sub[dim] = ir.FloorDiv(j - start, step)

        def body():
            v = sl(sub)
            return ops.to_dtype(v, dtype) if src.get_dtype() != dtype else v
        return ops.where(hit, ops.masked(hit, body, 0), xl(idx))

    return ir.Pointwise(size, fn, dtype, ctx.device, origins=ctx.origins)


@register_lowering(aten.select_scatter.default)
def select_scatter(ctx, x, src, dim, index):
    size = x.get_size()
    n = len(size)
    dim = dim + n if dim < 0 else dim
    if isinstance(index, int) and index < 0:
        index = size[dim] + index
    index = to_sympy(index)
    xl, sl = x.make_loader(), src.make_loader()
    dtype = ctx.dtype

    def fn(idx):
        hit = ops.eq(_index_value(idx[dim]), _index_value(index))
        sub = list(idx[:dim]) + list(idx[dim + 1:])

        def body():
            v = sl(sub)
            return ops.to_dtype(v, dtype) if src.get_dtype() != dtype else v
        return ops.where(hit, ops.masked(hit, body, 0), xl(idx))

    return ir.Pointwise(size, fn, dtype, ctx.device, origins=ctx.origins)


@register_lowering(aten.diagonal_scatter.default)
def diagonal_scatter(ctx, x, src, offset=0, dim1=0, dim2=1):
    """x with its (offset, dim1, dim2) diagonal replaced by src, whose last dim runs along it."""
    size = x.get_size()
    n = len(size)
    d1, d2 = (dim1 + n if dim1 < 0 else dim1), (dim2 + n if dim2 < 0 else dim2)
    xl, sl = x.make_loader(), src.make_loader()
    dtype = ctx.dtype
    off = int(offset)

    def fn(idx):
        i1, i2 = idx[d1], idx[d2]
        hit = ops.eq(ops.sub(_index_value(i2), _index_value(i1)), ops.constant(off, torch.int64))
        sub = [i for d, i in enumerate(idx) if d not in (d1, d2)] + [i1 if off >= 0 else i2]

        def body():
            v = sl(sub)
            return ops.to_dtype(v, dtype) if src.get_dtype() != dtype else v
        return ops.where(hit, ops.masked(hit, body, 0), xl(idx))

    return ir.Pointwise(size, fn, dtype, ctx.device, origins=ctx.origins)
