"""Windowed ops with small constant windows, unrolled into one Pointwise: avg_pool2d/3d,
adaptive avg/max pooling (static sizes), max_pool2d with its indices and its backward."""

from __future__ import annotations

import itertools
import math

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import NotLowerable, aten, register_lowering

MAX_WINDOW = 128   # larger windows would unroll into very long kernels: use ATen


def _iv(e):
    return ops.index_expr(e, torch.int64)


def _c(v):
    return ops.constant(int(v), torch.int64)


def _tuple(v, nd, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    if isinstance(v, int):
        return (v,) * nd
    return tuple(v) if len(v) == nd else (v[0],) * nd


def _inside(pos, sizes):
    """0 <= pos[d] < sizes[d] for every d, as one boolean value."""
    inside = None
    for q, size in zip(pos, sizes):
        c = ops.logical_and(ops.ge(_iv(q), _c(0)), ops.lt(_iv(q), _iv(size)))
        inside = c if inside is None else ops.logical_and(inside, c)
    return inside


def _acc(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _avg_pool(ctx, x, nd, kernel_size, stride, padding, count_include_pad, divisor_override):
    """avg_pool{nd}d over the last nd dims: the window unrolled, padding masked, ATen's divisor."""
    ks = _tuple(kernel_size, nd)
    st = _tuple(stride, nd, ks)
    pad = _tuple(padding, nd, (0,) * nd)
    window = list(itertools.product(*[range(k) for k in ks]))
    if len(window) > MAX_WINDOW:
        raise NotLowerable(f"window of {len(window)} elements")
    spatial = x.get_size()[-nd:]
    out_dtype = ctx.dtype
    acc = _acc(out_dtype)
    loader = x.make_loader()

    def fn(idx):
        lead, out = idx[:-nd], idx[-nd:]
        total = None
        for offs in window:
            pos = [o * s - p + a for o, s, p, a in zip(out, st, pad, offs)]
            inside = _inside(pos, spatial)

            def body(pos=pos):
                v = loader([*lead, *pos])
                return ops.to_dtype(v, acc) if x.get_dtype() != acc else v
            v = ops.masked(inside, body, 0.0)
            total = v if total is None else ops.add(total, v)
        if divisor_override:
            div = ops.constant(float(divisor_override), acc)
        else:
            n = None
            for o, s, p, k, size in zip(out, st, pad, ks, spatial):
                lo = _iv(o * s - p)
                hi = ops.minimum(ops.add(lo, _c(k)), ops.add(_iv(size), _c(p)))
                if not count_include_pad:
                    lo, hi = ops.maximum(lo, _c(0)), ops.minimum(hi, _iv(size))
                extent = ops.sub(hi, lo)
                n = extent if n is None else ops.mul(n, extent)
            div = ops.to_dtype(n, acc)
        out_v = ops.truediv(total, div)
        return ops.to_dtype(out_v, out_dtype) if acc != out_dtype else out_v

    return ir.Pointwise(ctx.size, fn, out_dtype, ctx.device, origins=ctx.origins, cost=len(window) * 4)


@register_lowering(aten.avg_pool2d.default)
def avg_pool2d(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    # ceil_mode only changes the output size, which ctx.size already has
    return _avg_pool(ctx, x, 2, kernel_size, stride, padding, count_include_pad, divisor_override)


@register_lowering(aten.avg_pool3d.default)
def avg_pool3d(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(ctx, x, 3, kernel_size, stride, padding, count_include_pad, divisor_override)


def _adaptive_windows(x, out_size):
    """Per spatial dim: (in size, out size, largest window) for static sizes; ATen's windows are
    [floor(o * I / O), ceil((o + 1) * I / O))."""
    nd = len(out_size)
    dims = []
    for i, o in zip(x.get_size()[-nd:], out_size):
        if not (getattr(i, "is_number", False) and isinstance(o, int)):
            raise NotLowerable("adaptive pooling with symbolic sizes")
        i = int(i)
        if o <= 0:
            raise NotLowerable("empty adaptive pooling output")
        k = max(-(-((j + 1) * i) // o) - (j * i) // o for j in range(o))
        dims.append((i, o, k))
    if math.prod(k for _, _, k in dims) > MAX_WINDOW:
        raise NotLowerable("adaptive pooling window too large")
    return dims


def _adaptive_positions(out, dims):
    """The unrolled window: for each offset tuple, the input positions and their validity."""
    starts = [ir.FloorDiv(o * i, n) for o, (i, n, _) in zip(out, dims)]
    ends = [ir.FloorDiv((o + 1) * i + n - 1, n) for o, (i, n, _) in zip(out, dims)]
    for offs in itertools.product(*[range(k) for _, _, k in dims]):
        pos = [s + a for s, a in zip(starts, offs)]
        valid = None
        for q, e, a in zip(pos, ends, offs):
            if a == 0:
                continue                    # every window has at least one element
            c = ops.lt(_iv(q), _iv(e))
            valid = c if valid is None else ops.logical_and(valid, c)
        yield pos, valid, starts


@register_lowering(aten._adaptive_avg_pool3d.default, aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool(ctx, x, output_size):
    nd = len(output_size)
    dims = _adaptive_windows(x, output_size)
    out_dtype = ctx.dtype
    acc = _acc(out_dtype)
    loader = x.make_loader()

    def fn(idx):
        lead, out = idx[:-nd], idx[-nd:]
        total = None
        count = None
        for pos, valid, _ in _adaptive_positions(out, dims):
            def body(pos=pos):
                v = loader([*lead, *pos])
                return ops.to_dtype(v, acc) if x.get_dtype() != acc else v
            v = body() if valid is None else ops.masked(valid, body, 0.0)
            total = v if total is None else ops.add(total, v)
        for o, (i, n, _) in zip(out, dims):
            extent = _iv(ir.FloorDiv((o + 1) * i + n - 1, n) - ir.FloorDiv(o * i, n))
            count = extent if count is None else ops.mul(count, extent)
        r = ops.truediv(total, ops.to_dtype(count, acc))
        return ops.to_dtype(r, out_dtype) if acc != out_dtype else r

    return ir.Pointwise(ctx.size, fn, out_dtype, ctx.device, origins=ctx.origins, cost=4 * math.prod(
        k for _, _, k in dims))


def _scan_max(candidates):
    """(max, flat index) over (value, flat index, valid or None) candidates in ATen's order: the
    first valid one is taken, a later one replaces it when greater or NaN (first maximum wins a
    tie; the last NaN wins)."""
    best = where_ = have = None
    for v, flat, valid in candidates:
        if best is None:
            best, where_ = v, flat
            have = valid
            continue
        take = ops.logical_or(ops.gt(v, best), ops.isnan(v))
        if have is not None:           # nothing valid seen yet: the first valid value is taken
            take = ops.logical_or(take, ops.logical_not(have))
        if valid is not None:
            take = ops.logical_and(valid, take)
            have = None if have is None else ops.logical_or(have, valid)
        best, where_ = ops.where(take, v, best), ops.where(take, flat, where_)
    return best, where_


def _values_and_indices(ctx, scan, dtype, cost):
    """A max pool's two results as Pointwise nodes: scan(idx) -> (max, flat index)."""
    return (ir.Pointwise(ctx.size, lambda idx: scan(idx)[0], dtype, ctx.device, origins=ctx.origins, cost=cost),
            ir.Pointwise(ctx.size, lambda idx: scan(idx)[1], torch.int64, ctx.device, origins=ctx.origins,
                         cost=cost))


@register_lowering(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def adaptive_max_pool(ctx, x, output_size):
    """(values, flat spatial indices), scanning each window in ATen's order: a value replaces the
    running max when it is greater or NaN (first max wins ties; the last NaN wins)."""
    nd = len(output_size)
    dims = _adaptive_windows(x, output_size)
    dtype = x.get_dtype()
    if not dtype.is_floating_point:
        raise NotLowerable("integer adaptive max pool")
    loader = x.make_loader()
    strides = ir.contiguous_strides([i for i, _, _ in dims])

    def scan(idx):
        lead, out = idx[:-nd], idx[-nd:]
        candidates = []
        for pos, valid, _ in _adaptive_positions(out, dims):     # the first is always valid
            v = loader([*lead, *pos]) if valid is None else ops.masked(valid, lambda pos=pos: loader([*lead, *pos]),
                                                                        float("-inf"))
            candidates.append((v, _iv(sum((p * s for p, s in zip(pos, strides)), sympy.Integer(0))), valid))
        return _scan_max(candidates)

    return _values_and_indices(ctx, scan, dtype, cost=4 * math.prod(k for _, _, k in dims))


@register_lowering(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """(values, flat input indices h * W + w), each window unrolled and scanned in ATen's order,
    positions in the padding (or past the edge, ceil_mode) skipped. Lowered whole rather than
    decomposed (an index gather, a contiguous clone of the windows, a max over them) so that its
    outputs take eager's layout: channels_last after a channels_last convolution. The
    decomposition's contiguous result made ResNet-50's stem write its pooled values, indices
    and their gradients NCHW between channels_last tensors, so the max-pool backward kernel read
    or wrote one of them across channels at every element."""
    ks = _tuple(kernel_size, 2)
    st = _tuple(stride, 2, ks)
    pad = _tuple(padding, 2, (0, 0))
    dil = _tuple(dilation, 2, (1, 1))
    if ks[0] * ks[1] > MAX_WINDOW:
        raise NotLowerable(f"window of {ks[0] * ks[1]} elements")
    dtype = x.get_dtype()
    if not dtype.is_floating_point:
        raise NotLowerable("integer max pool")
    in_size = x.get_size()[-2:]
    width = in_size[1]
    edges = pad != (0, 0) or ceil_mode        # else every window lies inside the input
    loader = x.make_loader()

    def scan(idx):
        lead, (oh, ow) = idx[:-2], idx[-2:]
        candidates = []
        for i, j in itertools.product(range(ks[0]), range(ks[1])):
            pos = [oh * st[0] - pad[0] + i * dil[0], ow * st[1] - pad[1] + j * dil[1]]
            flat = _iv(pos[0] * width + pos[1])
            if not edges:
                candidates.append((loader([*lead, *pos]), flat, None))
                continue
            valid = _inside(pos, in_size)
            v = ops.masked(valid, lambda pos=pos: loader([*lead, *pos]), float("-inf"))
            candidates.append((v, flat, valid))
        return _scan_max(candidates)

    return _values_and_indices(ctx, scan, dtype, cost=4 * ks[0] * ks[1])


@register_lowering(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(ctx, grad_output, x, kernel_size, stride=(), padding=0, dilation=1,
                                     ceil_mode=False, indices=None):
    """The gradient of max_pool2d as a gather: each input element sums the output gradients of
    the windows that picked it (their saved flat index h * W + w is its own). Only the windows
    that can hold an input row are visited, (k - 1) // s + 1 per spatial dim (four for ResNet's
    3x3 / stride-2 stem pool), so this is one pointwise kernel that fuses with the ReLU backward
    before it; ATen's kernel scatters with atomics into a zeroed buffer (one H100 launch of 0.24 ms
    per ResNet-50 training step, where inductor generates a kernel like this one)."""
    ks = _tuple(kernel_size, 2)
    st = _tuple(stride, 2, ks)
    pad = _tuple(padding, 2, (0, 0))
    if _tuple(dilation, 2, (1, 1)) != (1, 1):
        raise NotLowerable("dilated max_pool2d backward")
    reach = [(k - 1) // s + 1 for k, s in zip(ks, st)]
    if math.prod(reach) > MAX_WINDOW:
        raise NotLowerable(f"{math.prod(reach)} windows per element")
    out_size = grad_output.get_size()[-2:]
    width = x.get_size()[-1]
    out_dtype = ctx.dtype
    acc = _acc(out_dtype)
    grad, picked = grad_output.make_loader(), indices.make_loader()

    def fn(idx):
        lead, (h, w) = idx[:-2], idx[-2:]
        me = _iv(h * width + w)
        total = None
        for a, b in itertools.product(range(reach[0]), range(reach[1])):
            pos = [ir.FloorDiv(h + pad[0], st[0]) - a, ir.FloorDiv(w + pad[1], st[1]) - b]
            inside = _inside(pos, out_size)

            def body(pos=pos):
                g = grad([*lead, *pos])
                g = ops.to_dtype(g, acc) if grad_output.get_dtype() != acc else g
                return ops.where(ops.eq(picked([*lead, *pos]), me), g, ops.constant(0.0, acc))
            v = ops.masked(inside, body, 0.0)
            total = v if total is None else ops.add(total, v)
        return ops.to_dtype(total, out_dtype) if acc != out_dtype else total

    return ir.Pointwise(ctx.size, fn, out_dtype, ctx.device, origins=ctx.origins, cost=6 * math.prod(reach))
