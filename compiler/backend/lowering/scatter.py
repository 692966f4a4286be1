"""The scatter family: scatter (src / value), scatter_add, scatter_reduce, index_reduce, index_put
(and what the aot stage turns index_add, index_copy and index_fill into: index_put).
embedding_bag builds on the same pieces (lowering/embedding_bag.py).

Each op becomes two buffers: a ComputedBuffer holding the initial values (a copy of `self`), and
an ir.ScatterBuffer that loops over the *source* iteration space (the index tensor's shape, or the
indexed shape of index_put), computes the destination through ops.indirect_indexing of the
loaded index and stores there in place (plain store, or a reduction: atomic add in Triton, a
serial read-modify-write loop in C++). float16/bfloat16 outputs of an accumulating scatter
accumulate in a float32 buffer (Triton has no atomic add for them everywhere; one rounding at
the end) and are converted back afterwards.

A bool mask index (x[mask] = v) with one value for every selected element becomes a Pointwise
where(mask, v, x). What is not lowered (the ATen op runs, with the reason logged as a perf hint):
bool masks with one value per selected element (data-dependent positions), accumulation on bool,
prod/amax/amin through Triton (no atomic for them here) and small-integer atomics in Triton.
"""

from __future__ import annotations

import sympy
import torch

from tracetorch import logs
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import Ctx, NotLowerable, aten, broadcast_loader, inlined_origins, \
    register_lowering, same, uses_triton, value_loader

log = logs.get_logger(__name__)

_LOW_PRECISION = (torch.float16, torch.bfloat16)
#: dtypes tl.atomic_add handles (after the float16/bfloat16 upcast)
_TRITON_ATOMIC = (torch.float32, torch.float64, torch.int32, torch.int64)
#: scatter_reduce's / index_reduce's names -> ir.SCATTER_MODES ("mean" is a sum and a count, see
#: _reduce_into)
_REDUCE_MODES = {"sum": "sum", "prod": "prod", "amax": "amax", "amin": "amin", "add": "sum", "multiply": "prod"}


def _acc_dtype(ctx, mode) -> torch.dtype:
    """The dtype the scatter runs in; refuses combinations no code generator implements."""
    dtype = ctx.dtype
    if mode == "store":
        return dtype
    if dtype == torch.bool:
        raise NotLowerable(f"scatter {mode} on bool")
    acc = torch.float32 if dtype in _LOW_PRECISION else dtype
    if uses_triton(ctx.device):
        if mode != "sum":
            raise NotLowerable(f"scatter reduce '{mode}' has no Triton atomic here")
        if acc not in _TRITON_ATOMIC:
            raise NotLowerable(f"no Triton atomic add for {acc}")
    return acc


def _identity(mode, dtype):
    """The value a scattered position starts from when include_self=False."""
    if mode in ("sum", "mean"):
        return 0
    if mode == "prod":
        return 1
    if dtype.is_floating_point:
        return float("-inf") if mode == "amax" else float("inf")
    info = torch.iinfo(dtype)
    return info.min if mode == "amax" else info.max


def _init_buffer(ctx, x, acc, fill=None) -> ir.ComputedBuffer:
    """A fresh buffer of the output's size holding x (converted to acc), or the constant fill.
    Fresh on purpose: the scatter writes into it in place, so nothing else may read it."""
    if fill is not None:
        fn = lambda idx: ops.constant(fill, acc)  # noqa: E731
        cost = 1
    else:
        fn = value_loader(x, ctx.size, acc)
        cost = x.op_count() + 1
    pw = ir.Pointwise(ctx.size, fn, acc, ctx.device, origins=ctx.origins | inlined_origins(x), cost=cost)
    # the fx node's strides only when the buffer is the result itself (not a float32 stand-in)
    return ctx.graph.realize(pw, ctx.node if acc == ctx.dtype else None)


def _apply(ctx, target, ranges, value_fn, indexer, mode, sources=()) -> ir.ScatterBuffer:
    """target[indexer(i)] <mode>= value_fn(i) for i in ranges, in place: a new ScatterBuffer."""
    data = ir.Scatter(ranges, value_fn, indexer, mode, target.get_dtype(), ctx.device,
                      origins=ctx.origins | inlined_origins(*sources),
                      cost=sum(s.op_count() for s in sources) + 1)
    buf = ir.ScatterBuffer(ctx.graph.new_name(), target, data)
    ctx.graph.register_buffer(buf)
    log.debug("scatter_lowered", node=ctx.node.name, op=str(ctx.node.target), buffer=buf.name,
              target=target.name, mode=mode, dtype=str(target.get_dtype()).replace("torch.", ""),
              ranges=[str(r) for r in ranges])
    return buf


def _finish(ctx, buf, acc):
    """The result in the op's dtype (a float32 accumulation buffer is rounded once, here)."""
    if acc == ctx.dtype:
        return buf
    load = buf.make_loader()
    return ir.Pointwise(ctx.size, lambda idx: ops.to_dtype(load(idx), ctx.dtype), ctx.dtype, ctx.device,
                        origins=ctx.origins)


def _static_empty(ranges) -> bool:
    return any(same(r, 0) for r in ranges)


# ------------------------------------------------------------------------ scatter family


class SizedCtx(Ctx):
    """The FX node's lowering context with another output size: for helper buffers (a 0-d
    scatter runs into a 1-element 1-d buffer; embedding_bag's mean counts per bag)."""

    def __init__(self, ctx, size):
        super().__init__(ctx.graph, ctx.node)
        self._size = [sympy.sympify(s) for s in size]

    @property
    def size(self):
        return list(self._size)


def _as_1d(t):
    """A 0-d tensor seen as 1-d of size 1 (anything else as it is)."""
    if isinstance(t, ir.IRNode) and len(t.get_size()) == 0:
        return ir.View(t, [1], lambda idx: [])
    return t


def _scatter(ctx, x, dim, index, src, mode, include_self=True):
    """scatter / scatter_add / scatter_reduce along dim: out[.., index[i], ..] <mode>= src[i]."""
    size = x.get_size()
    n = len(size)
    if index.get_dtype() not in (torch.int64, torch.int32):
        raise NotLowerable("index must be an integer tensor")
    if n == 0:
        # ATen treats 0-d self/index/src as 1-d of size 1 (the index must still be 0)
        out = _scatter(SizedCtx(ctx, [1]), _as_1d(x), 0, _as_1d(index), _as_1d(src), mode, include_self)
        return ir.View(out, [], lambda idx: [sympy.Integer(0)])
    if len(index.get_size()) != n:
        raise NotLowerable("index rank differs from self's")
    dim = dim + n if dim < 0 else dim
    il, size_d = index.make_loader(), size[dim]

    def indexer(i):
        dst = list(i)
        # ATen rejects negative scatter indices: no wrapping, out of range is an error
        dst[dim] = ops.indirect_indexing(il(i), size_d, wrap_neg=False)
        return dst

    return _reduce_into(ctx, x, index.get_size(), indexer, src, mode, include_self, [index])


def _reduce_into(ctx, x, ranges, indexer, src, mode, include_self, index_sources):
    """A copy of x with out[indexer(i)] <mode>= src[i] for every i in ranges (src: a tensor read
    at i, it may be larger than ranges, or a scalar). include_self=False first stores the mode's
    identity at every destination. mean is ATen's: the sum divided by the number of values that
    went into each position (self counts when included; count 0 -> 1 keeps unscattered
    positions); integers divide with floor."""
    step = "sum" if mode == "mean" else mode
    acc = _acc_dtype(ctx, step)
    out = _init_buffer(ctx, x, acc)
    if _static_empty(ranges):
        return _finish(ctx, out, acc)
    if not include_self:
        ident = _identity(mode, acc)
        out = _apply(ctx, out, ranges, lambda i: ops.constant(ident, acc), indexer, "store", index_sources)
    if isinstance(src, ir.IRNode):
        sl = broadcast_loader(src, ranges)
        value = (lambda i: sl(i)) if src.get_dtype() == acc else (lambda i: ops.to_dtype(sl(i), acc))
        sources = index_sources + [src]
    else:
        value, sources = value_loader(src, ranges, acc), index_sources
    out = _apply(ctx, out, ranges, value, indexer, step, sources)
    if mode != "mean":
        return _finish(ctx, out, acc)
    count = _init_buffer(ctx, None, acc, fill=1 if include_self else 0)
    count = _apply(ctx, count, ranges, lambda i: ops.constant(1, acc), indexer, "sum", index_sources)
    tl, cl = out.make_loader(), count.make_loader()
    div = ops.truediv if acc.is_floating_point else ops.floordiv

    def fn(idx):
        c = cl(idx)
        c = ops.where(ops.eq(c, ops.constant(0, acc)), ops.constant(1, acc), c)
        v = div(tl(idx), c)
        return ops.to_dtype(v, ctx.dtype) if acc != ctx.dtype else v

    return ir.Pointwise(ctx.size, fn, ctx.dtype, ctx.device, origins=ctx.origins)


@register_lowering(aten.scatter.src, aten.scatter.value)
def scatter(ctx, x, dim, index, src):
    one = _one_per_row(ctx, x, dim, index, src)
    if one is not None:
        return one
    return _scatter(ctx, x, dim, index, src, "store")


def _one_per_row(ctx, x, dim, index, src):
    """A scatter whose index has size 1 along `dim` and self's sizes elsewhere writes exactly one
    element of every row along `dim`: out[i] = src[row] where i[dim] == index[row], else x[i]
    (row: i with i[dim] = 0). As a Pointwise it fuses with its readers: nll_loss's backward
    scatters -1 at each label into a zero (tokens x vocabulary) tensor, which a kernel of its own
    wrote out in full for the softmax backward to read back (GPT-2 at 4 x 512 tokens: 411 MB
    each way). None where the shapes say otherwise (the general scatter handles them)."""
    size = x.get_size()
    n = len(size)
    if n == 0 or index.get_dtype() not in (torch.int64, torch.int32) or len(index.get_size()) != n:
        return None
    dim = dim + n if dim < 0 else dim
    isize = index.get_size()
    if not same(isize[dim], 1) or not all(same(isize[d], size[d]) for d in range(n) if d != dim):
        return None
    if isinstance(src, ir.IRNode) and len(src.get_size()) != n:
        return None
    il, xl = index.make_loader(), value_loader(x, size, ctx.dtype)
    sl = value_loader(src, src.get_size() if isinstance(src, ir.IRNode) else size, ctx.dtype)

    def fn(i):
        row = list(i)
        row[dim] = sympy.Integer(0)
        # the position is checked as the scatter's would be (no wrapping: ATen rejects negatives)
        pos = ops.indirect_indexing(il(row), size[dim], wrap_neg=False, check=True)
        hit = ops.eq(ops.index_expr(i[dim], torch.int64), ops.index_expr(pos, torch.int64))
        return ops.where(hit, sl(row), xl(i))

    log.debug("scatter_as_pointwise", node=ctx.node.name, reason="one element per row along dim "
              f"{dim}: a select of the scattered value, fused with its readers")
    return ir.Pointwise(ctx.size, fn, ctx.dtype, ctx.device, origins=ctx.origins | inlined_origins(x),
                        cost=x.op_count() + 2)


@register_lowering(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(ctx, x, dim, index, src, reduce):
    if reduce not in ("add", "multiply"):
        raise NotLowerable(f"scatter reduce={reduce!r}")
    return _scatter(ctx, x, dim, index, src, _REDUCE_MODES[reduce])


@register_lowering(aten.scatter_add.default)
def scatter_add(ctx, x, dim, index, src):
    return _scatter(ctx, x, dim, index, src, "sum")


def _reduce_mode(ctx, reduce) -> str:
    if reduce == "mean":
        if not ctx.dtype.is_floating_point and uses_triton(ctx.device):
            raise NotLowerable("integer scatter mean (floor division) through Triton")
        return "mean"
    if reduce not in _REDUCE_MODES:
        raise NotLowerable(f"reduce {reduce!r}")
    return _REDUCE_MODES[reduce]


@register_lowering(aten.scatter_reduce.two)
def scatter_reduce(ctx, x, dim, index, src, reduce, include_self=True):
    return _scatter(ctx, x, dim, index, src, _reduce_mode(ctx, reduce), include_self)


@register_lowering(aten.index_reduce.default)
def index_reduce(ctx, x, dim, index, source, reduce, include_self=True):
    """out[.., index[j], ..] <reduce>= source[.., j, ..] along dim (index 1-D, no wrapping)."""
    size = x.get_size()
    n = len(size)
    if n == 0:      # as a 1-element 1-d one, like ATen
        out = index_reduce(SizedCtx(ctx, [1]), _as_1d(x), 0, _as_1d(index), _as_1d(source), reduce, include_self)
        return ir.View(out, [], lambda idx: [sympy.Integer(0)])
    if len(index.get_size()) != 1 or index.get_dtype() not in (torch.int64, torch.int32):
        raise NotLowerable("index_reduce with an index that is not a 1-D integer tensor")
    dim = dim + n if dim < 0 else dim
    mode = _reduce_mode(ctx, reduce)
    il, size_d = index.make_loader(), size[dim]

    def indexer(i):
        dst = list(i)
        dst[dim] = ops.indirect_indexing(il([i[dim]]), size_d, wrap_neg=False)
        return dst

    return _reduce_into(ctx, x, source.get_size(), indexer, source, mode, include_self, [index])


# ------------------------------------------------------------------------------ index_put


def _broadcast_sizes(shapes) -> list:
    """numpy broadcasting of sympy shapes (the op's meta already checked they broadcast)."""
    nd = max(len(s) for s in shapes)
    out = []
    for k in range(nd):
        dims = [s[len(s) - nd + k] for s in shapes if len(s) - nd + k >= 0]
        big = [d for d in dims if not same(d, 1)]
        out.append(big[0] if big else sympy.Integer(1))
    return out


@register_lowering(aten.index_put.default, *([aten._unsafe_index_put.default]
                                            if hasattr(aten, "_unsafe_index_put") else []))
def index_put(ctx, x, indices, values, accumulate=False):
    """x[indices] = values (or += with accumulate): the source space is the indexed shape (as in
    the `index` lowering): broadcast index dims in place when the indexed dims are adjacent,
    first otherwise; the other dims run over x's. Negative indices wrap, like ATen."""
    size = x.get_size()
    n = len(size)
    indices = list(indices) + [None] * (n - len(indices))
    pos = [d for d, t in enumerate(indices) if t is not None]
    if n == 0 or not pos:
        raise NotLowerable("index_put without index tensors")
    if any(indices[d].get_dtype() in (torch.bool, torch.uint8) for d in pos):
        return _index_put_mask(ctx, x, indices, values, accumulate)
    if any(indices[d].get_dtype() not in (torch.int64, torch.int32) for d in pos):
        raise NotLowerable("index tensor of a non-integer dtype")
    mode = "sum" if accumulate else "store"
    acc = _acc_dtype(ctx, mode)
    idx_tensors = [indices[d] for d in pos]
    bshape = _broadcast_sizes([t.get_size() for t in idx_tensors])
    bdim = len(bshape)
    rest = [d for d in range(n) if d not in pos]
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    first = pos[0] if adjacent else 0
    if adjacent:
        ranges = list(size[:first]) + bshape + list(size[pos[-1] + 1:])
    else:
        ranges = bshape + [size[d] for d in rest]
    if len(values.get_size()) > len(ranges):
        raise NotLowerable("values of higher rank than the indexed shape")
    out = _init_buffer(ctx, x, acc)
    if _static_empty(ranges):
        return _finish(ctx, out, acc)
    loaders = [broadcast_loader(t, bshape) for t in idx_tensors]

    def indexer(o):
        b = o[first:first + bdim]
        others = list(o[:first]) + list(o[first + bdim:])
        dst = [None] * n
        for d, ld in zip(pos, loaders):
            dst[d] = ops.indirect_indexing(ld(b), size[d])
        for d, i in zip(rest, others):
            dst[d] = i
        return dst

    value = value_loader(values, ranges, acc)
    return _finish(ctx, _apply(ctx, out, ranges, value, indexer, mode, idx_tensors + [values]), acc)


def _index_put_mask(ctx, x, indices, values, accumulate):
    """x[mask] = values (or +=) where one value goes to every selected element (values broadcast
    along the selected-elements dim): a Pointwise where(mask, value, x), no scatter needed.
    One value per selected element would need the selected positions' ranks (a cumsum of the
    mask: data-dependent), so that case runs the ATen op."""
    size = x.get_size()
    pos = [d for d, t in enumerate(indices) if t is not None]
    if len(pos) != 1:
        raise NotLowerable("boolean index together with other index tensors")
    d = pos[0]
    mask = indices[d]
    k = len(mask.get_size())
    post = list(size[d + k:])
    rank = d + 1 + len(post)                  # rank of the indexed shape x.shape[:d] + (nnz,) + post
    vsize = values.get_size()
    nnz_dim = d - (rank - len(vsize))         # values' dim aligned with the selected elements
    if len(vsize) > rank or (nnz_dim >= 0 and not same(vsize[nnz_dim], 1)):
        raise NotLowerable("boolean index with one value per selected element (data-dependent positions)")
    dtype = ctx.dtype
    ml, xl = mask.make_loader(), value_loader(x, size, dtype)
    vl = value_loader(values, list(size[:d]) + [sympy.Integer(1)] + post, dtype)

    def fn(idx):
        m = ml(idx[d:d + k])
        if mask.get_dtype() != torch.bool:
            m = ops.to_dtype(m, torch.bool)
        old = xl(idx)
        v = vl(list(idx[:d]) + [sympy.Integer(0)] + list(idx[d + k:]))
        return ops.where(m, ops.add(old, v) if accumulate else v, old)

    log.debug("index_put_mask_lowered", node=ctx.node.name, accumulate=bool(accumulate))
    return ir.Pointwise(ctx.size, fn, dtype, ctx.device, origins=ctx.origins | inlined_origins(x, mask, values),
                        cost=x.op_count() + mask.op_count() + values.op_count() + 2)


def _unflatten(flat, size) -> list:
    """Row-major coordinates of the flat position `flat` in a tensor of `size`."""
    strides = ir.contiguous_strides(size)
    return [ir.ModularIndexing(flat, st, sz) if not same(sz, 1) else sympy.Integer(0)
            for st, sz in zip(strides, size)]


@register_lowering(aten.put.default)
def put(ctx, x, index, source, accumulate=False):
    """self.flatten()[index] = source (or +=), source read in index's row-major order; negative
    positions wrap like ATen's."""
    if index.get_dtype() not in (torch.int64, torch.int32):
        raise NotLowerable("put with a non-integer index")
    size, ranges = x.get_size(), index.get_size()
    if not same(ir.product(ranges), ir.product(source.get_size())):
        raise NotLowerable("put with index and source of different sizes")
    mode = "sum" if accumulate else "store"
    acc = _acc_dtype(ctx, mode)
    out = _init_buffer(ctx, x, acc)
    if _static_empty(ranges):
        return _finish(ctx, out, acc)
    il, sl = index.make_loader(), source.make_loader()
    numel = ir.product(size)
    ssize = source.get_size()

    def indexer(i):
        return _unflatten(ops.indirect_indexing(il(i), numel), size)

    def value(i):
        flat = sum((v * st for v, st in zip(i, ir.contiguous_strides(ranges))), sympy.Integer(0))
        v = sl(_unflatten(flat, ssize) if [str(s) for s in ssize] != [str(r) for r in ranges] else i)
        return ops.to_dtype(v, acc) if source.get_dtype() != acc else v

    return _finish(ctx, _apply(ctx, out, ranges, value, indexer, mode, [index, source]), acc)
