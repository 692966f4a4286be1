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

import contextlib
import dataclasses
import itertools
import threading
from typing import Any, Callable, Optional, Sequence

import sympy
import torch

Expr = sympy.Expr

# --------------------------------------------------------------------------------------------
# Index arithmetic: integer floor division and "take digits" with simplification rules that
# use the ranges of loop variables (non-negative integers).
# --------------------------------------------------------------------------------------------


class FloorDiv(sympy.Function):
    """floor(a / b) for non-negative integer index expressions (printed `a // b`)."""

    is_integer = True
    nargs = (2,)

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if isinstance(base, sympy.Integer) and isinstance(divisor, sympy.Integer):
            return sympy.Integer(int(base) // int(divisor))
        # (k*d) // d == k when d divides every term of base
        if all(_divides(divisor, t) for t in sympy.Add.make_args(base)):
            return sympy.expand(base / divisor)
        return None

    def _sympystr(self, printer):
        return f"({printer.doprint(self.args[0])} // {printer.doprint(self.args[1])})"


class ModularIndexing(sympy.Function):
    """(a // div) % mod for non-negative integer index expressions."""

    is_integer = True
    nargs = (3,)

    @classmethod
    def eval(cls, base, divisor, modulus):
        if modulus == 1 or base == 0:
            return sympy.Integer(0)
        if all(isinstance(a, sympy.Integer) for a in (base, divisor, modulus)):
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        return None

    def _sympystr(self, printer):
        a, d, m = (printer.doprint(x) for x in self.args)
        return f"(({a} // {d}) % {m})" if self.args[1] != 1 else f"({a} % {m})"


def index_var(prefix: str, i: int) -> sympy.Symbol:
    """Loop variables are non-negative integers: i0, i1 for ranges, r0, r1 for reductions."""
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def size_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


def _upper_bound(expr: Expr, var_ranges: dict) -> Optional[Expr]:
    """An upper bound of a sum of non-negative terms given var -> range (exclusive), or None."""
    expr = sympy.expand(expr)
    total = sympy.Integer(0)
    for term in sympy.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        if coeff < 0:
            return None
        factors = sympy.Mul.make_args(rest)
        bound = coeff
        for f in factors:
            if f in var_ranges:
                bound = bound * (var_ranges[f] - 1)
            elif isinstance(f, sympy.Symbol) and f.is_positive:
                bound = bound * f
            elif isinstance(f, ModularIndexing):
                bound = bound * (f.args[2] - 1)
            elif f == 1:
                pass
            else:
                return None
        total = total + bound
    return sympy.expand(total)


def _definitely_less(a: Expr, b: Expr) -> bool:
    diff = sympy.expand(a - b)
    if diff.is_number:
        return bool(diff < 0)
    return bool(diff.is_negative)


def _factors(e: Expr):
    """(integer coefficient, {factor: power}) of a product, or None if not a plain product."""
    coeff, rest = sympy.sympify(e).as_coeff_Mul()
    if not coeff.is_Integer:
        return None
    powers: dict = {}
    for f in sympy.Mul.make_args(rest):
        if f == 1:
            continue
        base, exp = f.as_base_exp()
        if not exp.is_Integer or exp < 0:
            return None
        powers[base] = powers.get(base, 0) + int(exp)
    return int(coeff), powers


def _divides(d: Expr, e: Expr) -> bool:
    """Does d divide the single term e (structurally: integer coefficient and factor powers)?"""
    fd, fe = _factors(d), _factors(e)
    if fd is None or fe is None:
        return False
    (cd, pd), (ce, pe) = fd, fe
    if cd == 0 or ce % cd != 0:
        return False
    return all(pe.get(b, 0) >= k for b, k in pd.items())


def simplify_index(expr: Expr, var_ranges: dict) -> Expr:
    """Simplify FloorDiv/ModularIndexing using the loop variable ranges (var -> exclusive end)."""
    if not isinstance(expr, sympy.Basic) or not expr.has(FloorDiv, ModularIndexing):
        return sympy.expand(expr) if isinstance(expr, sympy.Basic) else expr

    def floordiv(base, div):
        base = sympy.expand(base)
        keep, rest = [], []
        for t in sympy.Add.make_args(base):
            (keep if _divides(div, t) else rest).append(t)
        rest_sum = sympy.Add(*rest)
        ub = _upper_bound(rest_sum, var_ranges)
        if ub is not None and _definitely_less(ub, div):
            return sympy.expand(sympy.Add(*keep) / div)
        return FloorDiv(base, div)

    def modular(base, div, mod):
        q = floordiv(base, div) if div != 1 else sympy.expand(base)
        if isinstance(q, FloorDiv):
            ub = _upper_bound(q.args[0], var_ranges)
            if ub is not None and _definitely_less(ub, div * mod):
                return FloorDiv(q.args[0], div)
            return ModularIndexing(base, div, mod)
        terms = [t for t in sympy.Add.make_args(q) if not _divides(mod, t)]
        q2 = sympy.Add(*terms)
        ub = _upper_bound(q2, var_ranges)
        if ub is not None and _definitely_less(ub, mod):
            return q2
        return ModularIndexing(q2 if div == 1 else base, 1 if div == 1 else div, mod)

    def visit(e):
        if isinstance(e, FloorDiv):
            return floordiv(visit(e.args[0]), visit(e.args[1]))
        if isinstance(e, ModularIndexing):
            return modular(visit(e.args[0]), visit(e.args[1]), visit(e.args[2]))
        if e.args:
            return e.func(*[visit(a) for a in e.args])
        return e

    return sympy.expand(visit(expr))


def contiguous_strides(size: Sequence[Expr]) -> list[Expr]:
    strides, acc = [], sympy.Integer(1)
    for s in reversed(list(size)):
        strides.append(acc)
        acc = acc * s
    return list(reversed(strides))


def product(xs: Sequence[Expr]) -> Expr:
    out = sympy.Integer(1)
    for x in xs:
        out = out * x
    return out


# --------------------------------------------------------------------------------------------
# The op vocabulary and the virtual `ops` handler.
# --------------------------------------------------------------------------------------------

#: name -> one-line meaning. Values are whatever the current handler returns (strings in printers
#: and code generators). `dtype` arguments are torch dtypes.
OPS_VOCABULARY: dict[str, str] = {
    # memory and constants
    "load": "load(name, index) -> value of buffer `name` at sympy flat index `index`",
    "store": "store(name, index, value) -> write value at buffer `name`[index] (codegen only)",
    "constant": "constant(value, dtype) -> a Python number as a value of dtype (inf/nan allowed)",
    "index_expr": "index_expr(expr, dtype) -> the sympy integer expression as a value of dtype",
    "to_dtype": "to_dtype(x, dtype) -> conversion (C/torch semantics, float->int truncates)",
    "masked": "masked(mask, body, other) -> body() where mask else the constant `other`; body may load "
    "out-of-bounds where mask is false, so it must not be evaluated there",
    "indirect_indexing": "indirect_indexing(x, size) -> a sympy symbol standing for the integer "
    "value x (wrapped: negative values + size), usable in load indices",
    "where": "where(cond, a, b)",
    # unary math
    **{n: f"{n}(x)" for n in (
        "neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh "
        "cosh tanh asinh acosh atanh sigmoid relu erf erfc erfinv lgamma floor ceil trunc round sign "
        "reciprocal square logical_not bitwise_not isnan isinf signbit").split()},
    # binary
    **{n: f"{n}(a, b)" for n in (
        "add sub mul truediv floordiv fmod remainder pow maximum minimum atan2 copysign hypot "
        "eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
        "left_shift right_shift").split()},
}


class OpsHandler:
    """Base handler: every op raises; subclasses implement what they understand."""

    def __getattr__(self, name):
        if name in OPS_VOCABULARY:
            def missing(*args, **kwargs):
                raise NotImplementedError(f"{type(self).__name__} does not implement ops.{name}")
            return missing
        raise AttributeError(name)


_handler_state = threading.local()


def current_ops_handler() -> OpsHandler:
    h = getattr(_handler_state, "handler", None)
    if h is None:
        raise RuntimeError("no ops handler installed: call inner functions under set_ops_handler()")
    return h


@contextlib.contextmanager
def set_ops_handler(handler: OpsHandler):
    prior = getattr(_handler_state, "handler", None)
    _handler_state.handler = handler
    try:
        yield handler
    finally:
        _handler_state.handler = prior


class _OpsProxy:
    """`ops.add(a, b)` forwards to the handler installed by set_ops_handler."""

    def __getattr__(self, name):
        if name not in OPS_VOCABULARY:
            raise AttributeError(f"ops.{name} is not in the op vocabulary (ir.OPS_VOCABULARY)")

        def dispatch(*args, **kwargs):  # looked up at call time: lowerings hold `ops.sin` early
            return getattr(current_ops_handler(), name)(*args, **kwargs)
        dispatch.__name__ = name
        return dispatch


ops = _OpsProxy()


class PrintHandler(OpsHandler):
    """Records each op as a line `tmpN = ops.name(args)`; used by every IR printer."""

    def __init__(self):
        self.lines: list[str] = []
        self._n = itertools.count()

    def _emit(self, text: str) -> str:
        name = f"tmp{next(self._n)}"
        self.lines.append(f"{name} = {text}")
        return name

    def __getattr__(self, name):
        if name not in OPS_VOCABULARY:
            raise AttributeError(name)

        def op(*args, **kwargs):
            if name == "masked":
                mask, body, other = args
                self.lines.append(f"# masked by {mask}:")
                inner = body()
                return self._emit(f"ops.masked({mask}, {inner}, {other!r})")
            if name == "indirect_indexing":
                sym = sympy.Symbol(f"ind{next(self._n)}", integer=True)
                self.lines.append(f"{sym} = ops.indirect_indexing({args[0]}, {args[1]})")
                return sym
            if name == "store":
                self.lines.append(f"ops.store({args[0]}, {args[1]}, {args[2]})")
                return None
            parts = [_fmt_arg(a) for a in args] + [f"{k}={_fmt_arg(v)}" for k, v in kwargs.items()]
            return self._emit(f"ops.{name}({', '.join(parts)})")

        return op


def _fmt_arg(a) -> str:
    if isinstance(a, torch.dtype):
        return str(a).replace("torch.", "")
    return str(a)


class DependencyHandler(OpsHandler):
    """Collects (buffer name, index) for every load and store, the expressions of index_expr /
    indirect_indexing sizes (for the size symbols a kernel needs), and the indirect symbols."""

    def __init__(self):
        self.loads: list[tuple[str, Expr]] = []
        self.stores: list[tuple[str, Expr]] = []
        self.exprs: list[Expr] = []
        self.indirect_symbols: set = set()

    @property
    def indirect(self) -> bool:
        return bool(self.indirect_symbols)

    def __getattr__(self, name):
        if name not in OPS_VOCABULARY:
            raise AttributeError(name)

        def op(*args, **kwargs):
            if name == "load":
                self.loads.append((args[0], sympy.sympify(args[1])))
            elif name == "store":
                self.stores.append((args[0], sympy.sympify(args[1])))
            elif name == "index_expr":
                self.exprs.append(sympy.sympify(args[0]))
            elif name == "masked":
                return args[1]()
            elif name == "indirect_indexing":
                self.exprs.append(sympy.sympify(args[1]))
                sym = sympy.Symbol(f"ind{len(self.indirect_symbols)}", integer=True)
                self.indirect_symbols.add(sym)
                return sym
            return "v"

        return op


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

    def store_index(self, idx: Sequence[Expr]) -> Expr:
        """Flat index where iteration point `idx` (over data.ranges) is stored."""
        return self.layout.index(idx)

    def read_deps(self) -> list[tuple[str, Expr]]:
        """(buffer, index) of every load, over the node's own index vars i*/r* (cached)."""
        if self._reads is None:
            h = DependencyHandler()
            with set_ops_handler(h):
                if isinstance(self.data, Reduction):
                    self.data.inner_fn(self.data.index_vars(), self.data.reduction_vars())
                else:
                    self.data.inner_fn(self.data.index_vars())
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
        exprs.append(self.store_index(self.data.index_vars()))
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
                return f"as_strided({a.data.name}, {_fmt_list(a.layout.size)}, {_fmt_list(a.layout.stride)}, {a.layout.offset})"
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
