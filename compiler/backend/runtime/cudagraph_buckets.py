"""Size buckets for CUDA graphs of dynamic-shape inference graphs.

A graph compiled with a symbolic size (say the batch, `s0`) is recorded per concrete size: a
model served at batch 3, 5, 6, 7 would warm up and record four graphs, and turn graphs off past
`backend.cudagraph_max_recordings`. With buckets, a call at batch 5 runs the recording for batch
8: its inputs are padded to 8 rows, and its outputs cut back to 5. That is only right when no
real row's result reads a padded row, so padding a symbol is allowed only where the graph proves
it, node by node (`plan`):

- Every op either keeps positions along a symbolic axis (pointwise ops, permutes, broadcasts,
  matrix rows, a batch-norm in eval mode, attention over its batch, heads and queries), or it
  *mixes* some axes (a reduction over them, a matrix product's contraction, a convolution's
  channels and pixels, a concatenation, a slice, a gather). Padding a symbol is refused when any
  mixed axis's size contains it, and for ops not in the tables all their axes count as mixed.
- A view keeps the padded rows at the end of an axis only when the symbolic axis is the outer one
  of each group of merged or split axes ((s0, 16) -> (s0*16) yes, (16, s0) -> (16*s0) no).
- A size used as a value (arange(s0), a mean that divides by s0) is refused.
- Inputs whose size has the symbol must hold it as a whole axis, contiguous, not written by the
  graph; outputs are cut back along each axis whose size has it.

Padded rows repeat the last real row (never stale memory: an index tensor's padded rows hold
real indices). The bucket must also satisfy every guard of the graph's shape environment that
mentions the symbol; a call whose bucket fails one is recorded at its own size.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch
from torch._prims_common import make_contiguous_strides_for

from tracetorch.compiler import config
from tracetorch.compiler.aot.sizes import size_expr

aten = torch.ops.aten


def bucket_size(n: int) -> int:
    """The bucket of size n: the next power of two up to 32, then four buckets per octave
    (40, 48, 56, 64, 80, ...), so padding costs at most a quarter more rows."""
    if n <= 32:
        return 1 << max(0, (n - 1).bit_length())
    step = 1 << ((n - 1).bit_length() - 3)
    return -(-n // step) * step


# -- which axes an op mixes ---------------------------------------------------------------------
ALL = "all"          # every axis of every tensor argument


def _dims(dim, rank: int) -> list[int]:
    """The axes a `dim` argument names; every axis for None, [] or anything not ints (max.other's
    second tensor sits where max.dim's dim does)."""
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    if dim is None or not dims or not all(isinstance(d, int) for d in dims) or not rank:
        return list(range(rank))
    return [d % rank for d in dims]


def _rank(arg) -> int:
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return val.dim() if isinstance(val, torch.Tensor) else 0


def _arg(node, i, name, default=None):
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _reduction(node):            # x, dim, ...
    x = node.args[0]
    return {0: _dims(_arg(node, 1, "dim"), _rank(x))}


def _softmax(node):              # x, dim, half_to_float
    return {0: _dims(node.args[1], _rank(node.args[0]))}


def _softmax_backward(node):     # grad, output, dim, dtype
    dims = _dims(node.args[2], _rank(node.args[0]))
    return {0: dims, 1: dims}


def _convolution(node):          # input, weight, bias, ...: channels and pixels are mixed
    return {0: list(range(1, _rank(node.args[0]))), 1: ALL, 2: ALL}


def _spatial(node):              # pooling, upsampling: pixels are mixed, batch and channels kept
    return {0: list(range(2, _rank(node.args[0])))}


def _layer_norm(node):           # x, normalized_shape, weight, bias, eps
    rank = _rank(node.args[0])
    return {0: list(range(rank - len(node.args[1]), rank)), 2: ALL, 3: ALL}


def _batch_norm_eval(node):      # x, weight, bias, running_mean, running_var, ...
    return {1: ALL, 2: ALL, 3: ALL, 4: ALL}


def _batch_norm(node):           # training=True mixes the batch and the pixels
    # (the no_stats overload has no running statistics: its flag comes earlier)
    training = next((a for a in node.args[3:] if isinstance(a, bool)), True)
    if not training:
        return _batch_norm_eval(node)
    return {0: [0] + list(range(2, _rank(node.args[0]))), 1: ALL, 2: ALL, 3: ALL, 4: ALL}


def _attention(node):            # q [b, h, Lq, E], k [b, h, Lk, E], v [b, h, Lk, Ev], mask [.., Lq, Lk]
    mixed = {0: [3], 1: [2, 3], 2: [2, 3]}
    mask = _arg(node, 3, "attn_mask")
    if isinstance(mask, torch.fx.Node):
        mixed[3] = [_rank(mask) - 1]
    return mixed


def _at_dim(dim_index: int, default=0):
    """Ops that move data along one axis (cat, slice, select, gather, ...): it is mixed, in every
    tensor argument (cat's list included)."""
    def mixed(node):
        dim = _arg(node, dim_index, "dim", default)
        return {"each": dim}
    return mixed


def _slice(node):                # x, dim, start, end, step: a whole axis from 0 keeps its rows
    x, dim = node.args[0], _arg(node, 1, "dim", 0)
    start, end, step = _arg(node, 2, "start"), _arg(node, 3, "end"), _arg(node, 4, "step", 1)
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if isinstance(val, torch.Tensor) and start in (0, None) and step == 1:
        size = _expr(val.shape[dim])
        if end is None or (isinstance(end, int) and end >= 2**62) or \
                (isinstance(end, torch.fx.Node) and _expr(end.meta.get("val")) == size):
            return {}
    return {"each": dim}


def _embedding(node):            # weight, indices: the table is read anywhere, indices are kept
    return {0: ALL}


def _pad(node):                  # x, pad (last axis first, two per axis)
    rank = _rank(node.args[0])
    return {0: [rank - 1 - i for i in range(len(node.args[1]) // 2)]}


#: op packet -> the input axes it mixes ({arg position: [axes] or ALL}, or {"each": dim})
MIXES = {
    **{p: _reduction for p in (aten.sum, aten.mean, aten.amax, aten.amin, aten.prod, aten.var,
                               aten.std, aten.var_mean, aten.std_mean, aten.argmax, aten.argmin,
                               aten.any, aten.all, aten.logsumexp, aten.max, aten.min, aten.cumsum,
                               aten.cumprod)},
    aten._softmax: _softmax, aten._log_softmax: _softmax, aten.softmax: _softmax,
    aten.log_softmax: _softmax,
    aten._softmax_backward_data: _softmax_backward, aten._log_softmax_backward_data: _softmax_backward,
    aten.mm: lambda n: {0: [1], 1: [0]},
    aten.addmm: lambda n: {0: ALL if _rank(n.args[0]) > 1 else [], 1: [1], 2: [0]},
    aten.bmm: lambda n: {0: [2], 1: [1]},
    aten.baddbmm: lambda n: {0: ALL, 1: [2], 2: [1]},
    aten.convolution: _convolution,
    **{p: _spatial for p in (aten.max_pool1d, aten.max_pool2d, aten.max_pool3d, aten.max_pool2d_with_indices,
                             aten.max_pool3d_with_indices, aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d,
                             aten.adaptive_avg_pool1d, aten.adaptive_avg_pool2d, aten.adaptive_avg_pool3d,
                             aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d, aten.adaptive_max_pool2d,
                             aten.upsample_nearest2d, aten.upsample_bilinear2d, aten._upsample_nearest_exact2d,
                             aten.upsample_bicubic2d, aten.reflection_pad2d, aten.replication_pad2d)},
    aten.native_layer_norm: _layer_norm,
    aten._native_batch_norm_legit_no_training: _batch_norm_eval,
    aten._native_batch_norm_legit: _batch_norm, aten.native_batch_norm: _batch_norm,
    aten._scaled_dot_product_flash_attention: _attention,
    aten._scaled_dot_product_efficient_attention: _attention,
    aten._scaled_dot_product_cudnn_attention: _attention,
    aten._scaled_dot_product_flash_attention_for_cpu: _attention,
    aten.scaled_dot_product_attention: _attention,
    torch.ops.tracetorch.sdpa: _attention,
    aten.cat: _at_dim(1), aten.slice: _slice, aten.select: _at_dim(1),
    aten.gather: _at_dim(1), aten.index_select: _at_dim(1), aten.narrow: _at_dim(1),
    aten.split: _at_dim(2), aten.split_with_sizes: _at_dim(2), aten.flip: lambda n: {0: n.args[1]},
    aten.roll: ALL, aten.embedding: _embedding,
    aten.constant_pad_nd: _pad,
}

#: ops that keep every position (besides pointwise-tagged ops): layout and dtype changes, views
#: that move whole axes, factories of constants
KEEPS = {aten.clone, aten._to_copy, aten.alias, aten.detach, aten.permute, aten.transpose, aten.t,
         aten.unsqueeze, aten.squeeze, aten.expand, aten.lift_fresh_copy, aten.empty_like,
         aten.zeros_like, aten.ones_like, aten.full_like, aten.contiguous, aten.stack,
         aten.full, aten.zeros, aten.ones, aten.empty, aten.empty_strided, aten.scalar_tensor,
         aten.new_zeros, aten.new_ones, aten.new_empty, aten.new_full, aten.where,
         aten.masked_fill, aten.fill, aten.copy, aten._unsafe_view, aten.view, aten.reshape}

#: ops whose size arguments are shapes, not values (any other op reading a size reads a value)
SHAPE_ARGS = {aten.view, aten._unsafe_view, aten.reshape, aten.expand, aten.full, aten.zeros,
              aten.ones, aten.empty, aten.empty_strided, aten.new_zeros, aten.new_ones,
              aten.new_empty, aten.new_full, aten.slice}
VIEWS = {aten.view, aten._unsafe_view, aten.reshape}
#: ops whose later tensor arguments are positions into their first (index's own rule: Iotas)
INDEX_READS = {aten.gather, aten.index_select, aten.embedding, aten.scatter, aten.scatter_add,
               aten.index_put, aten.index_add, aten.take}
SIZE_READS = {aten.sym_size, aten.sym_numel, aten.sym_stride, aten.sym_storage_offset}


STATIC = "no input axis is a symbolic size"


# -- the plan -----------------------------------------------------------------------------------
@dataclass
class Plan:
    """What padding `symbol` means for one graph: which inputs carry it and on which axis, the
    size arguments that are it, and how to cut the outputs back."""
    symbol: sympy.Symbol
    inputs: dict[int, int]                    # input slot -> its axis of size `symbol`
    int_slots: list[int]                      # int inputs whose value is `symbol`
    outputs: dict[int, dict[int, sympy.Expr]]  # output index -> {axis: its size}
    others: dict[sympy.Symbol, tuple[int, int]] = field(default_factory=dict)   # where other symbols are read
    guards: list[sympy.Expr] = field(default_factory=list)   # shape guards that mention the symbol
    low: int = 0
    high: float = float("inf")
    # per-call sympy work done once per size: (bucket, other symbols' values) -> the guards hold;
    # (size, bucket) -> [(output, axis, its size at the bucket, at the call's size)]
    _guards_hold: dict = field(default_factory=dict, repr=False, compare=False)
    _cuts: dict = field(default_factory=dict, repr=False, compare=False)

    def fit(self, args) -> tuple[int, int] | None:
        """(real size, bucket) for this call, or None where the bucket is no bigger or breaks a
        guard (the call is then recorded at its own size)."""
        slot, axis = next(iter(self.inputs.items()))
        a = args[slot]
        if not isinstance(a, torch.Tensor):
            return None
        n = a.shape[axis]
        b = bucket_size(n)
        if b == n or not (self.low <= b <= self.high):
            return None
        if any(not args[i].is_contiguous() or args[i].shape[ax] != n for i, ax in self.inputs.items()):
            return None
        key = (b,) + tuple(args[i].shape[ax] for i, ax in self.others.values())
        hold = self._guards_hold.get(key)
        if hold is None:
            values = {self.symbol: sympy.Integer(b)}
            values.update((sym, sympy.Integer(v)) for sym, v in zip(self.others, key[1:]))
            hold = self._guards_hold[key] = all(g.xreplace(values) is sympy.true for g in self.guards)
        return (n, b) if hold else None

    def signature(self, sig: tuple, args, b: int) -> tuple:
        """`sig`, the call's signature, as its padded arguments' (contiguous at the bucket's size)."""
        sig = list(sig)
        for i, axis in self.inputs.items():
            shape = _resized(args[i].shape, axis, b)
            sig[i] = (tuple(shape), make_contiguous_strides_for(shape), args[i].dtype, args[i].device)
        for i in self.int_slots:
            sig[i] = (int, b)
        return tuple(sig)

    def pad(self, args, n: int, b: int) -> list:
        """The call's arguments at the bucket's size: padded rows repeat the last real row."""
        out = list(args)
        for i, axis in self.inputs.items():
            out[i] = pad_into(torch.empty(_resized(args[i].shape, axis, b), dtype=args[i].dtype,
                                          device=args[i].device), args[i], axis)
        for i in self.int_slots:
            out[i] = b
        return out

    def cut(self, outputs: list, n: int, b: int) -> list:
        """The outputs at the call's own size (views of the bucket's outputs). Raises BucketError
        where an output is not at the bucket's size (the runner then drops its buckets)."""
        cuts = self._cuts.get((n, b))
        if cuts is None:
            at = lambda size, v: int(size.xreplace({self.symbol: sympy.Integer(v)}))  # noqa: E731
            cuts = self._cuts[(n, b)] = [(k, axis, at(size, b), at(size, n))
                                         for k, axes in self.outputs.items() for axis, size in axes.items()]
        result = list(outputs)
        for k, axis, want, keep in cuts:
            t = result[k]
            if not isinstance(t, torch.Tensor) or t.dim() <= axis or t.shape[axis] != want:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise BucketError(f"output {k} is {got}, not {want} along axis {axis} at bucket {b}")
            result[k] = t.narrow(axis, 0, keep)
        return result


def _resized(shape, axis, b):
    shape = list(shape)
    shape[axis] = b
    return shape


class BucketError(RuntimeError):
    """A bucketed call found memory or outputs not at the bucket's size."""


def pad_into(dst: torch.Tensor, src: torch.Tensor, axis: int) -> torch.Tensor:
    """dst's first rows along `axis` <- src; the rest <- src's last row."""
    n, b = src.shape[axis], dst.shape[axis]
    if b < n or dst.dim() != src.dim():
        raise BucketError(f"padding {tuple(src.shape)} along axis {axis} into {tuple(dst.shape)}")
    dst.narrow(axis, 0, n).copy_(src)
    if b > n:
        dst.narrow(axis, n, b - n).copy_(src.narrow(axis, n - 1, 1).expand(_resized(src.shape, axis, b - n)))
    return dst


def plan(gm: torch.fx.GraphModule, mutated: list[int]) -> tuple[Plan | None, str]:
    """The bucket plan for a graph's first symbol that padding provably leaves unseen, or None
    with the reason (logged as `cudagraph_buckets_refused`). `mutated`: the inputs the graph writes."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    candidates: dict[sympy.Symbol, dict[int, int]] = {}
    int_slots: dict[sympy.Symbol, list[int]] = {}
    shape_env, refused = None, {}
    for slot, ph in enumerate(placeholders):
        val = ph.meta.get("val")
        if isinstance(val, torch.SymInt):
            expr = val.node.expr
            if isinstance(expr, sympy.Symbol):
                int_slots.setdefault(expr, []).append(slot)
            else:                   # a size the call passes as an int that padding would not change
                for s in getattr(expr, "free_symbols", ()):
                    refused.setdefault(s, f"input {ph.name} is the size {expr}")
            continue
        if not isinstance(val, torch.Tensor):
            continue
        for axis, size in enumerate(val.shape):
            if not isinstance(size, torch.SymInt):
                continue
            shape_env = size.node.shape_env
            expr = size.node.expr
            if not isinstance(expr, sympy.Symbol):
                for s in expr.free_symbols:
                    refused.setdefault(s, f"input {ph.name} has size {expr} on axis {axis}")
                continue
            if slot in mutated:
                refused.setdefault(expr, f"the graph writes input {ph.name}")
            elif slot in candidates.get(expr, {}):
                refused.setdefault(expr, f"input {ph.name} has it on two axes")
            elif not _contiguous_meta(val):
                refused.setdefault(expr, f"input {ph.name} is not contiguous")
            candidates.setdefault(expr, {})[slot] = axis
    if not candidates:
        return None, STATIC
    if not config.backend.cudagraph_buckets:
        return None, "backend.cudagraph_buckets is off (TRACE_BACKEND_CUDAGRAPH_BUCKETS=1 turns it back on)"
    iotas = Iotas(gm)
    for node in gm.graph.nodes:
        for sym, why in _refusals(node, iotas):
            refused.setdefault(sym, why)
    outputs: dict[int, dict[int, sympy.Expr]] = {}
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    for k, o in enumerate(out_node.args[0]):
        val = o.meta.get("val") if isinstance(o, torch.fx.Node) else o
        if isinstance(val, torch.SymInt):
            for s in val.node.expr.free_symbols:
                refused.setdefault(s, f"output {k} is a size")
        elif isinstance(val, torch.Tensor):
            for axis, size in enumerate(val.shape):
                expr = _expr(size)
                if expr.free_symbols:
                    outputs.setdefault(k, {})[axis] = expr
    reasons = []
    for sym, inputs in candidates.items():
        if sym in refused:
            reasons.append(f"{sym}: {refused[sym]}")
            continue
        mixed_outputs = {k: {a: e for a, e in axes.items() if sym in e.free_symbols} for k, axes in outputs.items()}
        bad = [f"output {k} has size {e}" for k, axes in mixed_outputs.items() for e in axes.values()
               if len(e.free_symbols) > 1 or not _grows(e, sym)]
        if bad:
            reasons.append(f"{sym}: {bad[0]}")
            continue
        found = _guards(shape_env, sym, candidates)
        if isinstance(found, str):
            reasons.append(f"{sym}: {found}")
            continue
        guards, others, low, high = found
        return Plan(sym, inputs, int_slots.get(sym, []), {k: v for k, v in mixed_outputs.items() if v},
                    others, guards, low, high), ""
    return None, "; ".join(reasons)


def _grows(expr: sympy.Expr, sym: sympy.Symbol) -> bool:
    """A size c * sym (c a positive integer): the real rows are the first c * n."""
    c = sympy.simplify(expr / sym)
    return c.is_Integer and c > 0


def _contiguous_meta(val: torch.Tensor) -> bool:
    """Row-major strides, judged on the symbolic expressions (comparing SymInts would add guards)."""
    expected = sympy.Integer(1)
    for size, stride in reversed(list(zip(val.shape, val.stride()))):
        size = _expr(size)
        if size != 1 and sympy.simplify(_expr(stride) - expected) != 0:
            return False
        expected = expected * size
    return True


def _expr(x):
    """A size as a sympy expression (sizes.size_expr: read without guarding); anything else as it is."""
    return size_expr(x) if isinstance(x, (int, torch.SymInt)) else x


def _guards(shape_env, sym, candidates):
    """The shape guards that mention sym, where their other symbols are read, and sym's range; or
    why the bucket cannot be checked."""
    if shape_env is None:
        return "no shape environment"
    exprs = [g.expr for g in getattr(shape_env, "guards", [])]
    for asserts in getattr(shape_env, "deferred_runtime_asserts", {}).values():
        exprs += [a.expr for a in asserts]
    exprs = [e for e in exprs if sym in getattr(e, "free_symbols", ())]
    others = {}
    for e in exprs:
        for s in e.free_symbols - {sym}:
            where = candidates.get(s)
            if not where:
                return f"guard {e} has {s}, which no input holds as an axis"
            others[s] = next(iter(where.items()))
    rng = shape_env.var_to_range.get(sym)
    low = _bound(rng.lower if rng is not None else None, 0)
    high = _bound(rng.upper if rng is not None else None, float("inf"))
    return exprs, others, low, high


def _bound(value, default):
    """A range's end as an int (torch's int_oo calls itself finite, so ask for a plain Integer)."""
    return int(value) if isinstance(value, sympy.Integer) and type(value).__module__.startswith("sympy") \
        else default


class Iotas:
    """`arange(s)` over a symbolic size, which a mask builder uses to index rows by their own
    position (transformers' masks: `mask[arange(batch), ...]`). Padded, arange(bucket) holds each
    row's own index, so `x[arange(s)]` along an axis of size s reads row i at row i: it keeps
    positions. `pure`: arange(0, s) and its unsqueezes, broadcasts and whole slices (node ->
    symbol); `derived`: anything computed from one (its padded rows hold indices past the real
    size, which must not index an axis of another size)."""

    KEEP = {aten.unsqueeze, aten.expand, aten.alias, aten.clone, aten._to_copy, aten.view,
            aten._unsafe_view, aten.reshape}

    def __init__(self, gm: torch.fx.GraphModule):
        self.pure: dict[torch.fx.Node, sympy.Symbol] = {}
        self.derived: dict[torch.fx.Node, sympy.Symbol] = {}
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            packet = getattr(node.target, "overloadpacket", None)
            sym = _iota_symbol(node) if packet is aten.arange else None
            first = node.args[0] if node.args else None
            if sym is not None:
                self.pure[node] = sym
            elif first in self.pure and (packet in self.KEEP or (packet is aten.slice and _slice(node) == {})):
                self.pure[node] = self.pure[first]
            else:
                for a in _flat(node.args):
                    if a in self.pure or a in self.derived:
                        self.derived[node] = self.pure.get(a) or self.derived[a]
                        break


def _iota_symbol(node) -> sympy.Symbol | None:
    """s for arange(s) / arange(0, s) / arange(0, s, 1) with s a symbolic size, else None."""
    args = list(node.args)
    if len(args) == 1:
        args = [0] + args
    start, end, step = (args + [1])[:3]
    val = end.meta.get("val") if isinstance(end, torch.fx.Node) else None
    if start == 0 and step == 1 and isinstance(val, torch.SymInt) and isinstance(val.node.expr, sympy.Symbol):
        return val.node.expr
    return None


def _index_refusals(node, iotas: Iotas, where):
    """aten.index(x, indices): an index that is arange(s) along an axis of size s keeps that axis;
    any other index mixes the axis it reads, and one computed from arange(s) is refused (its
    padded rows hold indices the axis may not have)."""
    x, indices = node.args[0], node.args[1]
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    for axis, idx in enumerate(indices):
        if idx is None or not isinstance(val, torch.Tensor):
            continue
        size = _expr(val.shape[axis])
        if idx in iotas.pure and size == iotas.pure[idx]:
            continue
        sym = iotas.pure.get(idx) or iotas.derived.get(idx)
        if sym is not None:
            yield sym, f"{where} indexes axis {axis} of {x.name} (size {size}) with values from arange({sym})"
        yield from _axis_refusals(x, [axis], where)


def _refusals(node: torch.fx.Node, iotas: Iotas):
    """(symbol, why) for each symbol this node keeps from being padded."""
    if node.op != "call_function":
        return
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    if packet is None or packet in SIZE_READS:   # sizes and their arithmetic: judged where used
        return
    where = f"{node.name} ({packet})"
    if packet is aten.index:
        yield from _index_refusals(node, iotas, where)
        return
    for a in _flat(node.args)[1:] if packet in INDEX_READS else ():
        sym = iotas.pure.get(a) or iotas.derived.get(a)
        if sym is not None:
            yield sym, f"{where} reads positions from arange({sym})"
    if packet not in SHAPE_ARGS and node not in iotas.pure:   # a size as a value (x / s0)
        for a in _flat(node.args) + _flat(list(node.kwargs.values())):
            val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if isinstance(val, torch.SymInt):
                for s in val.node.expr.free_symbols:
                    yield s, f"{where} reads a size as a value"
    if packet in VIEWS:
        yield from _view_refusals(node, where)
        return
    if packet in KEEPS or torch.Tag.pointwise in getattr(target, "tags", ()):
        return
    rule = MIXES.get(packet)             # a rule, ALL, or None (an op not in the tables: ALL)
    mixed = rule(node) if callable(rule) else {"each": None}
    if "each" in mixed:
        dim = mixed["each"]
        for a in _flat(node.args):
            yield from _axis_refusals(a, None if dim is None else [dim], where)
        return
    for i, a in enumerate(node.args):
        axes = mixed.get(i, [])
        yield from _axis_refusals(a, None if axes == ALL else axes, where)


def _axis_refusals(arg, axes, where):
    """Symbols in the sizes of arg's mixed axes (all axes when None)."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return
    rank = val.dim()
    for axis in (range(rank) if axes is None else [a % rank for a in axes if rank]):
        size = val.shape[axis]
        if isinstance(size, torch.SymInt):
            for s in size.node.expr.free_symbols:
                yield s, f"{where} mixes axis {axis} of {arg.name} (size {size.node.expr})"


def _view_refusals(node, where):
    """A view keeps padded rows at the end only where each group of merged or split axes has its
    symbols in its outer axis alone."""
    src, dst = node.args[0].meta.get("val"), node.meta.get("val")
    if not (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)):
        return
    a, b = [_expr(s) for s in src.shape], [_expr(s) for s in dst.shape]
    if not any(e.free_symbols for e in a + b):
        return
    groups = _view_groups(a, b, _hints(src.shape), _hints(dst.shape))
    if groups is None:
        for e in a + b:
            for s in e.free_symbols:
                yield s, f"{where} reshapes {a} to {b}"
        return
    for ga, gb in groups:
        for g in (ga, gb):
            for e in g[1:]:
                for s in e.free_symbols:
                    yield s, f"{where} merges or splits {a} -> {b} with {s} in an inner axis"


def _hints(shape):
    """Each size's example value (None where a symbolic size has none)."""
    return [s.node.hint if isinstance(s, torch.SymInt) else int(s) for s in shape]


def _view_groups(a, b, ha, hb):
    """Pairs of axis groups (of sizes a, b) whose products are equal, walking both shapes with
    the example sizes; None when the walk fails or a group's products differ symbolically."""
    if None in ha or None in hb:
        return None
    groups, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        ga, gb, pa, pb = [], [], 1, 1
        if i < len(a):
            ga.append(a[i])
            pa = ha[i]
            i += 1
        if j < len(b):
            gb.append(b[j])
            pb = hb[j]
            j += 1
        while pa != pb:
            if pa < pb and i < len(a):
                ga.append(a[i])
                pa *= ha[i]
                i += 1
            elif pb < pa and j < len(b):
                gb.append(b[j])
                pb *= hb[j]
                j += 1
            else:
                return None
        # size-1 axes join their neighbours' groups harmlessly; products must agree symbolically
        if sympy.simplify(sympy.Mul(*ga) - sympy.Mul(*gb)) != 0:
            return None
        groups.append(([e for e in ga if e != 1], [e for e in gb if e != 1]))
    return groups


def _flat(xs) -> list:
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out += _flat(x)
        else:
            out.append(x)
    return out
