"""The FX graph being built while tracing, with fake-tensor propagation and guards.

Each tensor operation the evaluator meets is run on FakeTensors (shapes, dtypes, devices, no
data) and recorded as an FX node whose meta['example_value'] is the fake result. Tensors read
from the frame become placeholders; their sizes are symbolic (a ShapeEnv SymInt) for the dims
listed in `dynamic_dims`, so that the produced guards carry the symbolic constraints. Python
ints/floats whose sources are in `dynamic_dims.scalars` (frontend/dynamic.py) become placeholders
too, with a SymInt/SymFloat example value, guarded by their type.
"""
from __future__ import annotations

import contextlib
import operator

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from tracetorch.compiler.frontend import dynamic
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.guards import Guard
from tracetorch.compiler.frontend.source import shape_env_source

from tracetorch import logs

log = logs.get_logger(__name__)


class OutputGraph:
    def __init__(self, dynamic_dims: dict[str, set[int]]):
        self.graph = torch.fx.Graph()
        self.dynamic_dims = dynamic_dims or {}
        self.dynamic_scalars = frozenset(getattr(dynamic_dims, "scalars", ()) or ())
        # A ShapeEnv only when something is dynamic: creating one imports torch._dynamo's
        # modules inside torch (seconds, cold), and static captures never need symbols.
        self.shape_env = ShapeEnv() if any(self.dynamic_dims.values()) or self.dynamic_scalars \
            else None
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=False)
        self.specialized_symbols = set()  # sympy symbols calls.specialize() fixed to a value
        self.input_sources = []          # Source per placeholder, in order
        self.example_inputs = []         # the real tensors, in order
        self.input_fakes = []
        self._inputs_by_source: dict[str, V.Variable] = {}
        self.guards: dict[tuple, Guard] = {}
        self.grad_enabled = torch.is_grad_enabled()
        self.location = None             # "file:line" of the instruction being traced
        self.tracer = None               # the Tracer stepping it (for node stack traces)
        self.op_count = 0

    # ---- guards --------------------------------------------------------------------------
    def add_guard(self, source, kind: str, expected):
        name = source if isinstance(source, str) else source.name()
        # one guard per source and kind; HASATTR guards one attribute name each
        key = (name, kind, expected[0]) if kind == "HASATTR" else (name, kind)
        if key not in self.guards:
            self.guards[key] = Guard(name, kind, expected, self.location)

    # ---- inputs --------------------------------------------------------------------------
    def add_input(self, tensor: torch.Tensor, source) -> V.TensorVariable:
        name = source.name()
        if name in self._inputs_by_source:
            return self._inputs_by_source[name]
        for other_source, other in zip(self.input_sources, self.example_inputs):
            if other is tensor:
                # the same tensor object under two sources (tied weights): guard that it stays
                # so and use the one input, as Dynamo does; two inputs would each get the whole
                # gradient of the tensor from AOT autograd, which sums them (twice the gradient)
                self.add_guard(f"{name} is {other_source.name()}", "SYMBOLIC",
                               f"{name} is {other_source.name()}")
                var = self._inputs_by_source[other_source.name()]
                self._inputs_by_source[name] = var
                log.debug("dedup_graph_input", source=name, same_as=other_source.name())
                return var
        dims = set(self.dynamic_dims.get(name, ()))
        dims = {d for d in dims if 0 <= d < tensor.dim()}
        if dims:
            ctx = StatelessSymbolicContext(
                dynamic_sizes=[DimDynamic.DYNAMIC if i in dims else DimDynamic.STATIC
                               for i in range(tensor.dim())],
                constraint_sizes=[None] * tensor.dim())
            fake = self.fake_mode.from_tensor(tensor, source=shape_env_source(name),
                                              symbolic_context=ctx)
        else:
            fake = self.fake_mode.from_tensor(tensor, static_shapes=True)
        node = self._placeholder(_safe_name(source.render() if hasattr(source, "render") else name))
        node.meta["example_value"] = fake
        node.meta["source"] = name
        var = V.TensorVariable(node, source)
        var.python_cls = type(tensor)      # Tensor or Parameter, for isinstance/type()
        self._inputs_by_source[name] = var
        self.input_sources.append(source)
        self.example_inputs.append(tensor)
        self.input_fakes.append(self._own_alias(fake))
        self.add_guard(source, "TENSOR_MATCH", tensor_expected(tensor, _symbolic_dims(name, dims, fake), fake))
        return var

    def _own_alias(self, fake):
        """What produce_guards reads for an input: an alias of its fake, never handed out, so
        the metadata stays the input's at entry whoever changes the placeholder's fake in
        place (AOT traces the graph's t_/unsqueeze_ of an input on it, before the guards are
        produced at the end of the capture). Without a ShapeEnv no guard reads it."""
        if self.shape_env is None:
            return fake
        with self.fake_mode, self._dispatcher():
            return torch.ops.aten.alias(fake)

    def real_input(self, var):
        """The real tensor behind a graph-input TensorVariable, else None."""
        if var.source is None or var.node.op != "placeholder":
            return None
        name = var.source.name()
        for src, real in zip(self.input_sources, self.example_inputs):
            if src.name() == name:
                return real
        return None

    def add_scalar_input(self, value, source) -> V.SymNodeVariable:
        """An int/float of the frame marked dynamic: a placeholder whose example value is a
        SymInt/SymFloat backed by `value`, guarded by its exact type (the ShapeEnv adds the
        constraints the graph's use of it creates, e.g. a branch on it)."""
        name = source.name()
        if name in self._inputs_by_source:
            return self._inputs_by_source[name]
        env_source = shape_env_source(name)
        sym = self.shape_env.create_unspecified_symbol(value, env_source,
                                                       dynamic_dim=DimDynamic.DYNAMIC)
        if type(value) is int:
            example = self.shape_env.create_symintnode(sym, hint=value, source=env_source)
        else:
            example = self.shape_env.create_symfloatnode(sym, hint=value, source=env_source)
        node = self._placeholder(_safe_name(source.render() if hasattr(source, "render") else name))
        node.meta["example_value"] = example
        node.meta["source"] = name
        var = V.SymNodeVariable(node, source)
        self._inputs_by_source[name] = var
        self.input_sources.append(source)
        self.example_inputs.append(value)
        self.input_fakes.append(example)
        self.add_guard(source, "TYPE_MATCH", type(value))
        log.debug("dynamic_scalar_input", source=name, type=type(value).__name__,
                  symbol=str(sym), hint=value)
        return var

    def _placeholder(self, target):
        """A new placeholder after the existing ones (inputs are met in the middle of tracing)."""
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        taken = {n.target for n in placeholders}
        base, i = target, 1
        while target in taken:          # two sources may render to one name: keep args unique
            target, i = f"{base}_{i}", i + 1
        if placeholders:
            ctx_mgr = self.graph.inserting_after(placeholders[-1])
        else:
            first = next(iter(self.graph.nodes), None)
            ctx_mgr = self.graph.inserting_before(first)
        with ctx_mgr:
            return self.graph.placeholder(target)

    # ---- recording operations ------------------------------------------------------------
    def _dispatcher(self):
        """With symbolic sizes, fake propagation runs under the Python dispatcher (as Dynamo's
        does): composite ops then decompose through their symbolic-aware Python
        implementations instead of C++ kernels that pin sizes to their values (F.pad)."""
        if self.shape_env is None:
            return contextlib.nullcontext()
        from torch._dispatch.python import enable_python_dispatcher
        return enable_python_dispatcher()

    def call(self, kind: str, target, args: tuple, kwargs: dict) -> V.Variable:
        """Record `target(*args, **kwargs)` (kind: call_function / call_method) and return the
        symbolic result."""
        node_args = to_node_args(args)
        node_kwargs = to_node_args(kwargs)
        fake_args = to_fake_args(args)
        fake_kwargs = to_fake_args(kwargs)
        operand = fake_args[0] if changes_metadata(target) and args \
            and isinstance(args[0], V.TensorVariable) else None
        try:
            with self.fake_mode, torch.set_grad_enabled(self.grad_enabled), self._dispatcher():
                if operand is not None:
                    fake_args = (torch.ops.aten.alias(operand), *fake_args[1:])
                if kind == "call_method":
                    example = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    example = target(*fake_args, **fake_kwargs)
        except Unsupported:
            raise
        except Exception as e:  # data-dependent output, or a user error eager will raise
            raise Unsupported(f"{_target_name(target)} failed on fake tensors "
                              f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
        if _has_unbacked(example):
            raise Unsupported(f"{_target_name(target)} has a data-dependent output shape")
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        node.meta["example_value"] = example
        self._stamp(node)
        self.op_count += 1
        if operand is not None:
            self._metadata_changed(node, operand, fake_args[0])
        return self.wrap_result(node, example)

    def _metadata_changed(self, node, old, new):
        """An in-place metadata op (`node`) ran on `new`, a fresh alias of the fake `old`, so
        `old` keeps its metadata: a placeholder's fake must stay the input as it enters the
        graph (produce_guards binds its sizes to L['x'].size()[i]; AOT traces from it), while
        the rest of the trace must see the change. Every node that holds the same tensor as
        `old` (its placeholder, in-place ops that returned it) now holds `new`."""
        holders = [n for n in self.graph.nodes if n.op != "output" and n is not node
                   and n.meta.get(V.CURRENT_VALUE, n.meta.get("example_value")) is old]
        for n in holders:
            n.meta[V.CURRENT_VALUE] = new
        log.debug("inplace_metadata_op", op=_target_name(node.target), node=node.name,
                  holders=[n.name for n in holders], shape_before=str(tuple(old.shape)),
                  shape_after=str(tuple(new.shape)),
                  reason="traced on an alias of the tensor's fake: the nodes holding it see the "
                         "new metadata from here on, their example_value keeps the old (a "
                         "graph input's guards and AOT's fake input are the input at entry)")

    def _stamp(self, node):
        """Where in the user's code the node comes from (torch.fx's node.meta['stack_trace']:
        the backend names these lines in its kernels' provenance comments)."""
        if self.tracer is not None:
            node.meta["stack_trace"] = self.tracer.stack_trace()

    def record_grad_mode(self, enabled: bool):
        """Put a grad-mode switch into the graph (Dynamo does the same) and follow it."""
        node = self.graph.call_function(torch._C._set_grad_enabled, (enabled,))
        node.meta["example_value"] = None
        self._stamp(node)
        self.grad_enabled = enabled

    def wrap_result(self, node, example) -> V.Variable:
        if isinstance(example, torch.Tensor):
            return V.TensorVariable(node)
        if isinstance(example, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            if example.node.is_constant() if hasattr(example.node, "is_constant") else False:
                return V.ConstantVariable(example.node.constant_value())
            return V.SymNodeVariable(node)
        if isinstance(example, (tuple, list)):
            items = []
            for i, ex in enumerate(example):
                sub = self.graph.call_function(operator.getitem, (node, i))
                sub.meta["example_value"] = ex
                if "stack_trace" in node.meta:
                    sub.meta["stack_trace"] = node.meta["stack_trace"]
                items.append(self.wrap_result(sub, ex))
            if isinstance(example, torch.Size):
                return V.SizeVariable(items)
            if hasattr(type(example), "_fields") or type(example).__module__ == "torch.return_types":
                return V.NamedTupleVariable(items, type(example))
            return (V.TupleVariable if isinstance(example, tuple) else V.ListVariable)(items)
        if example is None:
            return V.ConstantVariable(None)   # e.g. setitem: keep the node, it has an effect
        if isinstance(example, (int, float, bool, torch.dtype, torch.device)):
            # A plain Python value (e.g. x.dim()): no node needed.
            self.graph.erase_node(node)
            self.op_count -= 1
            return V.ConstantVariable(example)
        raise Unsupported(f"{_target_name(node.target)} returned {type(example).__name__}, "
                          "which the graph cannot carry")

    # ---- finishing ------------------------------------------------------------------------
    def has_ops(self) -> bool:
        return any(n.op not in ("placeholder", "output") for n in self.graph.nodes)

    def symbolic_guards(self) -> list[Guard]:
        """ShapeEnv's guards (s0 >= 2, equalities between sizes, ...) as SYMBOLIC guards."""
        if self.shape_env is None or not any(self.dynamic_dims.get(s.name())
                                             or s.name() in self.dynamic_scalars
                                             or isinstance(f, (torch.SymInt, torch.SymFloat))
                                             for s, f in zip(self.input_sources, self.input_fakes)):
            return []
        sources = [shape_env_source(s.name()) for s in self.input_sources]
        only = self._guards_on_inputs()
        try:
            exprs = self.shape_env.produce_guards(self.input_fakes, sources,
                                                  source_ref=lambda s: str(s.name), **only)
        except TypeError:
            exprs = self.shape_env.produce_guards(self.input_fakes, sources, **only)
        exprs = list(exprs) + self._specialized_size_guards()
        _log_symbols(self.shape_env)    # issue 18: each symbol with its value range
        return [Guard(e, "SYMBOLIC", e, self.location) for e in exprs]

    def _guards_on_inputs(self) -> dict:
        """produce_guards' `guards=` without the ShapeEnv guards on the sizes of a view input's
        base (`L['x']._base`), or {} when there are none. The fake of a view input is a view
        of a fake base with sizes of its own; an op that checks a view against its storage
        (the as_strided_ inside t_/unsqueeze_/... on a view) guards those sizes, but no
        input source carries them (produce_guards asserts on such a symbol), the trace never
        reads `_base` (attributes.py breaks on it), and every real view lies in its storage:
        torch's meta converter leaves the same check unguarded when it builds the view."""
        bound = self._input_symbols()
        keep, base_only = [], []
        for g in self.shape_env.guards:
            free = self.shape_env.simplify(g.expr).free_symbols - bound
            (base_only if free and all(self._base_symbol(s) for s in free) else keep).append(g)
        for g in base_only:
            log.info("guard_not_installed", guard=str(g.expr),
                     symbols={str(s): self._symbol_source(s) for s in g.expr.free_symbols},
                     reason="it bounds a view input's base (x._base), which no input source "
                            "carries and the trace never reads: a storage-bounds check every "
                            "real view satisfies")
        return {"guards": keep} if base_only else {}

    def _input_symbols(self) -> set:
        """The symbols produce_guards binds to an input source: each size, stride or storage
        offset of an input tensor, or scalar input, that is a bare symbol."""
        out = set()
        for fake in self.input_fakes:
            values = [*fake.shape, *fake.stride(), fake.storage_offset()] \
                if isinstance(fake, torch.Tensor) else [fake]
            for v in values:
                expr = getattr(getattr(v, "node", None), "expr", None)
                if expr is not None and expr.is_symbol:
                    out.add(expr)
        return out

    def _symbol_source(self, symbol) -> str | None:
        found = self.shape_env.var_to_sources.get(symbol)
        name = getattr(found[0], "name", None) if found else None
        return name() if callable(name) else name      # a method in older torch

    def _base_symbol(self, symbol) -> bool:
        name = self._symbol_source(symbol)
        return isinstance(name, str) and "._base" in name

    def _specialized_size_guards(self) -> list[str]:
        """`L['x'].size()[0] == 3` for each dynamic size that capture specialized because
        Python needed its value (calls.specialize: a list index, a numpy operand).
        produce_guards leaves these to Dynamo's TENSOR_MATCH, which reads the sizes after
        tracing; ours was built when the input was added (the dim still symbolic), so without
        this a new size reused the old value. Also every size the ShapeEnv itself pinned to a
        constant while tracing (a meta function's guard, e.g. F.pad's, replaces the symbol by
        its value, and later reads of the size in the trace see the number: the graph is then
        only valid at that size)."""
        out = []
        for src, fake in zip(self.input_sources, self.input_fakes):
            if not isinstance(fake, torch.Tensor) or not self.dynamic_dims.get(src.name()):
                continue
            for i, size in enumerate(fake.shape):
                raw = getattr(getattr(size, "node", None), "_expr", None)
                if not isinstance(size, torch.SymInt) or raw is None:
                    continue
                pinned = raw.free_symbols & self.specialized_symbols
                if not pinned:
                    try:
                        pinned = bool(self.shape_env.replace(raw).is_number)
                    except Exception:
                        pinned = False
                if pinned:
                    log.debug("dynamic_size_specialized", source=src.name(), dim=i, value=int(size),
                              reason="the trace used the size's value: guarded equal to it")
                    out.append(f"{src.name()}.size()[{i}] == {int(size)}")
        return out


def changes_metadata(target) -> bool:
    """Does `target` (a Tensor method's name, torch.Tensor.t_, an aten op) change the sizes or
    strides of its first argument in place? Those are the aten ops torch tags inplace_view
    (t_, transpose_, swapdims_, squeeze_, unsqueeze_, as_strided_, resize_, set_, detach_...):
    read from torch's tags (aot.aliases.inplace_view, which the aot stage asks too)."""
    from tracetorch.compiler.aot.aliases import inplace_view    # the aot stage loads when a graph compiles
    name = target if isinstance(target, str) else getattr(target, "__name__", None)
    name = name.split(".")[0] if isinstance(name, str) else None
    return name is not None and name not in _SAME_GEOMETRY and inplace_view(name)


#: in-place view ops that leave sizes, strides and offset as they are: traced on the tensor's
#: own fake (an alias, being a view, would refuse them)
_SAME_GEOMETRY = {"detach_": "only detaches from autograd; a view refuses detach_"}


def _has_unbacked(example) -> bool:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    try:
        return bool(free_unbacked_symbols(example))
    except Exception:
        return False


def _symbolic_dims(name: str, dims: set[int], fake) -> set[int]:
    """The dims of `dims` whose size the fake holds as a symbol. A dynamic dim of size 0 or 1
    is a plain int in the fake (the ShapeEnv's 0/1 specialization, as in Dynamo) and the graph
    is traced for that size: TENSOR_MATCH must check it (left unchecked, a graph traced at
    size 1 after a size change served every later size)."""
    out = set()
    for d in sorted(dims):
        size = fake.shape[d]
        if isinstance(size, torch.SymInt) and size.node.maybe_as_int() is None:
            out.add(d)
        else:
            log.debug("dynamic_size_specialized", source=name, dim=d, value=int(size),
                      reason="0/1 specialization: the ShapeEnv made the size a constant, so "
                             "TENSOR_MATCH checks it")
    return out


def tensor_expected(t: torch.Tensor, dynamic_dims, fake=None) -> dict:
    """TENSOR_MATCH's expected value: dims in dynamic_dims are None, and so is every stride
    that the fake tensor holds as a symbol (whatever the layout: the ShapeEnv knows which
    strides are built from the dynamic sizes)."""
    dyn = set(dynamic_dims)
    shape = tuple(None if i in dyn else int(s) for i, s in enumerate(t.shape))
    if fake is not None and dyn:
        stride = tuple(s if isinstance(s, int) else None for s in fake.stride())
    else:
        stride = tuple(None if any(j in dyn for j in range(i + 1, t.dim())) else int(s)
                       for i, s in enumerate(t.stride()))
    return {"type": type(t), "dtype": t.dtype, "device": t.device, "shape": shape,
            "stride": stride, "requires_grad": bool(t.requires_grad),
            "inference": bool(t.is_inference())}


def _safe_name(text: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in text).strip("_")
    while "__" in out:
        out = out.replace("__", "_")
    if not out or out[0].isdigit():
        out = "v_" + out
    return out


def _target_name(target) -> str:
    if isinstance(target, str):
        return f"Tensor.{target}"
    mod = getattr(target, "__module__", None)
    name = getattr(target, "__name__", repr(target))
    return f"{mod}.{name}" if mod else name


def to_node_args(value):
    if isinstance(value, (V.TensorVariable, V.SymNodeVariable)):
        return value.node
    if isinstance(value, V.ConstantVariable):
        return value.value
    if isinstance(value, V.SliceVariable):
        return slice(*[to_node_args(p) for p in value.parts])
    if isinstance(value, V.BaseListVariable):
        return (list if isinstance(value, V.ListVariable) else tuple)(to_node_args(i) for i in value.items)
    if isinstance(value, V.DictVariable):
        return {k: to_node_args(v) for k, v in value.items.items()}
    if isinstance(value, tuple):
        return tuple(to_node_args(v) for v in value)
    if isinstance(value, list):
        return [to_node_args(v) for v in value]
    if isinstance(value, dict):
        return {k: to_node_args(v) for k, v in value.items()}
    if isinstance(value, (V.TorchFunctionVariable, V.BuiltinVariable)):
        return value.fn
    raise Unsupported(f"cannot pass {value!r} into a graph operation")


def to_fake_args(value):
    if isinstance(value, (V.TensorVariable, V.SymNodeVariable)):
        return value.example
    if isinstance(value, V.ConstantVariable):
        return value.value
    if isinstance(value, V.SliceVariable):
        return slice(*[to_fake_args(p) for p in value.parts])
    if isinstance(value, V.BaseListVariable):
        return (list if isinstance(value, V.ListVariable) else tuple)(to_fake_args(i) for i in value.items)
    if isinstance(value, V.DictVariable):
        return {k: to_fake_args(v) for k, v in value.items.items()}
    if isinstance(value, tuple):
        return tuple(to_fake_args(v) for v in value)
    if isinstance(value, list):
        return [to_fake_args(v) for v in value]
    if isinstance(value, dict):
        return {k: to_fake_args(v) for k, v in value.items()}
    if isinstance(value, (V.TorchFunctionVariable, V.BuiltinVariable)):
        return value.fn
    raise Unsupported(f"cannot pass {value!r} into a graph operation")


def _log_symbols(shape_env) -> None:
    """create_symbol, as PyTorch's +dynamo log: every symbol of the ShapeEnv with its value
    range and the source it stands for (component `dynamic`). Never breaks a compile."""
    try:
        sources = getattr(shape_env, "var_to_sources", {}) or {}
        from tracetorch.compiler.aot.inference import shape_env_hints   # loaded when a graph compiles
        hints = shape_env_hints(shape_env) or {}
        for sym, vr in sorted((getattr(shape_env, "var_to_range", {}) or {}).items(), key=str):
            src = sources.get(sym)
            name = getattr(src[0], "name", None) if src else None
            dynamic.log.info("create_symbol", symbol=str(sym), range=f"[{vr.lower}, {vr.upper}]",
                             source=(name() if callable(name) else name) if src else None,
                             hint=str(hints.get(sym)) if sym in hints else None)
    except Exception as e:   # a ShapeEnv of another torch version: say so, compile on
        dynamic.log.debug("create_symbol_not_logged", error=f"{type(e).__name__}: {e}")
