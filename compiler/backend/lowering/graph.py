"""GraphLowering: walks the post-aot FX graph and builds the IR (buffers in program order).

Each FX node's value is an IR node: lazy (Pointwise / View, inlined into its readers) or stored
(a Buffer). The realize policy decides what gets a buffer: reductions, extern/fallback inputs,
graph outputs, and values read by several users when recomputing them would be expensive.
Ops without a lowering become FallbackKernels (the ATen call), logged as perf hints.
"""

from __future__ import annotations

import dataclasses

import math
import operator
import os
import re

import sympy
import torch

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend import ops as ops_module
from tracetorch.compiler.backend.indexing import index_var
from tracetorch.compiler.backend.lowering.registry import LOWERINGS, Ctx, NotLowerable, aten, to_sympy
from tracetorch.compiler.backend.lowering.extern import layout_from_meta, make_extern

log = logs.get_logger(__name__)

#: a value read by several users is recomputed (inlined) while its op count stays below this
INLINE_MAX_COST_SHARED = 12
#: any lazy value is stored once its inlined expression grows beyond this (bounds compile time)
INLINE_MAX_COST = 120
#: a value read by several users is stored once it reads more than this many buffers of its own
#: size: every reader recomputing it reads them all again. ViT-B/16's residual stream
#: (cat + position embedding + attention + MLP outputs) was inlined into each LayerNorm, whose
#: two passes read it twice: 60-85 us per LayerNorm where Inductor's take 8-20
INLINE_MAX_FULL_READS_SHARED = 2


#: in-place ops that change only their argument's metadata (run as ATen fallbacks)
_METADATA_INPLACE = {getattr(aten, n).default for n in ("as_strided_", "squeeze_", "unsqueeze_", "t_", "transpose_",
                                                         "swapdims_", "swapaxes_") if hasattr(aten, n)
                     and "default" in getattr(aten, n).overloads()}
_METADATA_INPLACE |= {o for n in ("squeeze_", "unsqueeze_", "transpose_") if hasattr(aten, n)
                      for o in (getattr(getattr(aten, n), ov) for ov in getattr(aten, n).overloads())}


def _is_input(x) -> bool:
    """A graph input, or a graph input after in-place metadata ops (as_strided_ of it): the aot
    stage's write-back copy_ may target either."""
    while isinstance(x, ir.FallbackKernel) and x.reason == "in-place metadata op" and x.args:
        x = x.args[0]
    return isinstance(x, ir.InputBuffer)


class GraphFallback(Exception):
    """The graph cannot be compiled as a whole (e.g. data-dependent sizes): run it eagerly."""


_SYM_OPS = {operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
            operator.floordiv: lambda a, b: ir.FloorDiv(a, b), operator.neg: operator.neg,
            operator.mod: lambda a, b: ir.ModularIndexing(a, 1, b),
            # an int power of sizes (a float one, negative exponents included, is a float scalar op)
            operator.pow: lambda a, b: sympy.Pow(a, b),
            # int max/min of sizes (`max(1, x.shape[0])`); float ones are _FLOAT_SCALAR_OPS'
            torch.sym_max: lambda a, b: sympy.Max(a, b), torch.sym_min: lambda a, b: sympy.Min(a, b),
            torch.sym_sum: lambda xs: sympy.Add(*xs)}


#: scalar ops whose float results the wrapper computes in Python (exactly as eager's Python does):
#: target -> format of the expression over the rendered operands
_FLOAT_SCALAR_OPS = {operator.add: "({0} + {1})", operator.sub: "({0} - {1})", operator.mul: "({0} * {1})",
                     operator.truediv: "({0} / {1})", operator.floordiv: "({0} // {1})",
                     operator.mod: "({0} % {1})", operator.pow: "({0} ** {1})", operator.neg: "(-{0})",
                     operator.pos: "(+{0})", operator.abs: "abs({0})", torch.sym_float: "float({0})",
                     torch.sym_max: "max({0}, {1})", torch.sym_min: "min({0}, {1})"}
if hasattr(torch, "_sym_sqrt"):
    _FLOAT_SCALAR_OPS[torch._sym_sqrt] = "math.sqrt({0})"

#: scalar ops giving an int from a float scalar (`s // 0.3` traces as math.floor(s / 0.3)): the
#: wrapper computes them too, into an integer symbol kernels take as an int64 argument
_INT_FROM_FLOAT_OPS = {math.floor: "math.floor({0})", math.ceil: "math.ceil({0})", math.trunc: "math.trunc({0})",
                       torch.sym_int: "int({0})", int: "int({0})", round: "round({0})"}


#: int ops whose index forms (ir.FloorDiv, ir.ModularIndexing) assume a non-negative dividend and a
#: positive divisor: with either unproven (a user's int, `-2 // n`) the wrapper computes them in
#: Python, as eager does (C's `/` and `%` truncate towards zero: `-2 // 3` gave 0, not -1)
_SIGNED_INT_OPS = {operator.floordiv: "({0} // {1})", operator.mod: "({0} % {1})"}


def _maybe_negative(args) -> bool:
    if len(args) != 2 or any(isinstance(a, (float, ir.IRNode)) for a in args):
        return False
    try:
        a, b = (sympy.sympify(x) for x in args)
    except (sympy.SympifyError, TypeError):
        return False
    return not (a.is_nonnegative is True and b.is_positive is True)


def has_float_scalar(args, kwargs=None) -> bool:
    """Is any non-tensor argument a symbolic float (a runtime float scalar)?"""
    todo = list(args) + list((kwargs or {}).values())
    while todo:
        a = todo.pop()
        if isinstance(a, (list, tuple)):
            todo.extend(a)
        elif ir.has_float_symbols(a):
            return True
    return False


def _takes_float_scalars(fn) -> bool:
    """Lowerings known to pass scalar arguments through value_loader / _const_node (a symbolic
    float becomes ops.index_expr of its symbol, a runtime kernel argument) or on to an ATen call
    as they are: elementwise ops, factories, extern kernels. Any other lowering given a
    symbolic float falls back to ATen for that op (it may read the scalar's value in Python)."""
    from tracetorch.compiler.backend.lowering import extern, misc
    return (getattr(fn, "__module__", "") == "tracetorch.compiler.backend.lowering.pointwise"
            or fn in (misc.full, misc.full_like, misc.new_full, misc.fill, extern._extern))


_SKIP_PREFIXES = (os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep,
                  os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)


def user_location(node: torch.fx.Node) -> str:
    """'file.py:12: source line' from the node's stack_trace (its last frame), or ''."""
    st = node.meta.get("stack_trace")
    if not st:
        return ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)', st)
    # the user's frame: the innermost one outside torch and outside tracetorch's compiler
    frames = [f for f in frames if not f[0].startswith(_SKIP_PREFIXES)] or frames
    if not frames:
        return ""
    path, line, code = frames[-1]
    return f"{path.rsplit('/', 1)[-1]}:{line}: {code.strip()}"


class GraphLowering:
    def __init__(self, gm: torch.fx.GraphModule, example_inputs):
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.env: dict = {}
        self.buffers: list[ir.Buffer] = []       # everything stored, in program order
        self.name_to_buffer: dict[str, ir.Buffer] = {}
        self.graph_inputs: list[tuple[str, object]] = []   # (name, InputBuffer | sympy expr | None)
        self.outputs: list = []
        self.side_effects: list[str] = []        # buffers kept even if unused (input write-backs)
        self.fallbacks: list[tuple[str, str]] = []
        self.provenance: dict[str, str] = {}     # fx node name -> user location
        self.constants: dict[str, torch.Tensor] = {}   # get_attr tensors, by buffer name
        self.device = None
        self._n = 0
        self._writebacks: list = []
        #: input mutations: the copy_ step that writes each mutated input's final value back
        self.writebacks: list[Writeback] = []
        #: float scalars the wrapper computes before the kernels run: (symbol, format, operands)
        self.scalar_defs: list[tuple] = []
        self._n_float = 0
        #: fx node -> eager's dense dim order (fastest first) where its fake value's differs
        self.eager_orders: dict = {}
        #: id(lazy value) -> (it, its buffer): a value several extern calls read is stored once
        #: (lowering/extern.py)
        self.extern_realized: dict = {}

    # naming and registration ----------------------------------------------------------------
    def new_name(self) -> str:
        name = f"buf{self._n}"
        self._n += 1
        return name

    def register_buffer(self, buf: ir.Buffer) -> ir.Buffer:
        self.buffers.append(buf)
        self.name_to_buffer[buf.name] = buf
        return buf

    # realization -------------------------------------------------------------------------
    def _layout_for(self, size, dtype, device, fx_node):
        v = fx_node.meta.get("val") if fx_node is not None else None
        order = self.eager_orders.get(fx_node) if fx_node is not None else None
        if order is not None and len(order) == len(size):
            return _layout_in_order(size, order, dtype, device)
        if isinstance(v, torch.Tensor) and len(v.shape) == len(size) and all(
                sympy.expand(to_sympy(a) - b) == 0 for a, b in zip(v.shape, size)):
            stride = [to_sympy(s) for s in v.stride()]
            if _is_dense_permutation(size, stride):
                return ir.Layout(size, stride, dtype, device)
            order = ir.dense_order(size, [_without_max1(s) for s in stride])
            if order is not None:
                return _layout_in_order(size, order, dtype, device)
        return ir.Layout.contiguous(size, dtype, device)

    def _note_eager_order(self, node):
        """Where eager's result order differs from the node's fake value (`_CONTIGUOUS_RESULT`,
        `_ITERATOR_ORDER`, a pointwise op on an operand of lower rank: `_broadcasts_rank`), note
        it in `eager_orders` (dims fastest first), and carry it to the pointwise ops that read
        such a result (their fake values follow the wrong strides:
        `torch.div(a, b.t(), rounding_mode="floor").float()`, fuzz 331450)."""
        v = node.meta.get("val")
        if not isinstance(v, torch.Tensor):
            return
        if node.kwargs.get("memory_format", torch.preserve_format) != torch.preserve_format:
            return      # the layout is asked for (conv_layout's clone back to contiguous at an output)
        if node.target in _CONTIGUOUS_RESULT:
            self.eager_orders[node] = list(reversed(range(v.dim())))
            return
        if node.target in _SELF_LAYOUT and node.args and node.args[0] in self.eager_orders:   # self's layout
            self.eager_orders[node] = self.eager_orders[node.args[0]]
            return
        args = [a for a in node.args if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)]
        pointwise = torch.Tag.pointwise in getattr(node.target, "tags", ()) or node.target in _LAYOUT_KEEPING
        if node.target in _ITERATOR_ORDER or (pointwise and (any(a in self.eager_orders for a in args)
                                                             or _broadcasts_rank(args, v))):
            operands = []
            for a in args:
                val = a.meta["val"]
                if a in self.eager_orders:
                    sizes = [_hint(n) for n in val.shape]
                    stride = [0] * len(sizes)
                    acc = 1
                    for d in self.eager_orders[a]:
                        stride[d], acc = acc, acc * sizes[d]
                    operands.append((sizes, stride))
                else:
                    operands.append((val.shape, val.stride()))
            order = _iterator_order(operands, v.shape)
            if order is not None:
                self.eager_orders[node] = order

    def realize(self, value, fx_node=None):
        """Store a lazy value into a new ComputedBuffer (no-op for stored values)."""
        if isinstance(value, (ir.Buffer, ir.ReinterpretView)):
            return value
        if isinstance(value, ir.Loops):
            data = value
        elif isinstance(value, ir.View):
            data = ir.Pointwise(value.get_size(), value.make_loader(), value.get_dtype(), value.get_device(),
                                origins=value.origins, cost=value.op_count())
        else:
            raise TypeError(f"cannot realize {type(value).__name__}")
        layout = self._layout_for(data.get_size(), data.get_dtype(), data.get_device(), fx_node)
        buf = ir.ComputedBuffer(self.new_name(), layout, data, origins=data.origins).in_storage_order()
        return self.register_buffer(buf)

    def store_for_readers(self, value, node=None):
        """Store `value`, the lowered value of fx `node`, once for all of the node's readers: the
        ones lowered after this load the buffer instead of inlining the expression again. An
        extern call's input is stored anyway; a transformer MLP's GELU gradient feeds two matrix
        products and the bias gradient, and was computed three times, once more as a transposed
        copy for the weight gradient's product where a transposed view of the stored value does.
        A view is kept a view of its stored source (zero-copy, eager's strides)."""
        if isinstance(value, ir.View) and node is not None and self.env.get(node) is value:
            kept = self._output_view(node, value)
            if isinstance(kept, ir.ReinterpretView):
                self._rebind(node, kept)
                return kept
        return self._store_node(value, node)

    def _store_node(self, value, node):
        """realize(), and the node's later readers read the buffer (see store_for_readers)."""
        buf = self.realize(value, node)
        if node is not None and self.env.get(node) is value:
            self._rebind(node, buf)
        return buf

    def _rebind(self, node, stored):
        self.env[node] = stored
        if len(node.users) > 1:
            log.debug("value_stored", node=node.name, reason=f"stored for one reader; its {len(node.users)} "
                      "readers load the buffer instead of recomputing it")

    def new_float_symbol(self):
        sym = ir.float_symbol(f"fv{self._n_float}")
        self._n_float += 1
        return sym

    def realize_input(self, value):
        return self.realize(value)

    # the walk ------------------------------------------------------------------------------
    def run(self):
        written = _writeback_sources(self.gm.graph)
        for i, node in enumerate(self.gm.graph.nodes):
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "get_attr":
                self._get_attr(node)
            elif node.op == "call_function":
                loc = user_location(node)
                if loc:
                    self.provenance[node.name] = loc
                self._note_eager_order(node)
                self.env[node] = self._call(node)
                if node in written and isinstance(self.env[node], ir.Loops):
                    # a mutated input's new value is stored anyway: stored where it is computed,
                    # its kernel writes it straight into the input (scheduler/memory.py) and its
                    # readers load it; left lazy, they inlined it and the write-back realized it
                    # again after everything else, a second kernel re-reading its operands
                    self._store_node(self.env[node], node)
            elif node.op == "output":
                self._output(node)
            else:
                raise GraphFallback(f"unsupported FX node kind {node.op}")
        return self

    def _placeholder(self, node):
        idx = len(self.graph_inputs)
        v = node.meta.get("val")
        if v is None and idx < len(self.example_inputs):
            v = self.example_inputs[idx]
        name = f"arg{idx}_1"
        if isinstance(v, torch.Tensor):
            buf = ir.InputBuffer(name, layout_from_meta(v), origins=[node.name])
            buf.storage_offset = to_sympy(v.storage_offset())   # as traced (as_strided is absolute)
            self.graph_inputs.append((name, buf))
            self.name_to_buffer[name] = buf
            self.env[node] = buf
            self.device = self.device or v.device
        elif isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
            expr = to_sympy(v)
            self.graph_inputs.append((name, expr))
            self.env[node] = expr
        elif isinstance(v, torch.SymFloat) or (isinstance(v, float) and node.users):
            # a runtime float: kernels take it as a double argument, ATen calls as a Python float
            sym = self.new_float_symbol()
            self.graph_inputs.append((name, sym))
            self.env[node] = sym
            log.debug("float_scalar_input", input=name, node=node.name, symbol=sym.name,
                      kind=type(v).__name__, users=len(node.users))
        elif v is None or not node.users:
            # None, or a scalar the trace baked in as a constant (the aot input check makes
            # sure later calls pass the same value)
            self.graph_inputs.append((name, None))
            self.env[node] = v
        else:
            # a float/bool/... input would be baked in as the example's value: not safe
            raise GraphFallback(f"graph input {node.name} of type {type(v).__name__} (only tensors and ints)")

    def _get_attr(self, node):
        value = getattr(self.gm, node.target)
        if not isinstance(value, torch.Tensor):
            self.env[node] = value
            return
        name = constant_name(node)
        buf = ir.ConstantBuffer(name, layout_from_meta(value), value, origins=[node.name])
        self.constants[name] = value
        self.name_to_buffer[name] = buf
        self.env[node] = buf

    def _args(self, node):
        def load(a):
            return self.env[a] if isinstance(a, torch.fx.Node) else a
        args = torch.fx.node.map_aggregate(node.args, load)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, load)
        return list(args), dict(kwargs)

    def _call(self, node):
        target = node.target
        args, kwargs = self._args(node)
        if target is operator.getitem:
            return args[0][args[1]]
        if target in _FLOAT_SCALAR_OPS and (isinstance(node.meta.get("val"), (torch.SymFloat, float))
                                            or has_float_scalar(args)):
            return self._float_scalar(node, args)
        if target in _INT_FROM_FLOAT_OPS and len(args) == 1 and has_float_scalar(args):
            return self._int_of_float(node, args)
        if target in _SIGNED_INT_OPS and _maybe_negative(args):
            return self._signed_int(node, args)
        if target is aten._local_scalar_dense.default and isinstance(args[0], ir.InputBuffer):
            return self._item_of_input(node, args)
        if target in _SYM_OPS:
            return _SYM_OPS[target](*args)
        if target in (aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default,
                      aten.sym_storage_offset.default):
            return self._sym_query(target, args, node)
        if not isinstance(target, torch._ops.OpOverload):
            raise GraphFallback(f"call of {getattr(target, '__name__', target)} in the graph")
        val = node.meta.get("val")
        if _has_unbacked(val):
            raise GraphFallback(f"{target} has a data-dependent output size")
        ctx = Ctx(self, node)
        if target is aten.copy_.default and not _is_input(args[0]) and _dead_after_copy(node):
            # a decomposition's copy_ into a temporary that nothing reads afterwards (e.g. the
            # running-stat update of batch norm on instance_norm's repeated stats): its only
            # observable effect is its result, the copied value
            return self._after_lowering(LOWERINGS[aten.copy.default](ctx, *args, **kwargs), node)
        if target in _METADATA_INPLACE:
            # changes only sizes/strides of its argument (the data stays where it is, so kernels
            # that index the old buffer with its compile-time layout still read the right
            # elements): the ATen op alone runs, as eager's does, not the whole graph
            return self._fallback(ctx, node, args, kwargs, "in-place metadata op")
        if target._schema.is_mutable and not (target is aten.copy_.default and _is_input(args[0])):
            # functionalization removes mutation, but a decomposition can bring an in-place op
            # back (e.g. copy_ into a view of a clone); lowering it as a value would be wrong
            raise GraphFallback(f"in-place op {target} in the traced graph")
        if target is aten.copy_.default:
            # the aot stage's write-back of a mutated input: it must run after everything that
            # reads the input's old value, including outputs realized at the very end, so it
            # is emitted after the outputs (see _output)
            self._writebacks.append((ctx, args, kwargs))
            return args[0]
        if _is_complex(val) or any(isinstance(a, ir.IRNode) and a.get_dtype().is_complex for a in args):
            return self._fallback(ctx, node, args, kwargs, "complex dtype")
        if _is_empty(val):
            # nothing to compute: an empty buffer of the right size and dtype (its loop runs zero
            # times). Lowering the op itself would index zero-size inputs (divisions by a zero
            # size in views/strides gave NaN index expressions).
            from tracetorch.compiler.backend.lowering.misc import zeros
            return self._after_lowering(zeros(ctx), node)
        fn = LOWERINGS.get(target)
        if fn is None:
            return self._fallback(ctx, node, args, kwargs, "no lowering")
        if has_float_scalar(args, kwargs) and not _takes_float_scalars(fn):
            return self._fallback(ctx, node, args, kwargs, "symbolic float argument (the lowering needs its value)")
        try:
            result = fn(ctx, *args, **kwargs)
        except NotLowerable as e:
            return self._fallback(ctx, node, args, kwargs, f"not lowerable: {e}")
        except (GraphFallback, KeyboardInterrupt):
            raise
        except Exception as e:  # a lowering bug must not make the compile fail
            if not config.backend.fallback_on_error:
                raise
            log.warning("lowering_failed", op=str(target), node=node.name, error=f"{type(e).__name__}: {e}")
            return self._fallback(ctx, node, args, kwargs, f"lowering raised {type(e).__name__}: {e}")
        return self._after_lowering(result, node)

    def _after_lowering(self, result, node):
        if isinstance(result, tuple):
            # each element stands for the getitem node that takes it: its fake value gives the
            # stored layout (max_pool2d's values and indices keep a channels_last input's layout)
            # and its users the inlining decision
            parts = {u.args[1]: u for u in node.users if u.target is operator.getitem} if node is not None else {}
            return tuple(self._after_lowering(r, parts.get(i)) for i, r in enumerate(result))
        if isinstance(result, ir.Reduction):
            return self.realize(result, node)
        if isinstance(result, (ir.Pointwise, ir.View)):
            n_users = len(node.users) if node is not None else 2
            cost = result.op_count()
            why = None
            if cost > INLINE_MAX_COST:
                why = f"expression of {cost} ops (inline limit {INLINE_MAX_COST})"
            elif n_users > 1 and cost > INLINE_MAX_COST_SHARED:
                why = f"read by {n_users} users, {cost} ops (shared inline limit {INLINE_MAX_COST_SHARED})"
            elif n_users > 1 and (full := self._full_reads(result)) > INLINE_MAX_FULL_READS_SHARED:
                why = (f"read by {n_users} users, loads {full} full-size buffers "
                       f"(shared limit {INLINE_MAX_FULL_READS_SHARED}): each reader would load them again")
            if why is not None:
                log.debug("value_stored", node=node.name if node is not None else None, reason=why)
                if isinstance(result, ir.View) and node is not None:
                    # store the viewed value and view the buffer (eager's strides, no dense copy
                    # of an expand: `cat(...).expand(2, ...)` read twice came back with stride 10
                    # where eager's is 0, fuzz 331850)
                    kept = self._output_view(node, result)
                    if isinstance(kept, ir.ReinterpretView):
                        return kept
                return self.realize(result, node)
        return result

    def _full_reads(self, value) -> int:
        """How many stored buffers with as many elements as `value` its inlined expression loads
        (small ones, a bias or a scale, stay in cache and do not count)."""
        size = ir.product(value.get_size())
        if size == 0:
            return 0
        deps = ops_module.DependencyHandler()
        idx = [index_var("i", k) for k in range(len(value.get_size()))]
        try:
            with ops_module.set_ops_handler(deps):
                value.make_loader()(idx)
        except Exception:    # an expression the dependency pass cannot walk: no opinion
            return 0
        full = 0
        for name in dict.fromkeys(n for n, _ in deps.loads):
            buf = self.name_to_buffer.get(name)
            if buf is None:
                continue
            ratio = sympy.simplify(ir.product(buf.get_size()) / size)    # symbolic sizes too
            if ratio.is_number and ratio >= sympy.Rational(1, 2):
                full += 1
        return full

    def _float_scalar(self, node, args):
        """A float-valued scalar op (on SymFloats, or an int division): the wrapper computes it in
        Python before the kernels run, bound to a new float symbol."""
        val = node.meta.get("val")
        if not isinstance(val, (torch.SymFloat, float)):
            raise GraphFallback(f"{getattr(node.target, '__name__', node.target)} of a float scalar gives "
                                f"{type(val).__name__} (only float results of float scalars are compiled)")
        if any(isinstance(a, ir.IRNode) for a in args):
            raise GraphFallback(f"scalar op {node.name} on a tensor")
        return self._wrapper_float(node, _FLOAT_SCALAR_OPS[node.target], args, "float_scalar_op")

    def _signed_int(self, node, args):
        """Python's // or % of ints that may be negative (`-2 // n`; `_maybe_negative` let no
        tensor through): the index forms print as C's truncating division."""
        return self._wrapper_int(node, _SIGNED_INT_OPS[node.target], args, "signed_int_scalar_op")

    def _int_of_float(self, node, args):
        """An int computed from a float scalar (floor/ceil/trunc/int/round)."""
        if not isinstance(node.meta.get("val"), (torch.SymInt, int)):
            raise GraphFallback(f"{node.target} of a float scalar gives {type(node.meta.get('val')).__name__}")
        return self._wrapper_int(node, _INT_FROM_FLOAT_OPS[node.target], args, "int_of_float_scalar")

    def _item_of_input(self, node, args):
        """`.item()` of a one-element graph input: torch.compile(dynamic=True) passes a module's
        Python float (a LayerNorm's eps) as a 0-d tensor whose value the graph reads. The wrapper
        reads it before the kernels run (a host read; on a CUDA input, a synchronisation) into a
        scalar symbol the kernels take; ATen's call did the same."""
        val = node.meta.get("val")
        if isinstance(val, (torch.SymFloat, float)):
            return self._wrapper_float(node, "{0}.item()", args, "input_item_read")
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            return self._wrapper_int(node, "{0}.item()", args, "input_item_read")
        raise GraphFallback(f"{node.name}: .item() of an input gives {type(val).__name__} "
                            "(float and int values are compiled)")

    def _wrapper_float(self, node, fmt: str, args, event: str) -> sympy.Symbol:
        """A float the wrapper computes in Python (`fmt` over the operands) before the kernels
        run, into a new float symbol (kernels take it as a double argument)."""
        sym = self.new_float_symbol()
        self.scalar_defs.append((sym, fmt, list(args)))
        log.debug(event, node=node.name, op=getattr(node.target, "__name__", str(node.target)), symbol=sym.name)
        return sym

    def _wrapper_int(self, node, fmt: str, args, event: str) -> sympy.Symbol:
        """An int the wrapper computes in Python (`fmt` over the operands) before the kernels run,
        into a new integer symbol (a value in kernels; a size of it has no binding and runs eagerly)."""
        sym = sympy.Symbol(f"iv{self._n_float}", integer=True)
        self._n_float += 1
        self.scalar_defs.append((sym, fmt, list(args)))
        log.debug(event, node=node.name, op=getattr(node.target, "__name__", str(node.target)), symbol=sym.name)
        return sym

    def _sym_query(self, target, args, node=None):
        x = args[0]
        if target is aten.sym_size.int:
            return x.get_size()[args[1]]
        if target is aten.sym_numel.default:
            return ir.product(x.get_size())
        if isinstance(x, (ir.Buffer, ir.ReinterpretView)):
            layout = x.layout
            return layout.stride[args[1]] if target is aten.sym_stride.int else layout.offset
        val = node.args[0].meta.get("val") if node is not None and isinstance(node.args[0], torch.fx.Node) else None
        if isinstance(val, torch.Tensor):
            # a lazy value has no storage yet: the program asks for eager's stride (a number it
            # computes with, e.g. for empty_strided), which the traced metadata holds
            return to_sympy(val.stride()[args[1]] if target is aten.sym_stride.int else val.storage_offset())
        raise GraphFallback("stride of a lazy value")

    def _fallback(self, ctx, node, args, kwargs, reason):
        target = node.target
        self.fallbacks.append((str(target), reason))
        logs.artifact("perf_hint", lambda: {"op": str(target), "node": node.name, "reason": reason,
                                            "hint": "ATen fallback: the op runs as a separate call"})
        logs.artifact("perf_hints", lambda: f"fallback to ATen for {target} (node {node.name}): {reason}")
        log.debug("fallback_kernel", op=str(target), node=node.name, reason=reason)
        return make_extern(ctx, args, kwargs, cls=ir.FallbackKernel, reason=reason)

    def _output_view(self, node, value, depth=0):
        """A returned view of a lazy value as eager returns it: the value is stored and the view
        ops are lowered again on the stored buffer, which makes them zero-copy ReinterpretViews
        with eager's strides (an expand's stride 0, a slice's step) instead of a dense copy."""
        if depth <= 8 and node.op == "call_function" and node.target is operator.getitem \
                and isinstance(node.args[0], torch.fx.Node) and node.args[0].target in _SPLIT_OPS:
            # one piece of a split (`x.split(2)[-1]`): the split lowered again on the stored
            # value, then the piece (it came back dense where eager's is a strided view: 430423)
            parts = self._output_view(node.args[0], self.env.get(node.args[0]), depth + 1)
            piece = parts[node.args[1]] if isinstance(parts, (list, tuple)) else None
            return piece if isinstance(piece, ir.ReinterpretView) else value
        if depth > 8 or not (node.op == "call_function" and node.target in _VIEW_OPS
                             and isinstance(node.args[0], torch.fx.Node) and node.target in LOWERINGS):
            return value
        src = node.args[0]
        base = self.env.get(src)
        if isinstance(base, ir.View):
            base = self._output_view(src, base, depth + 1)
        if isinstance(base, (ir.Loops, ir.View)):
            base = self._store_node(base, src)
        if not isinstance(base, (ir.Buffer, ir.ReinterpretView)):
            return value
        if node.target is aten.alias.default:
            # the functionalized graph returns `alias(view)`: the view itself, not a copy of it
            # (lowered as a pointwise identity, `v[::2]` came back dense: fuzz 431942)
            return base if isinstance(base, ir.ReinterpretView) else value
        args, kwargs = self._args(node)
        try:
            again = LOWERINGS[node.target](Ctx(self, node), base, *args[1:], **kwargs)
        except NotLowerable:
            return value
        if isinstance(again, ir.ReinterpretView) or (isinstance(again, (list, tuple)) and again
                                                     and all(isinstance(p, ir.ReinterpretView) for p in again)):
            log.debug("output_view_kept", node=node.name,
                      base=base.name if isinstance(base, ir.Buffer) else base.data.name)
            return again
        return value

    def _output(self, node):
        outs = node.args[0]
        values = []
        for a in (outs if isinstance(outs, (list, tuple)) else [outs]):
            v = self.env[a] if isinstance(a, torch.fx.Node) else a
            if isinstance(a, torch.fx.Node) and (isinstance(v, ir.View) or a.target is aten.alias.default
                                                 or a.target is operator.getitem):
                v = self._output_view(a, v)
            if isinstance(v, ir.IRNode):
                v = self.realize(v, a if isinstance(a, torch.fx.Node) else None)
            values.append(v)
        self.outputs = values
        # every new value is realized before the first write-back is emitted: a source realized
        # after one (its kernel recomputing an inlined value from the input) read the input's
        # new value where it needs the old one (`s.add_(s); a.add_(s)` added 2 * s twice)
        pending = []
        for ctx, args, kwargs in self._writebacks:
            src, src_node = args[1], ctx.node.args[1]
            inner = _copied_value(ctx.node.args[0], src_node)
            if inner is not None and isinstance(self.env.get(inner), ir.IRNode):
                # copy_(x, copy(x, v)) with v already in x's layout: v itself is the new value.
                # The identity copy realized here, after every computation, was one more
                # kernel per write-back, reading v from a buffer that v's own kernel could
                # have stored straight into x (the compiled optimizer step stored each new
                # parameter state twice and allocated a temporary for it)
                src, src_node = self.env[inner], inner
            if isinstance(src, ir.IRNode):
                src = self.realize(src, src_node if isinstance(src_node, torch.fx.Node) else None)
            pending.append((ctx, (args[0], src, *args[2:]), kwargs))
        for ctx, args, kwargs in pending:
            out = make_extern(ctx, args, kwargs, cls=ir.FallbackKernel, reason="input mutation write-back")
            self.side_effects.append(out.name)
            dst, src = out.args[0], out.args[1]
            if isinstance(dst, ir.InputBuffer) and isinstance(src, ir.ComputedBuffer):
                # memory planning may let src's kernel store straight into dst, which makes
                # this copy_ a no-op (see scheduler/memory.py: writeback_in_place)
                self.writebacks.append(Writeback(out.name, dst.name, src.name))


def _writeback_sources(graph) -> set:
    """The fx nodes whose values the graph's input write-backs (copy_ into a placeholder) store,
    seen through an identity copy (_copied_value)."""
    out = set()
    for n in graph.nodes:
        if n.op == "call_function" and n.target is aten.copy_.default and len(n.args) >= 2 \
                and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder" \
                and isinstance(n.args[1], torch.fx.Node):
            out.add(_copied_value(n.args[0], n.args[1]) or n.args[1])
    return out


def _copied_value(dst, src):
    """v when `src` is aten.copy(dst, v) and v already has dst's size, stride and dtype (the
    copy changes nothing but the tensor's identity), else None."""
    if not (isinstance(src, torch.fx.Node) and src.target is aten.copy.default
            and len(src.args) >= 2 and src.args[0] is dst and isinstance(src.args[1], torch.fx.Node)):
        return None
    want, have = dst.meta.get("val"), src.args[1].meta.get("val")
    if not (isinstance(want, torch.Tensor) and isinstance(have, torch.Tensor)):
        return None
    same = (want.dtype == have.dtype and want.device == have.device
            and tuple(want.shape) == tuple(have.shape) and tuple(want.stride()) == tuple(have.stride()))
    return src.args[1] if same else None


@dataclasses.dataclass(frozen=True)
class Writeback:
    """`step` (an aten.copy_ FallbackKernel) copies buffer `src` into graph input `dst`."""
    step: str
    dst: str
    src: str


def constant_name(node) -> str:
    return f"const_{node.name}"


def graph_constants(gm) -> dict:
    """Buffer name -> tensor of every get_attr tensor of gm (bound into the output code's
    `constants` when it is loaded, also from the cache)."""
    out = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            v = getattr(gm, node.target, None)
            if isinstance(v, torch.Tensor):
                out[constant_name(node)] = v
    return out


def _is_dense_permutation(size, stride) -> bool:
    """Strides are a permutation of some contiguous strides (ir.dense_order). Symbolic sizes
    compare as expressions, so a pointwise result on a transposed input keeps eager's order after
    the recompile at new sizes too (it came back contiguous there: fuzz 320052/320088)."""
    return ir.dense_order(size, stride) is not None


def _without_max1(stride):
    """A fake value's stride with every Max(1, n) read as n. FakeTensor (as ATen) builds a dense
    stride from Max(1, size) so that a zero size keeps strides positive; a size such as
    (s0 + 1)//2 is not known to be >= 1, so the Max stays and the strides did not compare as a
    permutation of dense ones: the result came back contiguous where eager keeps the input's
    order (fuzz 340223, `x[::2]` of a column-major x at new sizes). With a zero size the tensor
    is empty, and its strides are not observable."""
    if not isinstance(stride, sympy.Basic):
        return stride

    def unmax(*args):
        rest = [a for a in args if a != 1]
        return rest[0] if len(args) == 2 and len(rest) == 1 else sympy.Max(*args)
    return stride.replace(sympy.Max, unmax)


#: ops whose eager kernel allocates a contiguous result where FakeTensor's value follows the
#: input's order: pow(Scalar, Tensor) is meta'd contiguous in ATen (`0.5 ** x.t()`: fuzz 331538)
_CONTIGUOUS_RESULT = {aten.pow.Scalar}

#: pointwise ops whose FakeTensor value (from a Python reference) orders mixed-layout operands
#: unlike ATen's TensorIterator: `a // b` with a contiguous and b transposed is contiguous in
#: eager, b's order in the fake value (fuzz 331733)
_ITERATOR_ORDER = {aten.div.Tensor_mode, aten.div.Scalar_mode, aten.floor_divide.default, aten.copysign.Tensor,
                   aten.copysign.Scalar}


#: non-pointwise-tagged ops whose result keeps its operand's order
_LAYOUT_KEEPING = {aten._to_copy.default}

#: ops whose result is their first argument written (functionalized in-place writes): it keeps
#: that argument's eager order (`v = a // b.t(); v[1:].addcmul_(...)` left v in the fake's order
#: behind a slice_scatter, and a view of it was returned with other strides: fuzz 460345)
_SELF_LAYOUT = {aten.copy.default, aten.slice_scatter.default, aten.select_scatter.default,
                aten.diagonal_scatter.default}


def _hint(x) -> int:
    if isinstance(x, torch.SymInt):
        return int(x.node.hint)
    if isinstance(x, sympy.Expr):
        raise TypeError("a symbolic stride without a hint")
    return int(x)


def _iterator_order(vals, shape) -> list[int] | None:
    """The dims of a TensorIterator result from fastest to slowest, as ATen orders them for
    inputs `vals` ((shape, stride) pairs) broadcast to `shape` (reorder_dimensions: an insertion sort in which the first
    operand whose strides differ decides; broadcast dims do not vote). Strides compare at the
    traced sizes (their hints)."""
    try:
        nd = len(shape)
        sizes = [_hint(n) for n in shape]
        operands = []
        for shape_t, stride_t in vals:
            off = nd - len(shape_t)
            st = [0] * nd
            for d in range(len(shape_t)):
                n = _hint(shape_t[d])
                st[off + d] = 0 if (n == 1 and sizes[off + d] != 1) else _hint(stride_t[d])
            operands.append(st)
    except (TypeError, ValueError, RuntimeError):
        return None

    def should_swap(d0, d1):
        for st in operands:
            if st[d0] == 0 or st[d1] == 0:
                continue
            if st[d0] != st[d1]:
                return 1 if st[d0] > st[d1] else -1
            if sizes[d0] > sizes[d1]:
                return 1
        return 0

    perm = list(reversed(range(nd)))
    for i in range(1, nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def _broadcasts_rank(args, val) -> bool:
    """A tensor operand of lower rank than the result. FakeTensor orders such an elementwise
    result by the operands expanded to the result's rank, where the new leading dims of size 1
    carry strides (size * stride of the next dim) that vote in the order; TensorIterator gives
    them stride 0, so they do not vote, and size-1 dims of the other operands decide ties
    (`b % f` with b (2, 3) contiguous and f (1, 1, 1, 3) of strides (1, 1, 1, 1): eager's
    result is column-major, the fake value row-major: fuzz 340182, 340691). `_iterator_order`
    follows TensorIterator."""
    return any(a.meta["val"].dim() < val.dim() for a in args)


def _layout_in_order(size, order, dtype, device) -> ir.Layout:
    """A dense layout whose dims run from fastest to slowest in `order`."""
    stride = [sympy.Integer(0)] * len(size)
    acc = sympy.Integer(1)
    for d in order:
        stride[d] = acc
        acc = acc * size[d]
    return ir.Layout(list(size), stride, dtype, device)


#: ops whose output aliases their first argument (a write through one is seen by the others)
_VIEW_OPS = {getattr(aten, n).default for n in ("view", "_unsafe_view", "permute", "expand", "unsqueeze", "t",
                                                 "alias", "as_strided", "diagonal", "squeeze", "transpose",
                                                 "slice", "select", "unfold", "view_as_real")
             if hasattr(aten, n) and hasattr(getattr(aten, n), "default")}
#: view ops whose result is a list of views (an output takes one piece with getitem)
_SPLIT_OPS = {aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int}
_VIEW_OPS |= _SPLIT_OPS | {aten.squeeze.dim, aten.squeeze.dims, aten.transpose.int, aten.slice.Tensor,
                           aten.select.int, aten.reshape.default, aten.view.dtype}


def _is_view(n) -> bool:
    return n.op == "call_function" and (n.target in _VIEW_OPS or n.target is operator.getitem)


def _is_empty(val) -> bool:
    """A tensor value with a static zero element count."""
    if not isinstance(val, torch.Tensor):
        return False
    n = val.numel()
    return isinstance(n, int) and n == 0


def _dead_after_copy(copy_node: torch.fx.Node) -> bool:
    """copy_(dst, src): dst's storage is a graph temporary (not an input, constant or graph
    output) and nothing reads it or any alias of it after the copy_, except through the copy_'s
    own result."""
    dst = copy_node.args[0]
    if not isinstance(dst, torch.fx.Node):
        return False
    base = dst
    while _is_view(base):
        if not isinstance(base.args[0], torch.fx.Node):
            return False
        base = base.args[0]
    if base.op != "call_function" or (isinstance(base.target, torch._ops.OpOverload)
                                      and base.target._schema.is_mutable):
        return False
    order = {n: i for i, n in enumerate(copy_node.graph.nodes)}
    here = order[copy_node]
    aliases, todo = set(), [base]
    while todo:
        n = todo.pop()
        if n in aliases:
            continue
        aliases.add(n)
        todo.extend(u for u in n.users if _is_view(u))
    for a in aliases:
        for u in a.users:
            if u is not copy_node and u not in aliases and order[u] > here:
                return False
    return True


def _has_unbacked(val) -> bool:
    vals = val if isinstance(val, (list, tuple)) else [val]
    for v in vals:
        if isinstance(v, torch.Tensor):
            for s in v.shape:
                if isinstance(s, torch.SymInt) and any(str(f).startswith("u") for f in s.node.expr.free_symbols):
                    return True
    return False


def _is_complex(val) -> bool:
    vals = val if isinstance(val, (list, tuple)) else [val]
    return any(isinstance(v, torch.Tensor) and v.dtype.is_complex for v in vals)
