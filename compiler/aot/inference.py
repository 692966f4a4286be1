"""The aot stage for inference: functionalize + decompose the captured graph, then hand the flat,
functional aten graph to an inner compiler (docs/CONTRACTS.md section 3).

    aot_module(gm, example_inputs, inner_compile) -> callable(*inputs) -> gm's output structure

Tracing uses make_fx over fake tensors: the frontend's own fake inputs (placeholder
meta['example_value'] / meta['val']) when they are there, so symbolic sizes carry over as the
same sympy symbols; else fakes of the example inputs, symbolic when `dynamic=True`. At run time
a cheap check (memoized per input sizes/strides) verifies that the inputs still match what was
traced (every size/stride expression and every shape guard recorded while tracing); anything
else runs the original graph eagerly, logged. With grads needed, the training helper's
`compiler.aot.training.aot_module_training` takes over.
"""

from __future__ import annotations

import contextlib
import time

import sympy
import torch
import torch.fx.traceback as fx_traceback
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from tracetorch import logs
from tracetorch.compiler.aot.aliases import (alias_same_type_conversions, input_metadata_mutations, input_views,
                                             returned_inputs)
from tracetorch.compiler.aot.inplace_forms import functional_inplace_calls
from tracetorch.compiler.aot.decompose import decomposition_table, sdpa_decompositions
from tracetorch.compiler.aot.functionalize import functional_flat_fn, mutated_positions
from tracetorch.compiler.aot.overlapping_inputs import OverlapVariants
from tracetorch.compiler.native_checks import TensorLayout

log = logs.get_logger(__name__)


def _strict() -> bool:
    """Raise instead of falling back (backend.fallback_on_error off, or relu-bug testing)."""
    from tracetorch.compiler import config
    return not config.backend.fallback_on_error or bool(config.testing.inject_relu_bug)


def _placeholder_fakes(gm):
    vals = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            vals.append(n.meta.get("val", n.meta.get("example_value")))
    return vals


def _needs_grad(gm, example_inputs) -> bool:
    if not torch.is_grad_enabled():
        return False
    return (any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)
            or any(p.requires_grad for p in gm.parameters()))


def _has_symbols(v) -> bool:
    if isinstance(v, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in list(v.shape) + list(v.stride()))
    return isinstance(v, (torch.SymInt, torch.SymFloat))


def _is_float(x) -> bool:
    return isinstance(x, (float, torch.SymFloat))


def _fake_matches(f, x) -> bool:
    """Is the frontend's placeholder value `f` a fake of the example input `x`?"""
    if isinstance(x, torch.Tensor):
        return isinstance(f, FakeTensor)
    if _is_float(x):
        return isinstance(f, (torch.SymFloat, float))
    if isinstance(x, (torch.SymInt, int)) and not isinstance(x, bool):
        return isinstance(f, (torch.SymInt, int))
    return True


def _scalar_tensor_calls(gm, example_inputs=()):
    """gm with `torch.tensor(s)` / `torch.as_tensor(s)` of a symbolic float `s` written as
    `torch.scalar_tensor(s)` (same value, dtype and device): torch.tensor reads a Python float (a
    C++ double), which would specialize the SymFloat while tracing; scalar_tensor takes a Scalar
    and keeps it symbolic. A new GraphModule sharing gm's attributes; gm itself is left as is."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    float_inputs = {n for n, x in zip(placeholders, example_inputs) if _is_float(x)}

    def symfloat(a):
        return isinstance(a, torch.fx.Node) and (
            a in float_inputs or isinstance(a.meta.get("val", a.meta.get("example_value")), torch.SymFloat))
    hits = [n for n in gm.graph.nodes
            if n.op == "call_function" and n.target in (torch.tensor, torch.as_tensor)
            and len(n.args) == 1 and symfloat(n.args[0]) and set(n.kwargs) <= {"dtype", "device"}]
    if not hits:
        return gm
    import copy
    graph = copy.deepcopy(gm.graph)
    names = {h.name for h in hits}
    for n in graph.nodes:
        if n.name in names:
            n.target = torch.scalar_tensor
    new = torch.fx.GraphModule(gm, graph)
    log.debug("aot_scalar_tensor_rewrite", nodes=[h.name for h in hits],
              reason="torch.tensor of a SymFloat would specialize it; scalar_tensor keeps it symbolic")
    return new


def trace_inference(gm, example_inputs, dynamic=None, alias_inputs=()):
    """(traced aten GraphModule, output spec, fake inputs, shape_env or None, guards).
    `alias_inputs`: inputs whose in-place metadata ops are traced on an alias (FlatFunction)."""
    gm = functional_inplace_calls(alias_same_type_conversions(_scalar_tensor_calls(gm, example_inputs)))
    fn, flat = functional_flat_fn(gm, alias_inputs)
    table = decomposition_table()
    table.update(sdpa_decompositions())
    fakes = _placeholder_fakes(gm)
    frontend_fakes = (len(fakes) == len(example_inputs)
                      and all(_fake_matches(f, x) for f, x in zip(fakes, example_inputs))
                      and any(_has_symbols(f) for f in fakes) and any(isinstance(f, FakeTensor) for f in fakes))
    if not frontend_fakes and dynamic and any(_is_float(x) for x in example_inputs):
        # make_fx's symbolic mode keeps Python floats as constants: fake the inputs here (in one
        # ShapeEnv), floats as SymFloats, and trace them like the frontend's fakes
        fakes = symbolic_fakes(example_inputs)
        frontend_fakes = fakes is not None
    with fx_traceback.preserve_node_meta():
        if frontend_fakes and dynamic is not False:
            fake_mode = next(f.fake_mode for f in fakes if isinstance(f, FakeTensor))
            shape_env = fake_mode.shape_env
            n_guards = len(shape_env.guards) if shape_env is not None else 0
            with fake_mode:
                # on aliases of the frontend's fakes: an op that still changes an input's metadata
                # while tracing (functionalize's propagation of one that is not replayed) must not
                # change the placeholder's fake, which the frontend's guards and the runtime input
                # check below read as the input at entry
                traced = make_fx(fn, decomposition_table=table, tracing_mode="real")(*_fresh_aliases(fakes))
            new_guards = shape_env.guards[n_guards:] if shape_env is not None else []
            inputs = fakes
        else:
            mode = "symbolic" if dynamic else "fake"
            # outside Dynamo's ambient TracingContext: make_fx would adopt its fake mode and mint
            # symbols in Dynamo's ShapeEnv that Dynamo cannot guard on
            with _no_ambient_tracing_context():
                traced = make_fx(fn, decomposition_table=table, tracing_mode=mode,
                                 _allow_non_fake_inputs=True)(*example_inputs)
            vals = [n.meta.get("val") for n in traced.graph.nodes if n.op == "placeholder"]
            # non-tensor inputs have no "val": they were traced as the example's value
            inputs = [v if isinstance(v, (torch.Tensor, torch.SymInt, torch.SymFloat)) else ex
                      for v, ex in zip(vals, example_inputs)]
            shape_env = shape_env_of(inputs)
            new_guards = list(shape_env.guards) if shape_env is not None else []
    if alias_inputs:
        _drop_input_aliases(traced)
    return traced, flat.spec, inputs, shape_env, new_guards


def _drop_input_aliases(traced):
    """The traced graph with `aten.alias(input)` (FlatFunction's aliases of inputs that metadata
    ops change) replaced by the input: in the functional graph nothing writes the input before its
    final write-back, so the alias reads the same values, and the backend lowers an alias as a
    computed tensor (as_strided of it at the input's storage offset was refused: the whole graph
    ran eagerly)."""
    placeholders = {n for n in traced.graph.nodes if n.op == "placeholder"}
    dropped = []
    for n in list(traced.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.alias.default and n.args[0] in placeholders:
            n.replace_all_uses_with(n.args[0])
            traced.graph.erase_node(n)
            dropped.append(n.name)
    if dropped:
        traced.recompile()
        log.debug("aot_input_aliases_dropped", nodes=dropped,
                  reason="the alias only kept metadata ops off the input while tracing")


def _fresh_aliases(fakes):
    """A new FakeTensor per tensor input, with its sizes, strides, storage offset (the same
    symbols) and storage: in-place metadata changes of it leave the original as it was. A 0-d
    input that Dynamo made of a Python float (torch.compile(dynamic=True): a LayerNorm's eps)
    keeps the symbol its `.item()` gives: without it the trace's `.item()` raised
    DataDependentOutputException and the whole graph ran eagerly."""
    out = []
    for f in fakes:
        if isinstance(f, FakeTensor):
            alias = torch.ops.aten.alias.default(f)
            if f.dim() == 0 and f.item_memo is not None:
                alias.item_memo = f.item_memo
            f = alias
        out.append(f)
    return out


def symbolic_fakes(example_inputs):
    """Fakes of the example inputs in a fresh ShapeEnv, as make_fx's symbolic mode makes them
    (tensor sizes and ints symbolic), plus every float as a SymFloat (a runtime scalar: the
    compiled graph takes its value at each call). None without a tensor input."""
    if not any(isinstance(x, torch.Tensor) for x in example_inputs):
        return None
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    shape_env = ShapeEnv()
    mode = FakeTensorMode(allow_fallback_kernels=True, allow_non_fake_inputs=True, shape_env=shape_env,
                          static_shapes=False)
    out = []
    for i, x in enumerate(example_inputs):
        src = ConstantSource(f"input{i}")
        if isinstance(x, torch.Tensor):
            out.append(mode.from_tensor(x, source=src))
        elif type(x) is int:
            out.append(shape_env.create_symintnode(shape_env.create_symbol(x, src, positive=None), hint=x,
                                                   source=src))
        elif type(x) is float:
            out.append(shape_env.create_symfloatnode(shape_env.create_unspecified_symbol(x, src), hint=x,
                                                     source=src))
        else:
            out.append(x)
    log.debug("aot_symbolic_inputs", floats=sum(type(x) is float for x in example_inputs),
              ints=sum(type(x) is int for x in example_inputs))
    return out


@contextlib.contextmanager
def _no_ambient_tracing_context():
    try:
        from torch._guards import tracing
    except ImportError:
        yield
        return
    with tracing(None):
        yield


def shape_env_hints(shape_env) -> dict:
    """The ShapeEnv's symbol -> traced value (newer torch names it backed_var_to_val and warns
    on the old name; the frontend's symbol log reads it too)."""
    if shape_env is None:
        return {}
    hints = getattr(shape_env, "backed_var_to_val", None)
    return hints if hints is not None else getattr(shape_env, "var_to_val", {})


def shape_env_of(vals):
    """The ShapeEnv of the first fake tensor or symbolic value in `vals`, or None."""
    for v in vals:
        if isinstance(v, FakeTensor) and v.fake_mode.shape_env is not None:
            return v.fake_mode.shape_env
        if isinstance(v, (torch.SymInt, torch.SymFloat)):
            return v.node.shape_env
    return None


#: gm.meta key, set by our frontend on a graph it captured: every input is a tensor whose dtype,
#: device, size, stride and requires_grad the frontend's guards compare with the example input's
#: before each call (static TENSOR_MATCH), so a static `InputCheck` re-checking them per call
#: would only repeat that work (268 tensors: 69 us per ResNet-50 call on this CPU)
INPUTS_GUARDED = "tracetorch_inputs_guarded"


def guarded_signature(inputs) -> tuple:
    """What INPUTS_GUARDED holds: the guarded inputs' metadata. A backend wrapper that hands us
    the graph with other inputs (added, reordered, other layouts) gets the check back, since its
    inputs are no longer the ones the guards describe."""
    return tuple((tuple(t.shape), tuple(t.stride()), t.dtype, t.device) if isinstance(t, torch.Tensor)
                 else ("other", type(t)) for t in inputs)


def inputs_guarded(gm, inputs) -> bool:
    mark = gm.meta.get(INPUTS_GUARDED)
    return mark is not None and mark == guarded_signature(inputs)


class InputCheck:
    """Do the runtime inputs match what was traced? (sizes/strides as sympy exprs + guards)"""

    def __init__(self, traced_inputs, guards, shape_env, check_offsets=False):
        self.check_offsets = check_offsets   # as_strided in the graph bakes in storage offsets
        self.specs = []
        self.specialized: list[float] = []   # float inputs the trace turned into constants
        for v in traced_inputs:
            if isinstance(v, torch.Tensor):
                self.specs.append(("t", [_expr(s) for s in v.shape], [_expr(s) for s in v.stride()],
                                   v.dtype, v.device.type, _expr(v.storage_offset())))
            elif isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
                self.specs.append(("i", _expr(v)))
            elif isinstance(v, torch.SymFloat):
                expr = v.node.expr
                if expr.is_number:
                    # an op took the float as a C++ double while tracing (e.g. pad's `float? value`):
                    # the ShapeEnv specialized it, the graph holds this value as a constant
                    self.specialized.append(float(expr))
                    self.specs.append(("c", float(expr)))
                else:
                    # a runtime scalar: any float matches (guards on its symbol are checked below)
                    self.specs.append(("f", expr))
            elif v is None or isinstance(v, (float, bool, str)):
                self.specs.append(("c", v))     # traced as a constant: only this value matches
            else:
                self.specs.append(("o",))
        bound = set()
        for spec in self.specs:
            bound |= _free(spec)
        # guards on symbols no input size/stride carries (internal or specialized ones) cannot be
        # checked at run time and say nothing about the inputs: they are dropped
        self.guards = [g.expr for g in guards if g.expr.free_symbols and g.expr.free_symbols <= bound]
        if shape_env is not None:
            for sym, vr in getattr(shape_env, "var_to_range", {}).items():
                if _is_used(sym, self.specs) and vr.lower is not None and vr.lower > 0 and vr.lower.is_finite:
                    self.guards.append(sympy.Ge(sym, int(vr.lower)))
        # a symbol that a call does not bind (it sits only in strides of dims of size 1 there,
        # which address nothing) takes the value it had when traced: the guards held for it
        hints = shape_env_hints(shape_env)
        self.hints = {sym: hints[sym] for sym in bound if sym in hints and hints[sym].is_number}
        self.static = not any(_free(s) for s in self.specs) and not self.guards
        guarded = set()
        for g in self.guards:
            guarded |= g.free_symbols
        # a float no guard mentions is keyed by its type only: the memo does not grow with its values
        self.float_by_type = [s[0] == "f" and not (_free(s) & guarded) for s in self.specs]
        self.memo: dict = {}
        # all-tensor graphs (the usual case) compare the call's tensor metadata with the last
        # accepted call's in two C-level passes before building the per-input key
        self.all_tensors = bool(self.specs) and all(sp[0] == "t" for sp in self.specs)
        self.last = None

    def key(self, args):
        parts = []
        by_type = self.float_by_type
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                parts.append((tuple(a.shape), a.stride(), a.dtype, a.device.type,
                              a.storage_offset() if self.check_offsets else 0))
            elif isinstance(a, float) and i < len(by_type) and by_type[i]:
                parts.append(("float",))
            elif isinstance(a, (int, float, bool, str)) or a is None:
                parts.append((type(a).__name__, a))
        return tuple(parts)

    def implied_by_guards(self) -> bool:
        """Does a caller's static TENSOR_MATCH on every input imply this check? Only when the
        trace is static (no symbol, no guard), every input a tensor and offsets unchecked."""
        return self.static and self.all_tensors and not self.check_offsets

    def __call__(self, args) -> str:
        if self.all_tensors and not self.check_offsets:
            last = self.last
            if last is not None and last[0].matches(args):    # (compiler/native_checks.py)
                return last[1]
            try:
                layout = TensorLayout.of(args)
            except (AttributeError, TypeError, RuntimeError):   # not all strided tensors: the general key
                layout = None
            if layout is not None:
                hit = self._lookup(args)
                self.last = (layout, hit)
                return hit
        return self._lookup(args)

    def _lookup(self, args) -> str:
        k = self.key(args)
        hit = self.memo.get(k)
        if hit is None:
            hit = self.memo[k] = self._check(args)
        return hit

    def _check(self, args) -> str:
        binds = {}
        pending = []
        for spec, a in zip(self.specs, args):
            if spec[0] == "t":
                if not isinstance(a, torch.Tensor) or a.dim() != len(spec[1]):
                    return "input rank changed"
                if a.dtype != spec[3] or a.device.type != spec[4]:
                    return f"input dtype/device {a.dtype}/{a.device.type} differs from traced {spec[3]}/{spec[4]}"
                for e, v in zip(spec[1], a.shape):
                    pending.append((e, int(v), "size"))
                for e, v, s in zip(spec[2], a.stride(), a.shape):
                    if int(s) > 1:
                        pending.append((e, int(v), "stride"))
                if self.check_offsets:
                    pending.append((spec[5], int(a.storage_offset()), "storage offset"))
            elif spec[0] == "i":
                if not isinstance(a, int) or isinstance(a, bool):
                    return f"expected an int input, got {type(a).__name__}"
                pending.append((spec[1], int(a), "int"))
            elif spec[0] == "f":
                if not isinstance(a, float):
                    return f"expected a float input, got {type(a).__name__}"
                if isinstance(spec[1], sympy.Symbol):
                    binds.setdefault(spec[1], sympy.Float(float(a)))
            elif spec[0] == "c":
                if type(a) is not type(spec[1]) or a != spec[1]:
                    return f"constant input {a!r} differs from the traced {spec[1]!r}"
        for e, v, _ in pending:
            if isinstance(e, sympy.Symbol) and e not in binds:
                binds[e] = sympy.Integer(v)
        for sym, hint in self.hints.items():
            binds.setdefault(sym, hint)
        for e, v, what in pending:
            got = e.xreplace(binds) if isinstance(e, sympy.Basic) else e
            if not (got.is_number and int(got) == v):
                return f"{what} {v} does not match traced {e}"
        for g in self.guards:
            try:
                ok = bool(g.xreplace(binds))
            except TypeError:
                return f"cannot evaluate shape guard {g}"
            if not ok:
                return f"shape guard {g} fails"
        return ""


def _expr(s):
    if isinstance(s, (torch.SymInt, torch.SymFloat)):
        return s.node.expr
    return sympy.Integer(int(s))


def _free(spec):
    syms = set()
    if spec[0] == "c":
        return syms
    for part in spec[1:3]:
        for e in (part if isinstance(part, list) else [part]):
            if isinstance(e, sympy.Basic):
                syms |= e.free_symbols
    return syms


def _is_used(sym, specs) -> bool:
    return any(sym in _free(s) for s in specs)


def aot_module(gm: torch.fx.GraphModule, example_inputs, inner_compile, *, dynamic=None,
               wrap_inference=None, wrap_training=None):
    """Functionalize + decompose `gm`, compile it with `inner_compile(traced_gm, inputs)`, and return
    a callable with gm's calling convention. `wrap_inference(compiled, traced_gm, inputs)`, when
    given, wraps an inference graph's compiled callable, and `wrap_training` a training graph's
    forward and backward (the backend's CUDA graphs; training.aot_module_training)."""
    example_inputs = list(example_inputs)
    if _needs_grad(gm, example_inputs):
        try:
            from tracetorch.compiler.aot import training
        except ImportError as e:
            log.warning("aot_runs_eagerly", reason=f"inputs require grad and the training path is missing: {e}")
            return gm
        try:
            return training.aot_module_training(gm, example_inputs, inner_compile,
                                                wrap_training=wrap_training)
        except Exception as e:  # the training path failing must not fail the user's program
            if _strict():
                raise
            log.warning("aot_runs_eagerly", reason=f"training path failed: {type(e).__name__}: {e}")
            logs.artifact("perf_hints",
                          lambda e=e: f"training aot failed, graph runs eagerly under autograd: {e}")
            return gm
    t0 = time.perf_counter()
    # inputs changed by in-place metadata ops: traced on an alias, the change replayed on the
    # caller's tensor after each call (None: none, or not replayable, left to functionalize)
    metadata = input_metadata_mutations(gm)
    try:
        traced, spec, traced_inputs, shape_env, guards = trace_inference(
            gm, example_inputs, dynamic, alias_inputs=metadata[0] if metadata else ())
    except Exception as e:
        log.warning("aot_runs_eagerly", reason=f"tracing failed: {type(e).__name__}: {e}")
        logs.artifact("perf_hints",
                      lambda e=e: f"aot tracing failed, graph runs eagerly: {type(e).__name__}: {e}")
        return gm
    logs.artifact("aot_graphs", lambda: traced.print_readable(print_output=False, include_stride=True,
                                                              include_device=True),
                  graph="inference", filename="aot_inference.py")
    mutated = mutated_positions(traced)
    log.info("aot_traced", nodes=len(traced.graph.nodes), mutated_inputs=len(mutated),
             guards=len(guards), seconds=round(time.perf_counter() - t0, 3))
    n_guards = len(shape_env.guards) if shape_env is not None else 0
    compiled = inner_compile(traced, traced_inputs)
    if wrap_inference is not None:
        compiled = wrap_inference(compiled, traced, traced_inputs)
    if shape_env is not None and len(shape_env.guards) > n_guards:
        # guards the backend added (backend_guarded): the code holds only where they hold
        guards = list(guards) + shape_env.guards[n_guards:]
    offsets = any(n.target is torch.ops.aten.as_strided.default for n in traced.graph.nodes)
    check = InputCheck(traced_inputs, guards, shape_env, check_offsets=offsets)
    for value in check.specialized:
        log.warning("float_input_specialized", value=value,
                    action="the compiled graph serves this value only; other values run the graph eagerly")
        logs.artifact("perf_hints", lambda value=value: (
            f"a float input was specialized to {value!r} while tracing (an op in the graph takes it as a "
            "C++ double, e.g. F.pad's value): other values of it run the graph eagerly"))
    if inputs_guarded(gm, example_inputs) and check.implied_by_guards():
        log.debug("input_check_skipped", inputs=len(check.specs),
                  reason="the frontend's guards compare every input's dtype, device, size, stride "
                         "and requires_grad with the traced ones before each call")
        check = None
    runtime = InferenceRuntime(gm, compiled, spec, check, returned_inputs(gm, metadata[0] if metadata else ()),
                               input_views(gm), metadata[1] if metadata else None)
    runtime.overlap = OverlapVariants(gm, mutated, metadata[0] if metadata else (),
                                      lambda g, inputs: aot_module(g, inputs, inner_compile, dynamic=False,
                                                                   wrap_inference=wrap_inference,
                                                                   wrap_training=wrap_training))
    return runtime


class InferenceRuntime:
    """Runs the compiled graph and rebuilds gm's output structure; inputs that do not match the
    traced sizes/strides/guards run gm eagerly (logged once per distinct input shape)."""

    def __init__(self, gm, compiled, spec, check, returned=None, views=None, metadata_replay=None):
        self.gm = gm
        self.compiled = compiled
        self.spec = spec
        self.check = check
        self.returned = returned or {}    # flat output -> input it is (aliases.returned_inputs)
        # [(flat outputs, replay module, early)]: outputs that are views of inputs
        # (aliases.input_views)
        self.views = views or []
        # the in-place metadata ops on inputs (aliases.input_metadata_mutations), run on the
        # caller's tensors after the call: the compiled graph leaves their metadata as it was
        self.metadata_replay = metadata_replay
        # input keys already warned about (per runtime: a class-wide set silenced a second
        # compiled function's skip of the same input shapes)
        self._warned = set()
        self.overlap = None     # OverlapVariants, when the graph writes to an input

    def __call__(self, *args):
        if self.overlap is not None and self.overlap.mutated:
            variant = self.overlap.variant_for(args)
            if variant is not None:
                return self._call_variant(variant, args)
        why = self.check(args) if self.check is not None else ""
        if why:
            if (k := self.check.key(args)) not in self._warned:
                self._warned.add(k)
                log.warning("compiled_graph_skipped", reason=why, action="run the graph eagerly")
            return self.gm(*args)
        views = []
        with torch.no_grad():
            flat = self.compiled(*args)
            # views of inputs, after the write-back (they see the inputs' final values): those
            # taken from the inputs as they entered before the metadata replay, the others after
            for positions, replay, early in self.views:
                if early:
                    views += zip(positions, replay(*args))
            if self.metadata_replay is not None:
                # after the data write-back (into the inputs as they entered), before the
                # returned inputs below, which must see the final metadata
                self.metadata_replay(*args)
            for positions, replay, early in self.views:
                if not early:
                    views += zip(positions, replay(*args))
        return self._realiased(flat, args, views)

    def _realiased(self, flat, args, views):
        """gm's output structure, with the outputs that eager returns as an input or a view of
        one replaced by the caller's tensor or the replayed view."""
        if self.returned or self.views:
            flat = list(flat)
            for pos, k in self.returned.items():
                flat[pos] = args[k]
            for pos, view in views:
                flat[pos] = view
        return pytree.tree_unflatten(list(flat), self.spec)

    def _call_variant(self, variant, args):
        """A synthetic-base variant (overlapping_inputs) computes the values and writes the
        shared memory; the outputs eager returns as inputs or views of them are then taken from
        the caller's tensors as in a plain call (the variant sees only the base)."""
        out = variant(*args)
        if variant is self.gm or not (self.returned or self.views):
            return out
        with torch.no_grad():
            views = [v for positions, replay, _ in self.views for v in zip(positions, replay(*args))]
        return self._realiased(pytree.tree_leaves(out), args, views)
