"""Reductions -> ir.Reduction (realized at once: a reduction's value is read from its buffer).

Iteration: `ranges` are the kept dims, `reduction_ranges` the reduced dims, both in source order,
so a reduction over the last dims has the same (outer, reduction) split as the pointwise ops on
its input: that is what lets the scheduler fuse a whole softmax or layernorm into one kernel.
mean and var are sums; var reads the realized (shifted) mean in a second reduction (no welford),
or, over long rows and rows a split reduction cuts, takes one pass of shifted sums (_var_one_pass).
"""

from __future__ import annotations

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering import split_reduction
from tracetorch.compiler.backend.lowering.registry import (NotLowerable, aten, inlined_origins,
                                                            register_lowering, same, uses_triton)


def _dims(x, dim):
    n = len(x.get_size())
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(n))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return sorted({d + n if d < 0 else d for d in dims}) if n else []


def make_reduction(ctx, x, dims, reduction_type, *, out_dtype, src_dtype=None, keepdim=False, value_fn=None):
    """Realized reduction of x over dims; `value_fn(v, full_index)` transforms each loaded value."""
    red = reduction_node(ctx, x, dims, reduction_type, out_dtype=out_dtype, src_dtype=src_dtype,
                         value_fn=value_fn)
    if not isinstance(red, ir.Reduction):      # nothing reduced: the values themselves, unrealized
        return red
    plan = split_reduction.plan(red) if uses_triton(x.get_device()) else None
    if plan is not None:
        split_reduction.log.debug("split_reduction", **plan.describe(red))
        red = split_reduction.split(red, plan, lambda first: ctx.graph.realize(first, ctx.node))
    buf = ctx.graph.realize(red, ctx.node)
    if keepdim:
        return keepdim_view(ctx, buf, len(x.get_size()), dims)
    return buf


def reduction_node(ctx, x, dims, reduction_type, *, out_dtype, src_dtype=None, value_fn=None):
    """The unrealized reduction of x over dims (a Pointwise where nothing is reduced)."""
    size = x.get_size()
    n = len(size)
    kept = [d for d in range(n) if d not in dims]
    ranges = [size[d] for d in kept]
    rranges = [size[d] for d in dims]
    src_dtype = src_dtype or out_dtype
    loader = x.make_loader()
    in_dtype = x.get_dtype()

    def inner_fn(idx, ridx):
        full = [None] * n
        for d, i in zip(kept, idx):
            full[d] = i
        for d, r in zip(dims, ridx):
            full[d] = r
        v = loader(full)
        if value_fn is not None:
            v = value_fn(v, full)
        elif in_dtype != src_dtype:
            if in_dtype in (torch.float16, torch.bfloat16):   # rounded as eager's input is (registry.value_loader)
                v = ops.to_dtype(v, in_dtype)
            v = ops.to_dtype(v, src_dtype)
        return v

    if not rranges:
        # nothing to reduce (a 0-d input): the value itself, or position 0 for arg-reductions
        def point(idx):
            if reduction_type in ("argmax", "argmin"):
                return ops.constant(0, torch.int64)
            v = inner_fn(idx, [])
            return ops.to_dtype(v, out_dtype) if out_dtype != src_dtype else v
        return ir.Pointwise(ranges, point, out_dtype, x.get_device(), origins=ctx.origins | inlined_origins(x),
                            cost=x.op_count() + 1)
    return ir.Reduction(ranges, rranges, inner_fn, reduction_type, out_dtype, src_dtype, x.get_device(),
                        origins=ctx.origins | inlined_origins(x), cost=x.op_count() + 1)


def keepdim_view(ctx, buf, n, dims):
    kept = [d for d in range(n) if d not in dims]
    size = []
    stride = []
    L = buf.layout
    it = iter(zip(L.size, L.stride))
    for d in range(n):
        if d in dims:
            size.append(sympy.Integer(1))
            stride.append(sympy.Integer(1))
        else:
            s, st = next(it)
            size.append(s)
            stride.append(st)
    del kept
    return ir.ReinterpretView(buf, ir.Layout(size, stride, L.dtype, L.device, L.offset), origins=ctx.origins)


def _acc(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


@register_lowering(aten.sum.dim_IntList, aten.sum.default)
def sum_(ctx, x, dim=None, keepdim=False, dtype=None):
    out = ctx.dtype
    return make_reduction(ctx, x, _dims(x, dim), "sum", out_dtype=out, src_dtype=_acc(out), keepdim=keepdim)


@register_lowering(aten.prod.default, aten.prod.dim_int)
def prod(ctx, x, dim=None, keepdim=False, dtype=None):
    out = ctx.dtype
    return make_reduction(ctx, x, _dims(x, dim), "prod", out_dtype=out, src_dtype=_acc(out), keepdim=keepdim)


def _numel(x, dims):
    return ir.product([x.get_size()[d] for d in dims])


def _scalar(value, dtype):
    if isinstance(value, sympy.Basic) and not value.is_number:
        return ops.index_expr(value, dtype)
    return ops.constant(float(value) if dtype.is_floating_point else int(value), dtype)


@register_lowering(aten.mean.dim, aten.mean.default)
def mean(ctx, x, dim=None, keepdim=False, dtype=None):
    out = ctx.dtype
    if not out.is_floating_point:
        raise NotLowerable("mean of an integer tensor")
    dims = _dims(x, dim)
    acc = _acc(out)
    s = make_reduction(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc, keepdim=keepdim)
    n = _numel(x, dims)
    ld = s.make_loader()
    return ir.Pointwise(s.get_size(), lambda idx: ops.to_dtype(ops.truediv(ld(idx), _scalar(n, acc)), out)
                        if acc != out else ops.truediv(ld(idx), _scalar(n, acc)),
                        out, ctx.device, origins=ctx.origins, cost=2)


def _var_acc(dtype, device):
    """var/std accumulate as ATen does: in double on CPU (its CPU accumulate type for float is
    double; squaring 3e19 in float32 overflowed to inf where torch gives 3e38), in float on GPUs."""
    if device.type == "cpu" and dtype.is_floating_point and dtype != torch.float64:
        return torch.float64
    return _acc(dtype)


def _var(ctx, x, dims, correction, keepdim, out, sqrt=False, with_mean=False):
    """var (or std) over dims, and the mean for var_mean/std_mean (with_mean).

    Two passes over data shifted by each row's first element: sum(x - x0), then the squared
    deviations from that shifted mean. Equal values give exactly 0, as ATen's Welford does
    (unshifted, (x + x + x) / 3 is not x for x = 0.1 in float64, and log2 of the 1e-34 left over
    was -112 where eager has -inf: fuzz 391996); the shift also keeps the sums small."""
    acc = _var_acc(out, ctx.device)
    n = _numel(x, dims)
    size = x.get_size()
    denom = _var_denominator(n, correction)

    def to_acc(v):
        return ops.to_dtype(v, acc) if x.get_dtype() != acc else v

    if _one_pass(n) or _split_sum(ctx, x, dims, acc):
        return _var_one_pass(ctx, x, dims, n, denom, keepdim, out, acc, to_acc, sqrt, with_mean)

    def at_start(v, full):
        """v where every reduced index is 0, else 0: summed over the row, the row's first element."""
        start = None
        for d in dims:
            c = ops.eq(ops.index_expr(full[d], torch.int64), ops.constant(0, torch.int64))
            start = c if start is None else ops.logical_and(start, c)
        if start is None:          # nothing reduced (a 0-d input): the element itself
            return to_acc(v)
        return ops.where(start, to_acc(v), ops.constant(0.0, acc))

    # The row's first element, taken as a reduction of the row rather than loaded at [row, 0]: a
    # load at another point than the row's own would keep this reduction out of the kernel that
    # computes x (a transformer's residual sum, stored and normalized by one LayerNorm kernel
    # instead of a store kernel and a normalize kernel that reads it again). A row with no
    # element sums to 0 and reads nothing.
    first_total = make_reduction(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc, keepdim=True,
                                 value_fn=at_start)
    first_ld = first_total.make_loader()
    bsize = first_total.get_size()        # the row sums' sizes (reduced dims kept as 1)

    def row(full):
        """The point of x's element `full` in a row sum."""
        return [sympy.Integer(0) if same(b, 1) and not same(s, 1) else i for i, b, s in zip(full, bsize, size)]

    def first(full):
        return first_ld(row(full))

    shifted_total = make_reduction(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc, keepdim=True,
                                   value_fn=lambda v, full: ops.sub(to_acc(v), first(full)))
    shifted_ld = shifted_total.make_loader()

    def centered(v, full):
        m = shifted_ld(row(full))
        d = ops.sub(ops.sub(to_acc(v), first(full)), ops.truediv(m, _scalar(n, acc)))
        return ops.mul(d, d)

    sq = make_reduction(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc, keepdim=keepdim, value_fn=centered)
    sq_ld = sq.make_loader()

    def var_fn(idx):
        return _finish_var(sq_ld(idx), denom, acc, out, sqrt)

    var = ir.Pointwise(sq.get_size(), var_fn, out, ctx.device, origins=ctx.origins, cost=3)
    if not with_mean:
        return var, None
    # the mean itself from a plain sum: it needs no first element, which an empty row lacks
    total = make_reduction(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc, keepdim=True)
    mean_ld = total.make_loader()
    mean_fn = (lambda idx: ops.to_dtype(ops.truediv(mean_ld(idx), _scalar(n, acc)), out)) if acc != out else \
        (lambda idx: ops.truediv(mean_ld(idx), _scalar(n, acc)))
    return var, _row_stat(ctx, size, dims, keepdim, mean_fn, out, cost=2)


def _var_denominator(n, correction):
    corr = 1 if correction is None else correction
    if isinstance(corr, float) and corr.is_integer():
        corr = int(corr)          # (a float 1.0 made the size expression s0 - 1.0, which no printer takes)
    if not isinstance(corr, int):
        raise NotLowerable(f"non-integer correction {corr!r}")
    return n - corr


def _finish_var(sum_sq, denom, acc, out, sqrt):
    """sum of squared deviations -> var (or std) in the output dtype."""
    if isinstance(denom, sympy.Basic) and not denom.is_number:
        d = ops.maximum(ops.index_expr(denom, acc), ops.constant(0.0, acc))
    else:
        d = ops.constant(float(max(denom, 0)), acc)
    r = ops.truediv(sum_sq, d)
    if sqrt:      # std: the root in the accumulation type (a var of 1e76 has a float32 std)
        r = ops.sqrt(r)
    return ops.to_dtype(r, out) if out != acc else r


#: rows at least this long take var's one-pass form (split_reduction's floor: such rows are split
#: or looped, where every pass is one more read of the whole input and, split, two more launches)
_ONE_PASS_MIN = split_reduction._MIN_RNUMEL


def _one_pass(n):
    n = sympy.sympify(n)
    return n.is_number and int(n) >= _ONE_PASS_MIN


def _split_sum(ctx, x, dims, acc) -> bool:
    """Whether a sum of x over dims would be split (split_reduction.plan). Split, the sums never
    share a kernel with x's producer, which is what the two-pass form's in-row first element is
    for, and each of its passes is one more read of x and two more launches: ResNet-50's last
    stage (2048 channels over 32x7x7) took six launches per batch norm's statistics for two."""
    if not uses_triton(x.get_device()):
        return False
    probe = reduction_node(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc)
    return isinstance(probe, ir.Reduction) and split_reduction.plan(probe) is not None


def _var_one_pass(ctx, x, dims, n, denom, keepdim, out, acc, to_acc, sqrt, with_mean):
    """var (and mean) of long rows in one read of x: the sums of d = x - k and of d*d, where k is
    the row's first element, loaded directly. A training batch norm's statistics over N, H, W
    (ResNet-50: up to 401k elements per channel) took three reads of the activation and six
    launches in the two-pass form (the first element, the shifted mean, the squared deviations);
    inductor's Welford reduction takes one. var = (S2 - S1*S1/n) / (n - correction): shifted by a
    value of the row itself, the cancellation is bounded by how far k lies from the mean in
    standard deviations, not by the mean's size (the textbook sum-of-squares formula's failure),
    and equal values still give exactly 0 (every d is 0). The direct load of k keeps this kernel
    out of x's producer's; long and split rows have their own kernels anyway."""
    size = x.get_size()
    loader = x.make_loader()

    def shift(full):
        return to_acc(loader([sympy.Integer(0) if d in dims else i for d, i in enumerate(full)]))

    s1 = make_reduction(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc, keepdim=True,
                        value_fn=lambda v, full: ops.sub(to_acc(v), shift(full)))
    s2 = make_reduction(ctx, x, dims, "sum", out_dtype=acc, src_dtype=acc, keepdim=True,
                        value_fn=lambda v, full: _square(ops.sub(to_acc(v), shift(full))))
    s1_ld, s2_ld = s1.make_loader(), s2.make_loader()

    def var_fn(full):
        t = s1_ld(full)
        sum_sq = ops.sub(s2_ld(full), ops.truediv(ops.mul(t, t), _scalar(n, acc)))
        sum_sq = ops.maximum(sum_sq, ops.constant(0.0, acc))     # rounding may leave it below 0
        return _finish_var(sum_sq, denom, acc, out, sqrt)

    def mean_fn(full):
        m = ops.add(shift(full), ops.truediv(s1_ld(full), _scalar(n, acc)))
        return ops.to_dtype(m, out) if out != acc else m

    var = _row_stat(ctx, size, dims, keepdim, var_fn, out, cost=4)
    if not with_mean:
        return var, None
    return var, _row_stat(ctx, size, dims, keepdim, mean_fn, out, cost=4)


def _square(d):
    return ops.mul(d, d)


def _row_stat(ctx, size, dims, keepdim, fn, dtype, cost):
    """A pointwise node over the row statistics' sizes (reduced dims kept as 1 or dropped);
    `fn` takes a full index of x with the reduced dims at 0."""
    if keepdim:
        sizes = [sympy.Integer(1) if d in dims else s for d, s in enumerate(size)]
        return ir.Pointwise(sizes, fn, dtype, ctx.device, origins=ctx.origins, cost=cost)
    keep = [d for d in range(len(size)) if d not in dims]
    return ir.Pointwise([size[d] for d in keep], lambda idx: fn(_expand_idx(idx, keep, len(size))),
                        dtype, ctx.device, origins=ctx.origins, cost=cost)


def _expand_idx(idx, keep, n):
    full = [sympy.Integer(0)] * n
    for d, i in zip(keep, idx):
        full[d] = i
    return full


@register_lowering(aten.var.correction)
def var(ctx, x, dim=None, correction=None, keepdim=False):
    if not ctx.dtype.is_floating_point:
        raise NotLowerable("var of a non-float tensor")
    return _var(ctx, x, _dims(x, dim), correction, keepdim, ctx.dtype)[0]


@register_lowering(aten.var_mean.correction)
def var_mean(ctx, x, dim=None, correction=None, keepdim=False):
    out = ctx.val[0].dtype
    if not out.is_floating_point:
        raise NotLowerable("var_mean of a non-float tensor")
    return _var(ctx, x, _dims(x, dim), correction, keepdim, out, with_mean=True)


@register_lowering(aten.std.correction)
def std(ctx, x, dim=None, correction=None, keepdim=False):
    if not ctx.dtype.is_floating_point:
        raise NotLowerable("std of a non-float tensor")
    return _var(ctx, x, _dims(x, dim), correction, keepdim, ctx.dtype, sqrt=True)[0]


@register_lowering(aten.std_mean.correction)
def std_mean(ctx, x, dim=None, correction=None, keepdim=False):
    out = ctx.val[0].dtype
    if not out.is_floating_point:
        raise NotLowerable("std_mean of a non-float tensor")
    return _var(ctx, x, _dims(x, dim), correction, keepdim, out, sqrt=True, with_mean=True)


@register_lowering(aten.amax.default, aten.amin.default)
def amax(ctx, x, dim=(), keepdim=False):
    rt = "max" if ctx.node.target is aten.amax.default else "min"
    return make_reduction(ctx, x, _dims(x, dim), rt, out_dtype=ctx.dtype, keepdim=keepdim)


@register_lowering(aten.max.default, aten.min.default)
def max_all(ctx, x):
    rt = "max" if ctx.node.target is aten.max.default else "min"
    return make_reduction(ctx, x, _dims(x, None), rt, out_dtype=ctx.dtype)


def _arg_reduction(ctx, x, dim, keepdim, rt):
    if dim is None:
        dims = list(range(len(x.get_size())))
        if keepdim:
            raise NotLowerable("argmax(dim=None, keepdim=True)")
    else:
        dims = _dims(x, dim)
    return make_reduction(ctx, x, dims, rt, out_dtype=torch.int64, src_dtype=_acc(x.get_dtype()), keepdim=keepdim,
                          value_fn=(lambda v, full: ops.to_dtype(v, _acc(x.get_dtype())))
                          if _acc(x.get_dtype()) != x.get_dtype() else None)


@register_lowering(aten.argmax.default, aten.argmin.default)
def argmax(ctx, x, dim=None, keepdim=False):
    rt = "argmax" if ctx.node.target is aten.argmax.default else "argmin"
    return _arg_reduction(ctx, x, dim, keepdim, rt)


@register_lowering(aten.max.dim, aten.min.dim)
def max_dim(ctx, x, dim, keepdim=False):
    is_max = ctx.node.target is aten.max.dim
    values = make_reduction(ctx, x, _dims(x, dim), "max" if is_max else "min", out_dtype=x.get_dtype(),
                            keepdim=keepdim)
    idx = _arg_reduction(ctx, x, dim, keepdim, "argmax" if is_max else "argmin")
    return values, idx


@register_lowering(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim, aten.all.dims)
def any_all(ctx, x, dim=None, keepdim=False):
    rt = "any" if ctx.node.target.name().startswith("aten::any") else "all"
    in_dt = x.get_dtype()
    fn = None if in_dt == torch.bool else (lambda v, full: ops.to_dtype(v, torch.bool))
    buf = make_reduction(ctx, x, _dims(x, dim), rt, out_dtype=torch.bool, src_dtype=torch.bool, keepdim=keepdim,
                         value_fn=fn)
    if ctx.dtype != torch.bool:  # any/all of uint8 return uint8
        ld = buf.make_loader()
        return ir.Pointwise(buf.get_size(), lambda idx: ops.to_dtype(ld(idx), ctx.dtype), ctx.dtype, ctx.device,
                            origins=ctx.origins)
    return buf
