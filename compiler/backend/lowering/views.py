"""View ops: folded into index expressions, never copies.

On a stored buffer (Buffer / ReinterpretView) a view is a new strided Layout over the same
storage (ir.ReinterpretView): loads stay `base[offset + sum(i*stride)]`, and extern kernels get
zero-copy views. On a lazy value (Pointwise / View) it is an ir.View whose reindex function maps
the view's coordinates to the source's; reshapes go through the flat index and are simplified
with the loop ranges (ir.simplify_index), so `view(B, T*C) -> view(B, T, C)` folds back to plain
coordinates.
"""

from __future__ import annotations

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.lowering.registry import NotLowerable, aten, register_lowering, same, to_sympy


def layout_of(x):
    if isinstance(x, ir.ReinterpretView):
        return x.data, x.layout
    if isinstance(x, ir.Buffer) and x.layout is not None:
        return x, x.layout
    return None, None


def _view(ctx, x, size, reindex, layout_fn=None):
    base, layout = layout_of(x)
    if layout is not None and layout_fn is not None:
        new = layout_fn(layout)
        if new is not None:
            return ir.ReinterpretView(base, new, origins=ctx.origins)
    return ir.View(x, size, reindex, origins=ctx.origins)


def _norm_dim(d, n):
    return d + n if d < 0 else d


@register_lowering(aten.permute.default)
def permute(ctx, x, dims):
    n = len(x.get_size())
    dims = [_norm_dim(d, n) for d in dims]
    size = [x.get_size()[d] for d in dims]

    def reindex(idx):
        old = [None] * n
        for k, d in enumerate(dims):
            old[d] = idx[k]
        return old

    return _view(ctx, x, size, reindex, lambda L: ir.Layout([L.size[d] for d in dims], [L.stride[d] for d in dims],
                                                             L.dtype, L.device, L.offset))


@register_lowering(aten.t.default)
def t(ctx, x):
    return permute(ctx, x, list(reversed(range(len(x.get_size())))))


@register_lowering(aten.transpose.int)
def transpose(ctx, x, d0, d1):
    n = len(x.get_size())
    dims = list(range(n))
    d0, d1 = _norm_dim(d0, n), _norm_dim(d1, n)
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(ctx, x, dims)


@register_lowering(aten.expand.default)
def expand(ctx, x, sizes, implicit=False):
    old = x.get_size()
    size = ctx.size
    off = len(size) - len(old)
    bcast = [same(o, 1) and not same(s, 1) for o, s in zip(old, size[off:])]

    def reindex(idx):
        return [sympy.Integer(0) if b else i for i, b in zip(idx[off:], bcast)]

    def layout(L):
        stride = [sympy.Integer(0)] * off + [sympy.Integer(0) if b else st for st, b in zip(L.stride, bcast)]
        return ir.Layout(size, stride, L.dtype, L.device, L.offset)

    return _view(ctx, x, size, reindex, layout)


@register_lowering(aten.unsqueeze.default)
def unsqueeze(ctx, x, dim):
    n = len(x.get_size())
    dim = _norm_dim(dim, n + 1)
    size = ctx.size

    def reindex(idx):
        return list(idx[:dim]) + list(idx[dim + 1:])

    def layout(L):
        st = L.stride[dim] * L.size[dim] if dim < n else sympy.Integer(1)
        return ir.Layout(size, L.stride[:dim] + [st] + L.stride[dim:], L.dtype, L.device, L.offset)

    return _view(ctx, x, size, reindex, layout)


@register_lowering(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def squeeze(ctx, x, dim=None):
    old = x.get_size()
    n = len(old)
    asked = list(range(n)) if dim is None else \
        [_norm_dim(d, n) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    dims = [d for d in asked if n and same(old[d], 1)]      # (a 0-d tensor's squeeze(0) keeps it)
    if n and len(ctx.size) == n - len(set(asked)) and len(dims) < len(set(asked)):
        # the trace squeezed every dim asked, so each was 1 there (and is guarded so): a size
        # the expressions do not simplify to 1 (a split of s0 * s1 into chunks of 1) still is
        dims = sorted(set(asked))
    keep = [d for d in range(n) if d not in dims]
    if len(keep) != len(ctx.size):
        raise NotLowerable(f"squeeze of sizes {old} to {ctx.size}: which dims are 1 is not known here")

    def reindex(idx):
        it = iter(idx)
        return [sympy.Integer(0) if d in dims else next(it) for d in range(n)]

    return _view(ctx, x, [old[d] for d in keep], reindex,
                 lambda L: ir.Layout([L.size[d] for d in keep], [L.stride[d] for d in keep], L.dtype,
                                     L.device, L.offset))


@register_lowering(aten.slice.Tensor)
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    old = x.get_size()
    n = len(old)
    dim = _norm_dim(dim, n)
    start = 0 if start is None else start
    if isinstance(start, int):
        if start < 0:
            start = old[dim] + start
            if old[dim].is_number:
                start = max(int(start), 0)
        elif old[dim].is_number:
            start = min(start, int(old[dim]))
    start = to_sympy(start)
    size = ctx.size

    def reindex(idx):
        out = list(idx)
        out[dim] = start + step * idx[dim]
        return out

    def layout(L):
        stride = list(L.stride)
        stride[dim] = L.stride[dim] * step
        return ir.Layout(size, stride, L.dtype, L.device, L.offset + start * L.stride[dim])

    return _view(ctx, x, size, reindex, layout)


@register_lowering(aten.select.int)
def select(ctx, x, dim, index):
    old = x.get_size()
    n = len(old)
    dim = _norm_dim(dim, n)
    if isinstance(index, int) and index < 0:
        index = old[dim] + index
    index = to_sympy(index)

    def reindex(idx):
        return list(idx[:dim]) + [index] + list(idx[dim:])

    def layout(L):
        return ir.Layout(L.size[:dim] + L.size[dim + 1:], L.stride[:dim] + L.stride[dim + 1:], L.dtype, L.device,
                         L.offset + index * L.stride[dim])

    return _view(ctx, x, ctx.size, reindex, layout)


def _strided_reshape(L: ir.Layout, new_size):
    """New strides for viewing layout L as new_size without a copy (ATen's computeStride), or None.
    Only for concrete sizes; symbolic non-contiguous reshapes use the flat-index View."""
    dense = all(same(sz, 1) or same(a, b) for sz, a, b in zip(L.size, L.stride, ir.contiguous_strides(L.size)))
    if dense:
        return ir.Layout(new_size, ir.contiguous_strides(new_size), L.dtype, L.device, L.offset)
    if not all(s.is_number for s in list(L.size) + list(new_size) + list(L.stride)):
        return None
    old, ost = [int(s) for s in L.size], [int(s) for s in L.stride]
    new = [int(s) for s in new_size]
    if not old:
        return ir.Layout(new_size, [1] * len(new), L.dtype, L.device, L.offset)
    nst = [0] * len(new)
    view_d = len(new) - 1
    chunk = ost[-1]
    tnum, vnum = 1, 1
    for td in range(len(old) - 1, -1, -1):
        tnum *= old[td]
        if td == 0 or (old[td - 1] != 1 and ost[td - 1] != tnum * chunk):
            while view_d >= 0 and (vnum < tnum or new[view_d] == 1):
                nst[view_d] = vnum * chunk
                vnum *= new[view_d]
                view_d -= 1
            if vnum != tnum:
                return None
            if td > 0:
                chunk, tnum, vnum = ost[td - 1], 1, 1
    if view_d != -1:
        return None
    return ir.Layout(new_size, nst, L.dtype, L.device, L.offset)


def reshape_groups(old_size, new_size):
    """[(old dims, new dims)]: the shortest runs of dims whose sizes multiply to the same number
    on both sides (ATen's reshape maps each run onto its partner alone), size-1 dims left out;
    None where the sizes are symbolic or do not pair up. (2, 768, 14, 14) -> (2, 768, 196) is
    [([0], [0]), ([1], [1]), ([2, 3], [2])]: the channel never enters the spatial index math."""
    if not all(isinstance(s, int) or getattr(s, "is_number", False) for s in list(old_size) + list(new_size)):
        return None
    old = [d for d, s in enumerate(old_size) if int(s) != 1]
    new = [d for d, s in enumerate(new_size) if int(s) != 1]
    groups, i, j = [], 0, 0
    while i < len(old) and j < len(new):
        go, gn = [old[i]], [new[j]]
        po, pn = int(old_size[old[i]]), int(new_size[new[j]])
        i, j = i + 1, j + 1
        while po != pn:
            if po < pn and i < len(old):
                po *= int(old_size[old[i]])
                go.append(old[i])
                i += 1
            elif pn < po and j < len(new):
                pn *= int(new_size[new[j]])
                gn.append(new[j])
                j += 1
            else:
                return None
        groups.append((go, gn))
    return groups if i == len(old) and j == len(new) else None


def flat_reindex(old_size, new_size):
    """Reindex function new coords -> old coords through the row-major flat index, simplified.
    With concrete sizes the flat index is taken per run of dims that reshape onto each other
    (reshape_groups): an index shifted by a cat (`x1 - 1`, whose range the simplifier cannot
    see) then stays inside its own run, where the whole-tensor flat index mixed every dim into
    one expression no range could split (ViT's patch tokens: 768 * ((x1-1) % 14) + ... instead
    of `((-1 + x1 + 196 * r + 150528 * x0) // 196) % 768` and its kin in every LayerNorm load)."""
    old_size, new_size = list(old_size), list(new_size)
    groups = reshape_groups(old_size, new_size)
    if groups is not None and len(groups) > 1:
        parts = [(go, gn, flat_reindex([old_size[d] for d in go], [new_size[d] for d in gn])) for go, gn in groups]

        def grouped(idx):
            out = [sympy.Integer(0)] * len(old_size)
            for go, gn, sub in parts:
                for d, v in zip(go, sub([idx[d] for d in gn])):
                    out[d] = v
            return out
        return grouped
    new_strides = ir.contiguous_strides(new_size)
    old_strides = ir.contiguous_strides(old_size)

    memo: dict = {}

    def reindex(idx):
        key = tuple(idx)
        if key not in memo:
            memo[key] = _reindex(idx)
        return memo[key]

    # a static size 0: the view has no element, its loader is built but never run (its strides
    # would divide by the 0: "Invalid NaN comparison" in simplification, fuzz 390068)
    empty = any(getattr(s, "is_number", False) and int(s) == 0 for s in old_size + new_size)

    def _reindex(idx):
        if empty:
            return [sympy.Integer(0)] * len(old_size)
        ranges = {i: s for i, s in zip(idx, new_size) if isinstance(i, sympy.Symbol)}
        flat = sum((i * st for i, st, s in zip(idx, new_strides, new_size) if not same(s, 1)), sympy.Integer(0))
        out = []
        for k, (s, st) in enumerate(zip(old_size, old_strides)):
            if same(s, 1):
                out.append(sympy.Integer(0))
            elif k == 0:
                out.append(ir.simplify_index(ir.FloorDiv(flat, st), ranges))
            else:
                out.append(ir.simplify_index(ir.ModularIndexing(flat, st, s), ranges))
        return out

    return reindex


@register_lowering(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view.dtype)
def view(ctx, x, shape):
    if isinstance(shape, torch.dtype):
        if shape != x.get_dtype():
            raise NotLowerable("view as another dtype")
        return x
    new_size = ctx.size
    old_size = x.get_size()
    if len(new_size) == len(old_size) and all(same(a, b) for a, b in zip(new_size, old_size)):
        return x
    return _view(ctx, x, new_size, flat_reindex(old_size, new_size), lambda L: _strided_reshape(L, new_size))


@register_lowering(aten.as_strided.default)
def as_strided(ctx, x, size, stride, storage_offset=None):
    base, layout = layout_of(x)
    if not isinstance(base, ir.InputBuffer):
        # as_strided addresses the *storage*: for a computed tensor we can stand in a contiguous
        # buffer only when eager's tensor is exactly its storage (contiguous, offset 0, no slack)
        meta = ctx.input_meta(0)
        try:
            exact = (meta.is_contiguous() and meta.storage_offset() == 0
                     and meta.untyped_storage().nbytes() == meta.numel() * meta.element_size())
        except Exception:
            exact = False
        if not exact:
            # not even the ATen op is safe on our copy (its storage differs from eager's)
            from tracetorch.compiler.backend.lowering.graph import GraphFallback
            raise GraphFallback("as_strided of a computed tensor that is not its whole storage")
        # (an ATen call's output is a buffer of its own too: a convolution's weight gradient
        # given back its traced strides by aot/output_layouts.py)
        if not (isinstance(x, (ir.ComputedBuffer, ir.ExternKernel, ir.MultiOutput)) and x.layout.is_contiguous()):
            x = ctx.graph.realize(ir.Pointwise(x.get_size(), x.make_loader(), x.get_dtype(), x.get_device(),
                                               origins=ctx.origins))
        off = to_sympy(storage_offset) if storage_offset is not None else sympy.Integer(0)
        return ir.ReinterpretView(x, ir.Layout([to_sympy(s) for s in size], [to_sympy(s) for s in stride],
                                               x.get_dtype(), x.get_device(), off), origins=ctx.origins)
    # as_strided's storage_offset is absolute in the storage; IR offsets are relative to the
    # input's data_ptr(), which sits at the input's own (traced) storage offset
    base_off = getattr(base, "storage_offset", sympy.Integer(0))
    off = to_sympy(storage_offset) - base_off if storage_offset is not None else layout.offset
    return ir.ReinterpretView(base, ir.Layout([to_sympy(s) for s in size], [to_sympy(s) for s in stride],
                                              layout.dtype, layout.device, off), origins=ctx.origins)


@register_lowering(aten.split_with_sizes.default, aten.split.Tensor)
def split(ctx, x, sizes, dim=0):
    n = len(x.get_size())
    dim = _norm_dim(dim, n)
    vals = ctx.val
    outs, start = [], sympy.Integer(0)
    for v in vals:
        length = to_sympy(v.shape[dim])
        sub = _SubCtx(ctx, v)
        outs.append(slice_(sub, x, dim, start, start + length, 1))
        start = start + length
    return tuple(outs)


@register_lowering(aten.unbind.int)
def unbind(ctx, x, dim=0):
    return tuple(select(_SubCtx(ctx, v), x, dim, k) for k, v in enumerate(ctx.val))


class _SubCtx:
    """Ctx of one element of a multi-output view op."""

    def __init__(self, ctx, val):
        self.graph, self.node, self.val, self.origins = ctx.graph, ctx.node, val, ctx.origins

    @property
    def size(self):
        return [to_sympy(s) for s in self.val.shape]

    @property
    def dtype(self):
        return self.val.dtype

    @property
    def device(self):
        return self.val.device


@register_lowering(aten.diagonal.default)
def diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    n = len(x.get_size())
    d1, d2 = _norm_dim(dim1, n), _norm_dim(dim2, n)
    size = ctx.size
    rest = [d for d in range(n) if d not in (d1, d2)]
    o1, o2 = (0, offset) if offset >= 0 else (-offset, 0)

    def reindex(idx):
        old = [None] * n
        for d, i in zip(rest, idx[:-1]):
            old[d] = i
        old[d1] = idx[-1] + o1
        old[d2] = idx[-1] + o2
        return old

    def layout(L):
        return ir.Layout(size, [L.stride[d] for d in rest] + [L.stride[d1] + L.stride[d2]], L.dtype, L.device,
                         L.offset + o1 * L.stride[d1] + o2 * L.stride[d2])

    return _view(ctx, x, size, reindex, layout)


@register_lowering(aten.flip.default)
def flip(ctx, x, dims):
    n = len(x.get_size())
    dims = {_norm_dim(d, n) for d in dims}
    size = x.get_size()

    def reindex(idx):
        return [size[d] - 1 - i if d in dims else i for d, i in enumerate(idx)]

    # a negative stride is not a Layout we hand to ATen: flips stay lazy views
    return ir.View(x, size, reindex, origins=ctx.origins)
