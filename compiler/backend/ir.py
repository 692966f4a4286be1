"""The loop-level IR of tracetorch's backend: every IR node type is declared in this file.

Lowering (compiler/backend/lowering/) turns each aten op of the post-aot FX graph into these
nodes; the scheduler (compiler/backend/scheduler/) groups the ComputedBuffers into KernelGroups;
the code generators (compiler/backend/codegen/) turn each KernelGroup into one kernel.

Computation is *define-by-run*: a Pointwise or Reduction node holds a Python function
`inner_fn(index)` (or `inner_fn(index, rindex)`) over sympy index variables. The function does
not compute anything itself: it calls the op vocabulary through the virtual `ops` object
(`ops.load("buf0", 16*i0 + i1)`, `ops.exp(x)`, `ops.where(c, a, b)`, ...), and whoever installed
the current handler (`set_ops_handler`) decides what those calls mean: the printer builds
readable text, the dependency collector records loads, the C++ code generator emits C++.

Index expressions are sympy expressions over the loop variables (`i0, i1, ...` for the
iteration ranges, `r0, r1, ...` for reduction ranges) and size symbols (`s0, s1, ...`, the
symbolic sizes of dynamic shapes). Views, broadcasts, permutes, slices and strides are folded
into those expressions at lowering time, so a load is always `buffer[flat index]`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import sympy
import torch

from tracetorch import logs

log = logs.get_logger(__name__)

Expr = sympy.Expr

# Index arithmetic and the op vocabulary live in their own modules; re-exported here so that
# `ir.FloorDiv`, `ir.ops`, `ir.set_ops_handler`, ... stay the one place code generators import.
from tracetorch.compiler.backend.indexing import (FloorDiv, ModularIndexing, contiguous_strides, index_var,  # noqa: E402,F401
                                       product, simplify_index, size_symbol, float_symbol, is_float_symbol,
                                       has_float_symbols, from_shape_env)
from tracetorch.compiler.backend.ops import (OPS_VOCABULARY, DependencyHandler, OpsHandler, PrintHandler,  # noqa: E402,F401
                                  _fmt_arg, current_ops_handler, ops, set_ops_handler)

# --------------------------------------------------------------------------------------------
# Layouts and IR nodes
# --------------------------------------------------------------------------------------------


def _dt(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def _fmt_list(xs) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


@dataclasses.dataclass
class Layout:
    """Where a buffer's elements live: sizes and strides (sympy), dtype, device, storage offset."""

    size: list
    stride: list
    dtype: torch.dtype
    device: torch.device
    offset: Expr = sympy.Integer(0)

    def __post_init__(self):
        self.size = [sympy.sympify(s) for s in self.size]
        self.stride = [sympy.sympify(s) for s in self.stride]
        self.offset = sympy.sympify(self.offset)

    @staticmethod
    def contiguous(size, dtype, device) -> "Layout":
        size = [sympy.sympify(s) for s in size]
        return Layout(size, contiguous_strides(size), dtype, torch.device(device))

    def index(self, idx: Sequence[Expr]) -> Expr:
        """The flat storage index of element `idx` (size-1 dimensions contribute nothing)."""
        assert len(idx) == len(self.size), (idx, self.size)
        out = self.offset
        for i, s, st in zip(idx, self.size, self.stride):
            if s != 1:
                out = out + i * st
        return out

    def is_contiguous(self) -> bool:
        return self.offset == 0 and all(
            s == 1 or sympy.expand(a - b) == 0
            for s, a, b in zip(self.size, self.stride, contiguous_strides(self.size)))

    def numel(self) -> Expr:
        return product(self.size)

    def static_nbytes(self) -> Optional[int]:
        """Bytes of the elements (not of the storage's span), or None where a size is symbolic."""
        n = self.numel()
        return int(n) * self.dtype.itemsize if n.is_number else None

    def storage_size(self) -> Expr:
        """Elements the storage must hold: offset + 1 + sum((size-1)*stride)."""
        if any(s == 0 for s in self.size):
            return sympy.Integer(0)
        return sympy.expand(self.offset + 1 + sum((s - 1) * st for s, st in zip(self.size, self.stride)))

    def __str__(self):
        off = f", offset={self.offset}" if self.offset != 0 else ""
        return (f"Layout(size={_fmt_list(self.size)}, stride={_fmt_list(self.stride)}, "
                f"dtype={_dt(self.dtype)}, device={self.device}{off})")


class IRNode:
    """Base of every IR node. `origins` holds the FX node names it came from (provenance)."""

    origins: set

    def get_size(self) -> list:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def make_loader(self) -> Callable[[Sequence[Expr]], Any]:
        """A function index -> ops value reading this node's element at `index`."""
        raise NotImplementedError

    def op_count(self) -> int:
        """Rough cost of recomputing this node's value inline (used by the realize policy)."""
        return 0

    def __str__(self):
        return self.to_str()

    def to_str(self) -> str:
        return repr(self)


def _print_fn(fn: Callable, args: list, store: Optional[tuple] = None) -> list[str]:
    """Run a define-by-run function under the printing handler; return its lines."""
    h = PrintHandler()
    with set_ops_handler(h):
        result = fn(*args)
        if store is not None:
            h.lines.append(f"ops.store({store[0]}, {store[1]}, {result})")
        else:
            h.lines.append(f"return {result}")
    return h.lines


class Loops(IRNode):
    """A computation over `ranges` defined by `inner_fn`; not yet stored anywhere."""

    def __init__(self, ranges, inner_fn, dtype, device, origins=(), cost=1):
        self.ranges = [sympy.sympify(r) for r in ranges]
        self.inner_fn = inner_fn
        self.dtype = dtype
        self.device = torch.device(device)
        self.origins = set(origins)
        self.cost = cost

    def get_size(self):
        return list(self.ranges)

    def get_dtype(self):
        return self.dtype

    def get_device(self):
        return self.device

    def op_count(self):
        return self.cost

    def index_vars(self):
        return [index_var("i", k) for k in range(len(self.ranges))]


def split_into(ranges, dims) -> Optional[list[tuple[int, int]]]:
    """[(start, end)] of consecutive `dims` whose products are `ranges` (in order), or None.
    A range of 1 takes an empty run; dims of 1 join the current run."""
    chunks, j = [], 0
    for r in ranges:
        start, prod = j, sympy.Integer(1)
        while sympy.simplify(prod - r) != 0:
            if j >= len(dims):
                return None
            prod = prod * dims[j]
            j += 1
            if prod.is_number and r.is_number and prod > r:
                return None
        chunks.append((start, j))
    while j < len(dims):               # trailing dims of 1 belong to the last run
        if sympy.simplify(dims[j] - 1) != 0 or not chunks:
            return None
        chunks[-1] = (chunks[-1][0], j + 1)
        j += 1
    return chunks


def merge_points(idx, chunks, dims) -> list:
    """Point over `dims` -> point over the ranges that split_into() split into those chunks."""
    return [sum((idx[j] * product(dims[j + 1:end]) for j in range(start, end)), sympy.Integer(0))
            for start, end in chunks]


def dense_order(size, stride) -> Optional[list[int]]:
    """The dims of a dense layout from fastest (stride 1) to slowest, or None where the strides
    are not a permutation of contiguous strides. Dims of size 1 carry no stride and keep their
    place (they go to the slowest end, in order); symbolic sizes compare as expressions."""
    left = [d for d in range(len(size)) if not (size[d].is_number and int(size[d]) == 1)]
    ones = [d for d in range(len(size)) if d not in left]
    order, expect = [], sympy.Integer(1)
    while left:
        d = next((d for d in reversed(left) if sympy.expand(stride[d] - expect) == 0), None)
        if d is None:
            return None
        left.remove(d)
        order.append(d)
        expect = expect * size[d]
    return order + list(reversed(ones))


class Pointwise(Loops):
    """out[i] = inner_fn(i) for every i in ranges."""

    def make_loader(self):
        return self.inner_fn

    def to_str(self, store: Optional[tuple] = None) -> str:
        vs = self.index_vars()
        lines = _print_fn(self.inner_fn, [vs], store(vs) if store else None)
        head = f"Pointwise(ranges={_fmt_list(self.ranges)}, dtype={_dt(self.dtype)}, device={self.device})"
        return head + "\n" + _indent(f"def inner_fn({', '.join(map(str, vs))}):\n" + _indent("\n".join(lines)))


#: reduction types the code generators implement. argmax/argmin yield int64 positions along the
#: (flattened) reduction ranges; max/min propagate NaN like torch.
REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")
#: reductions whose result does not depend on the order the elements are visited in (beyond
#: rounding): their loops may be split or cut into partials (ComputedBuffer.reduction_resplit,
#: lowering/split_reduction.py); argmax/argmin report the first position of a tie
ORDER_FREE_REDUCTIONS = ("sum", "prod", "max", "min", "any", "all")


class Reduction(Loops):
    """out[i] = reduce_{r in reduction_ranges} inner_fn(i, r) with `reduction_type`.

    `src_dtype` is the dtype of inner_fn's values; `dtype` is the result's dtype (accumulation
    happens in the wider of the two, float for float16/bfloat16)."""

    def __init__(self, ranges, reduction_ranges, inner_fn, reduction_type, dtype, src_dtype, device,
                 origins=(), cost=1):
        super().__init__(ranges, inner_fn, dtype, device, origins, cost)
        assert reduction_type in REDUCTION_TYPES, reduction_type
        self.reduction_ranges = [sympy.sympify(r) for r in reduction_ranges]
        self.reduction_type = reduction_type
        self.src_dtype = src_dtype

    def make_loader(self):
        raise RuntimeError("a Reduction must be realized into a ComputedBuffer before it is read")

    def reduction_vars(self):
        return [index_var("r", k) for k in range(len(self.reduction_ranges))]

    def to_str(self, store: Optional[tuple] = None) -> str:
        vs, rs = self.index_vars(), self.reduction_vars()
        lines = _print_fn(self.inner_fn, [vs, rs])
        head = (f"Reduction(ranges={_fmt_list(self.ranges)}, reduction_ranges={_fmt_list(self.reduction_ranges)}, "
                f"reduction_type={self.reduction_type}, dtype={_dt(self.dtype)}, src_dtype={_dt(self.src_dtype)}, "
                f"device={self.device})")
        body = f"def inner_fn({', '.join(map(str, vs))}; {', '.join(map(str, rs))}):\n" + _indent("\n".join(lines))
        if store:
            name, idx = store(vs)
            body += f"\n{self.reduction_type} over r -> ops.store({name}, {idx}, acc)"
        return head + "\n" + _indent(body)


def _indent(s: str, n: int = 4) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in s.split("\n"))


class Buffer(IRNode):
    """Named storage with a fixed Layout. Reading it loads `name[layout.index(i)]`."""

    def __init__(self, name: str, layout: Layout, origins=()):
        self.name = name
        self.layout = layout
        self.origins = set(origins)

    def get_size(self):
        return list(self.layout.size)

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def make_loader(self):
        name, layout = self.name, self.layout
        return lambda idx: ops.load(name, layout.index(idx))

    def reads(self) -> list[str]:
        """Names of the buffers this one's computation reads."""
        return []

    def head(self) -> str:
        return f"{self.name}: {type(self).__name__}({self.layout})"

    def to_str(self):
        return self.head()


class InputBuffer(Buffer):
    """A graph input (placeholder); its layout comes from the example input."""


class ConstantBuffer(InputBuffer):
    """A tensor constant of the graph (get_attr), passed to kernels like an input."""

    def __init__(self, name, layout, value: torch.Tensor, origins=()):
        super().__init__(name, layout, origins)
        self.value = value


class ComputedBuffer(Buffer):
    """A buffer filled by a Pointwise or Reduction: the unit the scheduler fuses."""

    def __init__(self, name, layout: Layout, data: Loops, origins=()):
        super().__init__(name, layout, origins or data.origins)
        self.data = data
        self._reads = None
        #: set by resplit(): iteration point over data.ranges -> point over the layout's size
        self._merge: Optional[Callable] = None

    def store_index(self, idx: Sequence[Expr]) -> Expr:
        """Flat index where iteration point `idx` (over data.ranges) is stored."""
        return self.layout.index(self._merge(idx) if self._merge else idx)

    def resplit(self, dims) -> Optional["ComputedBuffer"]:
        """This pointwise node iterated over `dims` instead of its ranges, where each of its
        ranges is the product of consecutive dims (e.g. [256, 128] as [4, 64, 128], which lets
        the pointwise half of a layernorm after a view fuse into its [4, 64] x [128] reduction).
        The same buffer (name, layout): only the loop nest changes. None if `dims` is no such split."""
        if not isinstance(self.data, Pointwise):
            return None
        chunks = split_into(self.data.ranges, dims)
        if chunks is None:
            return None
        inner = self.data.inner_fn
        data = Pointwise(dims, lambda idx: inner(merge_points(idx, chunks, dims)), self.data.dtype,
                         self.data.device, origins=self.data.origins, cost=self.data.cost)
        return self._over_split_loops(data, chunks, dims)

    def outer_resplit(self, dims) -> Optional["ComputedBuffer"]:
        """This reduction with its output loops split as `dims` (each range the product of
        consecutive dims, row-major): the [64, 768] partial sums of a split bias gradient as
        [4, 16, 768], the loops of the [4, 512, 768] product they read. The same buffer (name,
        layout, what is stored where); None if `dims` is no such split."""
        d = self.data
        if type(d) is not Reduction:
            return None
        chunks = split_into(d.ranges, dims)
        if chunks is None:
            return None
        inner = d.inner_fn
        data = Reduction(dims, d.reduction_ranges, lambda idx, ridx: inner(merge_points(idx, chunks, dims), ridx),
                         d.reduction_type, d.dtype, d.src_dtype, d.device, origins=d.origins, cost=d.cost)
        return self._over_split_loops(data, chunks, dims)

    def _over_split_loops(self, data, chunks, dims) -> "ComputedBuffer":
        """This buffer computed by `data`, whose (outer) loops are `dims`, split_into's `chunks`
        of this node's: the store index merges a point back (after any earlier re-nesting)."""
        old_merge = self._merge

        def merge(idx):
            flat = merge_points(idx, chunks, dims)
            return old_merge(flat) if old_merge else flat

        out = ComputedBuffer(self.name, self.layout, data, origins=self.origins)
        out._merge = merge
        return out

    def reduction_resplit(self, rdims) -> Optional["ComputedBuffer"]:
        """This reduction with its reduction loops split as `rdims` (each reduction range the
        product of consecutive rdims, row-major), for reductions whose result does not depend on
        the visiting order beyond rounding (sum, prod, max, min, any, all): a bias gradient's
        sum over [B * S] tokens as [B] x [S], the loops of the pointwise product it reads. The same
        buffer; None if `rdims` is no such split."""
        d = self.data
        if type(d) is not Reduction or d.reduction_type not in ORDER_FREE_REDUCTIONS:
            return None
        chunks = split_into(d.reduction_ranges, rdims)
        if chunks is None:
            return None
        inner = d.inner_fn
        data = Reduction(d.ranges, rdims, lambda idx, ridx: inner(idx, merge_points(ridx, chunks, rdims)),
                         d.reduction_type, d.dtype, d.src_dtype, d.device, origins=d.origins, cost=d.cost)
        out = ComputedBuffer(self.name, self.layout, data, origins=self.origins)
        out._merge = self._merge
        return out

    def permuted(self, order: Sequence[int]) -> Optional["ComputedBuffer"]:
        """This pointwise node with its loops nested in `order` (new loop k runs over
        data.ranges[order[k]]): a channels-last pointwise over [N, H, W, C] as [C, N, H, W], the
        outer x reduction split of the per-channel sums of a batch norm reading it. The same
        buffer (name, layout, what is stored where); only the loop nest changes."""
        if type(self.data) is not Pointwise or sorted(order) != list(range(len(self.data.ranges))):
            return None
        old_merge, inner, n = self._merge, self.data.inner_fn, len(order)

        def point(idx):                    # point over the permuted loops -> point over data.ranges
            p = [None] * n
            for pos, d in enumerate(order):
                p[d] = idx[pos]
            return p

        data = Pointwise([self.data.ranges[d] for d in order], lambda idx: inner(point(idx)),
                         self.data.dtype, self.data.device, origins=self.data.origins, cost=self.data.cost)
        out = ComputedBuffer(self.name, self.layout, data, origins=self.origins)
        out._merge = (lambda idx: old_merge(point(idx))) if old_merge else point
        return out

    def in_storage_order(self) -> "ComputedBuffer":
        """This pointwise node with its loops nested as its layout stores the elements: the
        largest stride outermost, stride 1 innermost. A channels-last or transposed result
        iterated in logical order stores (and usually loads) with a stride between neighbouring
        threads or vector lanes; in storage order both are contiguous (Inductor orders its loops
        by the output's strides too). The same buffer; itself where the order already agrees or
        the layout is not dense."""
        if type(self.data) is not Pointwise or self._merge is not None:
            return self
        order = dense_order(self.layout.size, self.layout.stride)
        if order is None:
            return self
        outer_first = self._coalescing_order(list(reversed(order)))
        if outer_first == sorted(outer_first):
            return self
        return self.permuted(outer_first) or self

    # An innermost loop that strides through a tensor costs a memory transaction per element
    # instead of one per 32 bytes; a strided store costs a little more than a strided load.
    _STORE_WEIGHT = 1.5

    def _coalescing_order(self, store_order: list[int]) -> list[int]:
        """The loop order (outermost first) for this pointwise node: its result's storage order,
        unless the loads agree on another order under which fewer accesses stride along the
        innermost loop (each load and the store weighed by how often they stride there). The
        backward of a max pool read twelve NCHW values (the pooled gradients and indices of four
        windows) per channels-last result: nested in the result's order every one of them
        strided across channels (4.7 ms on an H100, against 0.2 ms nested as the loads are)."""
        if len(store_order) < 2:
            return store_order
        loads = [idx for _, idx in self.read_deps()]
        if len(loads) < 2:
            return store_order
        vars_ = self.data.index_vars()
        if len(vars_) != len(store_order):
            return store_order
        zero = {v: sympy.Integer(0) for v in vars_}

        def stride(expr, d):
            """How far the address moves when loop d steps from 0 to 1 (the others at 0)."""
            try:
                s = expr.xreplace({**zero, vars_[d]: sympy.Integer(1)}) - expr.xreplace(zero)
            except (TypeError, ValueError):
                return None
            return s if s.is_number else None

        # the usual case, decided cheaply: no load strides along the result's innermost loop
        inner = store_order[-1]
        if all(s is not None and abs(s) <= 1 for s in (stride(e, inner) for e in loads)):
            return store_order

        def strides(expr) -> Optional[list]:
            out = [stride(expr, d) for d in range(len(vars_))]
            return None if any(s is None for s in out) else out

        access = [(st, 1.0) for st in map(strides, loads) if st is not None]
        out_strides = [self.layout.stride[d] if self.layout.size[d] != 1 else 0 for d in range(len(vars_))]
        if not all(getattr(s, "is_number", False) for s in out_strides):
            return store_order
        access.append((out_strides, self._STORE_WEIGHT))

        def cost(order):
            inner = order[-1]
            return sum(w for st, w in access if abs(st[inner]) > 1)

        candidates = [store_order]
        for st, _ in access[:-1]:
            if all(s != 0 for s in st) and len(set(map(abs, st))) == len(st):
                cand = sorted(range(len(st)), key=lambda d: -abs(st[d]))
                if cand not in candidates:
                    candidates.append(cand)
        best = min(candidates, key=cost)          # ties: the store's order (listed first)
        if best != store_order:
            log.debug("loop_order_from_loads", buffer=self.name, order=best, store_order=store_order,
                      strided_accesses=cost(best), strided_in_store_order=cost(store_order))
        return best

    def read_deps(self) -> list[tuple[str, Expr]]:
        """(buffer, index) of every load, over the node's own index vars i*/r* (cached)."""
        if self._reads is None:
            h = DependencyHandler()
            with set_ops_handler(h):
                if isinstance(self.data, Reduction):
                    self.data.inner_fn(self.data.index_vars(), self.data.reduction_vars())
                else:
                    self.data.inner_fn(self.data.index_vars())
                # a scatter's destination index loads too (its index tensor): same bookkeeping
                self._store_expr = self.store_index(self.data.index_vars())
            self._reads = h.loads
            self.index_exprs = h.exprs
            self.indirect_symbols = h.indirect_symbols
        return self._reads

    def node_vars(self) -> list:
        vs = self.data.index_vars()
        return vs + self.data.reduction_vars() if isinstance(self.data, Reduction) else vs

    def size_symbols(self) -> set:
        """Free size symbols of this node's ranges, indices and index expressions."""
        self.read_deps()
        exprs = list(self.data.ranges) + list(getattr(self.data, "reduction_ranges", []))
        exprs += [e for _, e in self._reads] + list(self.index_exprs)
        exprs.append(self._store_expr)
        own = set(self.node_vars()) | set(self.indirect_symbols)
        out = set()
        for e in exprs:
            out |= {s for s in sympy.sympify(e).free_symbols if s not in own}
        return out

    def reads(self):
        return list(dict.fromkeys(n for n, _ in self.read_deps()))

    def to_str(self):
        body = self.data.to_str(store=lambda vs: (self.name, self.store_index(vs)))
        org = f"\n    origins: {', '.join(sorted(self.origins))}" if self.origins else ""
        return self.head() + "\n" + _indent(body) + org


#: how a Scatter combines its value with the element already at the destination: plain store
#: (duplicates: any one of the values lands, as in ATen), or a reduction. "sum" is an atomic add
#: in Triton and a serial read-modify-write loop in C++; prod/amax/amin have no Triton atomic
#: here, so their lowerings run only through C++ (the lowering decides, see lowering/scatter.py).
SCATTER_MODES = ("store", "sum", "prod", "amax", "amin")


class Scatter(Pointwise):
    """for i in ranges: out[output_indexer(i)] = combine(out[...], inner_fn(i)) by scatter_mode.

    `ranges` is the *source* iteration space (the index tensor's, or the indexed shape of
    index_put), not the output's. output_indexer(i) returns the destination coordinates in the
    output (sympy; the scattered dimensions come from ops.indirect_indexing of a loaded index).
    Several points may hit one destination, so a Scatter never fuses with anything (see
    ScatterBuffer)."""

    def __init__(self, ranges, inner_fn, output_indexer, scatter_mode, dtype, device, origins=(), cost=1):
        super().__init__(ranges, inner_fn, dtype, device, origins, cost)
        assert scatter_mode in SCATTER_MODES, scatter_mode
        self.output_indexer = output_indexer
        self.scatter_mode = scatter_mode

    def make_loader(self):
        raise RuntimeError("a Scatter is read through its ScatterBuffer, never inlined")

    def to_str(self, store: Optional[tuple] = None) -> str:
        vs = self.index_vars()
        h = PrintHandler()
        with set_ops_handler(h):
            value = self.inner_fn(vs)
            dst = self.output_indexer(vs)
            target = store(dst)[0] if store else "out"
            h.lines.append(f"ops.scatter_{self.scatter_mode}({target}[{', '.join(map(str, dst))}], {value})")
        head = (f"Scatter(ranges={_fmt_list(self.ranges)}, mode={self.scatter_mode}, dtype={_dt(self.dtype)}, "
                f"device={self.device})")
        return head + "\n" + _indent(f"def inner_fn({', '.join(map(str, vs))}):\n" + _indent("\n".join(h.lines)))


class ScatterBuffer(ComputedBuffer):
    """A Scatter applied in place to `target`, a ComputedBuffer holding the initial values (a copy
    of the op's `self`, or zeros): this buffer *is* target's storage after the scatter.

    Why a second name for one storage: readers of the result read this name, so every ordering
    the scheduler derives from reads puts them after the scatter, and the scatter (which reads
    `target`) after target's producer. The memory planner hands this buffer target's storage
    (target dies here: the lowering creates it for this scatter alone). The scheduler gives a
    ScatterBuffer a kernel of its own: a consumer fused into it would read an element before
    every write to it had landed (other points, other Triton programs)."""

    def __init__(self, name, target: ComputedBuffer, data: Scatter, origins=()):
        super().__init__(name, target.layout, data, origins)
        self.target = target

    def store_index(self, idx):
        """Flat destination index of source point idx: calls ops.indirect_indexing, so only
        under an ops handler (the code generators emit the index loads and bounds checks)."""
        return self.layout.index(self.data.output_indexer(idx))

    def reads(self):
        return list(dict.fromkeys([self.target.name] + [n for n, _ in self.read_deps()]))

    def to_str(self):
        body = self.data.to_str(store=lambda dst: (self.name, None))
        org = f"\n    origins: {', '.join(sorted(self.origins))}" if self.origins else ""
        return f"{self.head()}  (in place of {self.target.name})\n" + _indent(body) + org


class ReinterpretView(IRNode):
    """A strided view of an existing buffer's storage (as_strided): zero-copy."""

    def __init__(self, data: Buffer, layout: Layout, origins=()):
        self.data = data
        self.layout = layout
        self.origins = set(origins)

    @property
    def name(self):
        return self.data.name

    def get_size(self):
        return list(self.layout.size)

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def make_loader(self):
        name, layout = self.data.name, self.layout
        return lambda idx: ops.load(name, layout.index(idx))

    def to_str(self):
        return f"ReinterpretView({self.data.name}, {self.layout})"


class View(IRNode):
    """A lazy view: element `idx` of the view is element `reindex(idx)` of `data`."""

    def __init__(self, data: IRNode, size, reindex: Callable, origins=()):
        self.data = data
        self.size = [sympy.sympify(s) for s in size]
        self.reindex = reindex
        self.origins = set(origins) | set(getattr(data, "origins", ()))

    def get_size(self):
        return list(self.size)

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def op_count(self):
        return self.data.op_count()

    def make_loader(self):
        inner, reindex = self.data.make_loader(), self.reindex
        return lambda idx: inner(reindex(idx))

    def to_str(self):
        vs = [index_var("i", k) for k in range(len(self.size))]
        return f"View(size={_fmt_list(self.size)}, index {vs} -> {list(self.reindex(vs))} of {_short(self.data)})"


def _short(node) -> str:
    return node.name if isinstance(node, Buffer) else type(node).__name__


class ExternKernel(Buffer):
    """A call to an ATen op that is kept whole (mm, bmm, addmm, convolution, SDPA): the wrapper
    calls `kernel` (e.g. "aten.mm.default") on realized inputs; the result is this buffer.

    `args` / `kwargs` are the op's arguments in which every tensor is replaced by an IR node
    (a Buffer or ReinterpretView); sympy expressions stand for symbolic ints."""

    kind = "extern"

    def __init__(self, name, layout: Optional[Layout], kernel: str, args: list, kwargs: dict, origins=()):
        super().__init__(name, layout, origins)
        self.kernel = kernel
        self.args = args
        self.kwargs = kwargs

    def inputs(self) -> list[IRNode]:
        out = []

        def visit(a):
            if isinstance(a, IRNode):
                out.append(a)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)

        for a in list(self.args) + list(self.kwargs.values()):
            visit(a)
        return out

    def reads(self):
        return list(dict.fromkeys(i.name for i in self.inputs()))

    def to_str(self):
        def fmt(a):
            if isinstance(a, Buffer):
                return a.name
            if isinstance(a, ReinterpretView):
                size, stride = _fmt_list(a.layout.size), _fmt_list(a.layout.stride)
                return f"as_strided({a.data.name}, {size}, {stride}, {a.layout.offset})"
            if isinstance(a, (list, tuple)):
                return "[" + ", ".join(fmt(x) for x in a) + "]"
            return repr(a) if not isinstance(a, (sympy.Basic, torch.dtype)) else _fmt_arg(a)

        args = [fmt(a) for a in self.args] + [f"{k}={fmt(v)}" for k, v in self.kwargs.items()]
        lay = str(self.layout) if self.layout is not None else "multiple outputs"
        org = f"\n    origins: {', '.join(sorted(self.origins))}" if self.origins else ""
        return f"{self.name}: {type(self).__name__}({lay})\n    {self.kernel}({', '.join(args)}){org}"


class FallbackKernel(ExternKernel):
    """Any ATen op without a lowering: called as is (never an error; logged as a perf hint)."""

    kind = "fallback"

    def __init__(self, name, layout, kernel, args, kwargs, reason: str, origins=()):
        super().__init__(name, layout, kernel, args, kwargs, origins)
        self.reason = reason


class MultiOutput(Buffer):
    """Output `index` of a multi-output ExternKernel/FallbackKernel (a tuple element)."""

    def __init__(self, name, layout, parent: ExternKernel, index: int, origins=()):
        super().__init__(name, layout, origins)
        self.parent = parent
        self.index = index

    def reads(self):
        return [self.parent.name]

    def to_str(self):
        return f"{self.head()} = {self.parent.name}[{self.index}]"


# --------------------------------------------------------------------------------------------
# What the scheduler hands to code generators (docs/CONTRACTS.md section 7)
# --------------------------------------------------------------------------------------------

#: how a ComputedBuffer runs inside a KernelGroup
NODE_OUTER = "outer"          # once per outer point (ranges == group.ranges)
NODE_INNER = "inner"          # once per (outer, reduction) point (ranges == ranges + reduction_ranges)
NODE_REDUCTION = "reduction"  # a Reduction over reduction_ranges at each outer point


@dataclasses.dataclass
class KernelGroup:
    """One kernel: fused ComputedBuffers over a shared iteration space.

    The iteration space is `ranges` (outer, parallel) x `reduction_ranges` (empty for purely
    pointwise kernels). Nodes run in list order at each outer point; kinds[name] says how.
    - `inputs`: buffers the kernel reads that are produced outside it (graph inputs, other
      kernels, extern kernels), in first-read order.
    - `outputs`: buffers produced here that something outside reads (later kernels, externs,
      graph outputs): they must be stored.
    - `internal`: buffers produced and consumed only here: the code generator may keep them in
      registers/locals instead of memory (nobody else will read them; they are not allocated).
    - `size_symbols`: the size symbols used in ranges/indices: they become int64 kernel arguments.
    - `layouts`: name -> Layout of every buffer the kernel touches (dtype, strides).
    - `provenance`: [(fx node name, "file:line | source line" or "")] for the comment header.
    """

    name: str
    nodes: list
    ranges: list
    reduction_ranges: list
    kinds: dict
    inputs: list
    outputs: list
    internal: list
    size_symbols: list
    layouts: dict
    provenance: list = dataclasses.field(default_factory=list)

    def node_names(self):
        return [n.name for n in self.nodes]

    def writes_nothing(self) -> bool:
        """No outer point at all (a static size 0 among the ranges): the kernel has no element
        to compute, and its indices may divide by that 0 (printing them failed: fuzz 381656)."""
        return any(getattr(r, "is_number", False) and int(r) == 0 for r in self.ranges)

    def to_str(self) -> str:
        lines = [f"{self.name}: ranges={_fmt_list(self.ranges)} reduction_ranges={_fmt_list(self.reduction_ranges)}",
                 f"    nodes: {', '.join(f'{n.name}({self.kinds[n.name]})' for n in self.nodes)}",
                 f"    inputs: {', '.join(self.inputs) or '-'}; outputs: {', '.join(self.outputs) or '-'}; "
                 f"internal: {', '.join(self.internal) or '-'}"]
        if self.size_symbols:
            lines.append(f"    size args: {', '.join(map(str, self.size_symbols))}")
        return "\n".join(lines)

    __str__ = to_str


def format_ir(nodes: Sequence[IRNode]) -> str:
    """The readable listing used by the ir_pre_fusion / ir_post_fusion artifacts."""
    return "\n\n".join(n.to_str() for n in nodes)
