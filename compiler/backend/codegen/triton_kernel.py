"""The state of one Triton kernel being generated, and sympy index rendering.

TritonKernelBuilder holds the lines, temporaries (with scoped common-subexpression elimination),
the masks of enclosing ops.masked bodies, the values of buffers computed earlier in the kernel
(kept in registers), and renders index expressions: outer ranges are flattened to `xindex`,
reduction ranges to `rindex`, and runs of dimensions whose strides line up are merged, so a
contiguous access is `base + xindex` (coalesced) rather than a div/mod per dimension. Values
carry the tile axes they vary along ("x", "r"), which decide their masks and broadcasts.
"""
from __future__ import annotations

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.indexing import access_kind
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported, PythonIndexPrinter, compute_dtype
from tracetorch.compiler.backend.codegen.triton_ops import TVar, TritonOpsHandler, triton_constant, tl_type

_print = PythonIndexPrinter()
X, R = "x", "r"


def _opt(name, default):
    from tracetorch.compiler import config
    return getattr(config.triton, name, default)


def _is_int(e) -> bool:
    return isinstance(sympy.sympify(e), sympy.Integer)


class TritonKernelBuilder:
    """State of one kernel being generated: lines, temporaries, CSE scopes, masks, locals."""

    def __init__(self, group: ir.KernelGroup, interpret: bool, persistent: bool | None = None):
        self.group = group
        self.interpret = interpret
        self.status = False       # the kernel takes a tt_status pointer (testing.inject_relu_bug)
        self.online: dict[str, str] = {}   # looped: sum node -> max node computed online with it
        self.int64 = False        # index arithmetic in int64 (set by TritonCodegen._build)
        self.xs = [ir.index_var("x", i) for i in range(len(group.ranges))]
        self.rs = [ir.index_var("r", i) for i in range(len(group.reduction_ranges))]
        self.xranges = [sympy.sympify(r) for r in group.ranges]
        self.rranges = [sympy.sympify(r) for r in group.reduction_ranges]
        self.reduction = bool(self.rranges)
        rnumel = ir.product(self.rranges)
        if persistent is None:      # by size: the whole row fits one block
            persistent = _is_int(rnumel) and int(rnumel) <= _opt("persistent_reduction_max", 4096)
        self.persistent = self.reduction and persistent
        self.prologue: list[str] = []       # index variables derived from xindex (kernel top)
        self.lines: list[str] = []          # the current block
        self.n_tmp = 0
        self.cse: list[dict] = [{}]
        self.locals: list[dict] = [{}]      # buffer name -> TVar, scoped like cse
        self.masks: list[TVar] = []         # masks of enclosing ops.masked bodies
        self.in_rloop = False
        self.indirect: dict[str, frozenset] = {}
        self.bounds_checks: list | None = None    # set while a scatter is emitted (triton_scatter.py)
        self.flagged: set = set()           # range checks already stored to the status word
        self.defined_runs: set = set()
        self.produced = {n.name: n for n in group.nodes}
        self.handler = TritonOpsHandler(self)
        #: loads contiguous along the outputs but strided along the rows, and loads contiguous
        #: along the rows: which one dominates picks the launch configurations (`outer`)
        self.outer_loads = self.row_loads = 0

    # emission ---------------------------------------------------------------------------------
    def line(self, text: str):
        self.lines.append(text)

    def emit(self, expr: str, dtype, dims) -> TVar:
        for scope in reversed(self.cse):
            if expr in scope:
                return scope[expr]
        v = TVar(f"tmp{self.n_tmp}", dtype, frozenset(dims))
        self.n_tmp += 1
        self.lines.append(f"{v.name} = {expr}")
        self.cse[-1][expr] = v
        return v

    def push(self):
        self.cse.append({})
        self.locals.append({})

    def pop(self):
        self.cse.pop()
        self.locals.pop()

    def local(self, name):
        for scope in reversed(self.locals):
            if name in scope:
                return scope[name]
        return None

    # shapes and masks -------------------------------------------------------------------------
    def shape(self, dims) -> str:
        if not self.reduction:
            return "[XBLOCK]"
        return f"[{'XBLOCK' if X in dims else '1'}, {'RBLOCK' if R in dims else '1'}]"

    def flag_out_of_bounds(self, ok, dims=frozenset()) -> None:
        """Set the status word where `ok` (an index's range check) is false, on the lanes of
        `dims` (and ok's) the kernel computes: the launcher raises after the launch, where ATen
        would have raised (a scatter's destination, triton_scatter.py, or a checked index)."""
        if ok.name in self.flagged:     # the same check reached again (an inlined value read twice)
            return
        self.flagged.add(ok.name)
        dims = ok.dims | frozenset({X}) | dims
        mask = self.mask_for(dims) or f"tl.full({self.shape(dims)}, 1, tl.int1)"
        if self.status is not True:
            self.status = "async"
        self.line(f"tl.store(tt_status + tl.zeros({self.shape(dims)}, tl.int32), "
                  f"tl.full({self.shape(dims)}, 2, tl.int32), ({mask}) & ~{self.broadcast(ok, dims)})"
                  "  # index out of bounds")

    def mask_for(self, dims) -> str | None:
        parts = (["xmask"] if X in dims else []) + (["rmask"] if R in dims else [])
        parts += [m.name for m in self.masks]
        return " & ".join(parts) if parts else None

    def broadcast(self, v: TVar, dims) -> str:
        """`v` as an expression of at least the tile shape of `dims`."""
        if dims <= v.dims:
            return v.name
        return f"tl.broadcast_to({v.name}, {self.shape(dims | v.dims)})"

    # index rendering ------------------------------------------------------------------------
    def render_plain(self, expr) -> str:
        return _print(sympy.sympify(expr))

    def indirect_symbol(self, v: TVar) -> sympy.Symbol:
        self.indirect[v.name] = v.dims
        return sympy.Symbol(v.name, integer=True)

    def index(self, expr) -> tuple[str, frozenset]:
        """Render a flat index over x*/r* (and size/indirect symbols); return (text, dims)."""
        expr = sympy.expand(sympy.sympify(expr))
        zero = {v: 0 for v, n in zip(self.xs + self.rs, self.xranges + self.rranges) if n == 1}
        if zero:
            expr = sympy.expand(expr.subs(zero))
        dims = set()
        expr = self._merge_runs(expr, self.xs, self.xranges, "xindex", X, dims)
        expr = self._merge_runs(expr, self.rs, self.rranges, "rindex", R, dims)
        for s in expr.free_symbols:
            dims |= self.indirect.get(s.name, frozenset())
        return _print(expr), frozenset(dims)

    def _merge_runs(self, expr, vs, ranges, flat, dim, dims):
        used = [v for v in vs if expr.has(v)]
        if not used:
            return expr
        dims.add(dim)
        strides = ir.contiguous_strides(ranges)
        coeffs, rest = _affine(expr, vs)
        if coeffs is None:            # views folded into div/mod: one variable per dimension
            expr = self._digits_of_flat(expr, vs, ranges, strides, flat)
            return expr.subs({v: self._run_var(flat, k, k, ranges, strides) for k, v in enumerate(vs)
                              if expr.has(v)})
        out, k, n = rest, 0, len(vs)
        while k < n:
            if coeffs.get(k, 0) == 0:
                k += 1
                continue
            j = k
            while j + 1 < n and coeffs.get(j + 1, 0) != 0 and \
                    sympy.expand(coeffs[j] - coeffs[j + 1] * ranges[j + 1]) == 0:
                j += 1
            out = out + coeffs[j] * self._run_var(flat, k, j, ranges, strides)
            k = j + 1
        return out

    def _digits_of_flat(self, expr, vs, ranges, strides, flat):
        """`(v + b) // d` and `((v + b) // d) % m` of a loop variable v whose static range d
        (d * m) divides, with b a multiple of d (of d * m), taken straight from the flat index:
        `(xindex // (stride_v * d)) % (range_v // d)`. Written as a div or mod of v, itself
        `xindex % range_v`, Triton's alignment analysis lost the contiguity: a cat of attention
        gradients ([B, H, T, 64] read as [B, T, H * 64]) loaded every element alone, where the
        same index from xindex loads 4 at a time."""
        def digits(k, d, m):
            whole = m * d == ranges[k]
            name = f"{flat[0]}{k}_" + (f"mod{m}" if d == 1 else f"div{d}" if whole else f"div{d}_mod{m}")
            text = f"(({flat} // {_print(strides[k] * d)}) % {m})" if strides[k] * d != 1 else f"({flat} % {m})"
            return self._index_symbol(name, text, flat)

        def split(arg, d, m):
            """(k, offset // d) when arg is v_k + offset with d * m | range_k and d | offset."""
            hit = [k for k, v in enumerate(vs) if arg.has(v)]
            if len(hit) != 1:
                return None
            k = hit[0]
            offset = sympy.expand(arg - vs[k])
            size = ranges[k]
            if offset.free_symbols or not (_is_int(size) and _is_int(strides[k])) or \
                    int(size) % (d * m) or int(offset) % d:
                return None
            return k, int(offset) // d

        def rewrite(e):
            if isinstance(e, ir.FloorDiv) and _is_int(e.args[1]):
                d = int(e.args[1])
                hit = split(e.args[0], d, 1)
                if hit is not None:
                    k, shift = hit
                    return digits(k, d, int(ranges[k]) // d) + shift
            if isinstance(e, ir.ModularIndexing) and all(_is_int(a) for a in e.args[1:]):
                d, m = int(e.args[1]), int(e.args[2])
                hit = split(e.args[0], d, m)
                if hit is not None and hit[1] % m == 0:
                    return digits(hit[0], d, m)
            return None

        return expr.replace(lambda e: rewrite(e) is not None, rewrite)

    def _run_var(self, flat, a, b, ranges, strides) -> sympy.Symbol:
        """A symbol for dims a..b of `flat` merged: (flat // stride_b) % prod(ranges[a..b])."""
        if all(ranges[i] == 1 for i in range(len(ranges)) if i < a or i > b):
            return sympy.Symbol(flat, integer=True, nonnegative=True)   # the run is the whole space
        name = f"{flat[0]}{a}" if a == b else f"{flat[0]}{a}_{b}"
        text = flat
        if strides[b] != 1:
            text = f"({text} // {_print(strides[b])})"
        if a != 0:
            text = f"({text} % {_print(ir.product(ranges[a:b + 1]))})"
        return self._index_symbol(name, text, flat)

    def _index_symbol(self, name, text, flat) -> sympy.Symbol:
        """The symbol `name`, defined once as `name = text`: at the kernel's top, or for rindex
        inside a reduction loop, in the loop body (once per scope)."""
        stmt = f"{name} = {text}"
        if flat == "rindex" and self.in_rloop:
            if stmt not in self.cse[-1]:
                self.cse[-1][stmt] = None
                self.lines.append(stmt)
        elif name not in self.defined_runs:
            self.defined_runs.add(name)
            self.prologue.append(stmt)
        return sympy.Symbol(name, integer=True, nonnegative=True)

    # loads, stores, masked ------------------------------------------------------------------
    def load(self, name, index):
        v = self.local(name)
        if v is not None:
            return v
        node = self.produced.get(name)
        if node is not None:
            return self._recompute(node)
        if name not in self.group.layouts:
            raise CodegenUnsupported(f"load of unknown buffer {name}")
        self._note_access(index)
        idx, dims = self.index(index)
        mask_dims = dims | self._stack_dims()
        mask = self.mask_for(mask_dims)
        if mask_dims - dims or (mask and not dims):
            # a block pointer wherever there is a mask: an ops.masked mask of no dims is still a
            # tile (Triton rejects a block mask on a scalar pointer)
            idx = f"{idx} + tl.zeros({self.shape(mask_dims)}, tl.int32)"
        dt = self.group.layouts[name].dtype
        tl_type(dt)
        expr = f"tl.load({name} + ({idx})" + (f", {mask}, other=0)" if mask else ")")
        if not mask_dims:
            # a scalar load: give it the kernel's tile rank so every later op broadcasts alike
            expr = f"tl.broadcast_to({expr}, {self.shape(mask_dims)})"
        if dt == torch.bfloat16 and self.interpret:
            expr = f"th.bf16_to_float({expr})"    # the interpreter's cast flushes subnormals
        elif dt in (torch.float16, torch.bfloat16):
            expr += ".to(tl.float32)"
        return self.emit(expr, compute_dtype(dt), mask_dims)

    def _note_access(self, index):
        """Count this load as an outer or a row one (indexing.access_kind)."""
        if not self.reduction:
            return
        kind = access_kind(index, self.xs, self.xranges, self.rs, self.rranges)
        if kind == "row":
            self.row_loads += 1
        elif kind == "outer":
            self.outer_loads += 1

    @property
    def outer(self) -> bool:
        return self.reduction and self.outer_loads > self.row_loads

    def _stack_dims(self):
        out = frozenset()
        for m in self.masks:
            out |= m.dims
        return out

    def _recompute(self, node):
        kind = self.group.kinds[node.name]
        if kind != ir.NODE_INNER or not self.in_rloop:
            raise CodegenUnsupported(f"{node.name} ({kind}) read before it is computed")
        v = node.data.inner_fn(self.xs + self.rs)
        self.locals[-1][node.name] = v
        return v

    def store(self, name, index, value: TVar, ctx_dims):
        idx, dims = self.index(index)
        ptr_dims = dims | value.dims | ctx_dims
        mask = self.mask_for(ptr_dims)
        if ptr_dims - dims or (mask and not dims):
            idx = f"{idx} + tl.zeros({self.shape(ptr_dims)}, tl.int32)"
        dt = self.group.layouts[name].dtype
        val = f"{value}.to({tl_type(dt)})"
        if dt == torch.bfloat16 and self.interpret and value.dtype != torch.bfloat16:
            # the interpreter's cast truncates, and flushes subnormals: rounded, then the bits
            val = f"th.bf16_bits_to_bf16(th.round_to_bf16_bits({value}))"
        self.line(f"tl.store({name} + ({idx}), {val}" + (f", {mask})" if mask else ")"))

    def masked(self, mask: TVar, body, other):
        self.masks.append(mask)
        self.push()
        try:
            result = body()
        finally:
            self.pop()
            self.masks.pop()
        other_s = triton_constant(other, result.dtype)
        return self.emit(f"tl.where({mask}, {result}, {other_s})", result.dtype, result.dims | mask.dims)


def _affine(expr, vs):
    """Split expr into {k: coefficient of vs[k]} + rest when it is affine in vs, else (None, expr)."""
    coeffs, rest = {}, sympy.Integer(0)
    vset = set(vs)
    for term in sympy.Add.make_args(expr):
        hit = [v for v in vs if term.has(v)]
        if not hit:
            rest = rest + term
            continue
        if len(hit) > 1:
            return None, expr
        v = hit[0]
        c = sympy.expand(term / v)
        if c.free_symbols & vset:       # v inside a div/mod or a power: not affine
            return None, expr
        k = vs.index(v)
        coeffs[k] = coeffs.get(k, 0) + c
    return coeffs, rest
