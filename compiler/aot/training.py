"""The aot stage for graphs that need gradients: joint graph -> partition -> compiled
forward + lazily compiled backward inside a torch.autograd.Function.

    aot_module_training(gm, example_inputs, inner_compile) -> callable
        same calling convention as gm (the torch.compile backend contract)

Parameters and buffers of `gm` (get_attr in the captured graph) are lifted to graph inputs
("primals") with torch.func.functional_call, so the compiled graphs are pure functions and
the optimizer's in-place updates are seen on the next call. Anything this path cannot handle
(dynamic shapes, non-tensor inputs, a mutated input that requires grad, ...) falls back to
running `gm` eagerly under autograd, with the reason logged: never wrong.
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Callable

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.aot.aliases import returned_inputs
from tracetorch.compiler.aot.autograd_function import CompiledFunction, TrainingRuntime
from tracetorch.compiler.aot.inference import inputs_guarded
from tracetorch.compiler.aot.output_layouts import FREE_LAYOUT_OUTPUTS
from tracetorch.compiler.aot.joint import JointGraph, TrainingUnsupported, trace_joint, training_decompositions
from tracetorch.compiler.aot.partition import Partition, partition_joint

log = logs.get_logger(__name__)
_graph_counter = itertools.count()


def needs_autograd(gm: torch.nn.Module, example_inputs) -> bool:
    """True when grad mode is on and some input or parameter requires grad."""
    if not torch.is_grad_enabled():
        return False
    if any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        return True
    return any(p.requires_grad for p in gm.parameters())


def _readable(gm: fx.GraphModule, name: str) -> str:
    return gm.print_readable(print_output=False, include_stride=True, include_device=True) \
        if _accepts_print_kwargs() else gm.print_readable(print_output=False)


def _accepts_print_kwargs() -> bool:
    import inspect
    return "include_stride" in inspect.signature(fx.GraphModule.print_readable).parameters


def _decision_text(part: Partition, name: str) -> str:
    d = part.decision()
    def mb(b):
        return f"{b / 2**20:.2f} MiB" if b >= 2**20 else f"{b / 2**10:.1f} KiB"

    return (f"partition of {name} ({d['strategy']}): saved {len(d['saved'])} tensors "
            f"({mb(d['saved_bytes'])}; save-everything baseline {mb(d['baseline_bytes'])}, "
            f"{mb(d['bytes_saved_vs_baseline'])} less)\n"
            f"  saved: {', '.join(d['saved']) or '-'}\n"
            f"  recomputed in backward: {', '.join(d['recomputed']) or '-'}\n")


class _ParamAccess:
    """Fetch gm's parameters and buffers on every call (the optimizer updates them in place,
    and a user may even replace them)."""

    def __init__(self, gm: torch.nn.Module, names: list[str]):
        self.slots = []
        for name in names:
            mod_path, _, attr = name.rpartition(".")
            self.slots.append((gm.get_submodule(mod_path) if mod_path else gm, attr))
        # a module's _parameters/_buffers dicts, read directly: getattr goes through
        # nn.Module.__getattr__ (Python) for each one, a large part of a small step's overhead.
        # Assigning a new Parameter/buffer updates these same dicts.
        self.dicts = [(mod._parameters if attr in mod._parameters else mod._buffers, attr)
                      for mod, attr in self.slots]

    def __call__(self) -> list:
        try:
            return [d[attr] for d, attr in self.dicts]
        except KeyError:                 # deleted, or turned into a plain attribute
            return [getattr(mod, attr) for mod, attr in self.slots]


def aot_module_training(gm: fx.GraphModule, example_inputs, inner_compile: Callable, *,
                        fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
                        decompositions: dict | None = None, wrap_training: Callable | None = None) -> Callable:
    """`wrap_training(compiled_fw, fw_gm, primals, n_copied_outputs)`, when given, may return a
    runner for the compiled forward that also wraps its backward (the backend's CUDA graphs)."""
    fw_compiler = fw_compiler or inner_compile
    bw_compiler = bw_compiler or inner_compile
    name = f"graph_{next(_graph_counter)}"
    try:
        first = _compile(gm, list(example_inputs), fw_compiler, bw_compiler, decompositions, name,
                         wrap_training)
    except TrainingUnsupported as exc:
        _log_fallback(name, exc)
        return gm
    return SpecializingRunner(gm, list(example_inputs), first,
                              lambda args, n: _compile(gm, args, fw_compiler, bw_compiler,
                                                       decompositions, n, wrap_training), name)


def _log_fallback(name, exc) -> None:
    log.warning("aot_training_fallback", graph=name, reason=str(exc),
                action="run the captured graph eagerly under autograd")
    logs.artifact("perf_hint", lambda: {"reason": str(exc), "graph": name,
                                        "fallback": "eager autograd"})


def _const(x):
    """A scalar graph input's concrete value (a SymInt from Dynamo: its hint, read without
    adding a guard)."""
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = getattr(x.node, "hint", None)
        if hint is None:
            raise TrainingUnsupported(f"symbolic scalar input {x} without a concrete value")
        return hint
    return x


def _meta(t):
    if isinstance(t, torch.Tensor):
        return (t.shape, t.stride(), t.dtype, t.device, t.requires_grad)
    if isinstance(t, (bool, int, float, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("const", _const(t))       # specialised on, like sizes
    return type(t)


class SpecializingRunner:
    """gm's calling convention over graphs specialised to input sizes/strides.

    The joint graph is traced with static shapes. When the frontend hands us a graph whose
    sizes may vary (automatic dynamic shapes) or a direct caller passes other sizes, a new
    specialisation is compiled for each new input layout, up to `LIMIT` (logged with the
    reason); beyond that the graph runs eagerly under autograd. Parameters are left out of
    the key (a module cannot change a parameter's shape without the frontend seeing a
    different module), so the per-call cost is proportional to the few activations."""

    LIMIT = 8

    def __init__(self, gm, example_inputs, first, compile_fn, name):
        self.gm = gm
        self.compile_fn = compile_fn
        self.name = name
        self.checked = [i for i, x in enumerate(example_inputs)
                        if not isinstance(x, torch.nn.Parameter)]
        self.n_args = len(example_inputs)
        self.runners = {self._key(example_inputs): first}
        self.runtime = first.runtime
        # our frontend's guards check every input's sizes, strides, dtype and requires_grad
        # before each call (aot/inference.py: inputs_guarded): the traced specialisation is the
        # only one that can be asked for, and the per-call key (a tuple per buffer and
        # activation) would only repeat that check
        self.guarded = first if inputs_guarded(gm, example_inputs) else None
        if self.guarded is not None:
            log.debug("training_input_key_skipped", graph=name, inputs=len(self.checked),
                      reason="the frontend's guards check every input before each call")
        self.compile_id = logs.current_compile_id()
        self.failed: set = set()

    def _key(self, args) -> tuple:
        return tuple([_meta(args[i]) for i in self.checked])

    def __call__(self, *args):
        if self.guarded is not None:
            return self.guarded(*args)
        key = self._key(args) if len(args) == self.n_args else None
        runner = self.runners.get(key)
        if runner is not None:
            return runner(*args)
        if not torch.is_grad_enabled():
            return self.gm(*args)         # nothing to differentiate: no reason to compile
        if key is None or key in self.failed or len(self.runners) >= self.LIMIT:
            if key not in self.failed:
                self.failed.add(key)
                why = (f"{len(self.runners)} specialisations exist (limit {self.LIMIT})"
                       if key is not None and len(self.runners) >= self.LIMIT
                       else "a different number of inputs")
                log.warning("compiled_graph_skipped", graph=self.name,
                            reason="inputs differ from the traced sizes/strides/dtypes and " + why,
                            action="run the graph eagerly under autograd")
            return self.gm(*args)
        name = f"{self.name}_s{len(self.runners)}"
        cid = self.compile_id
        ctx = logs.compile_context(*cid) if cid is not None else contextlib.nullcontext()
        with ctx:
            log.info("recompile_training_graph", graph=name,
                     reason="new input sizes/strides: " + _diff_meta(next(iter(self.runners)), key))
            try:
                runner = self.compile_fn(list(args), name)
            except TrainingUnsupported as exc:
                _log_fallback(name, exc)
                self.failed.add(key)
                return self.gm(*args)
        self.runners[key] = runner
        return runner(*args)


def _diff_meta(old: tuple, new: tuple) -> str:
    parts = []
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            continue
        if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "const":
            parts.append(f"scalar input {i}: {a[1]} -> {b[1]}")
        elif isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) == 5:
            parts.append(f"input {i}: size {tuple(a[0])} stride {a[1]} -> size {tuple(b[0])} "
                         f"stride {b[1]}")
        else:
            parts.append(f"input {i}: {a} -> {b}")
    return "; ".join(parts) or "input types changed"


def _compile(gm, example_inputs, fw_compiler, bw_compiler, decompositions, name,
             wrap_training=None) -> Callable:
    params = dict(gm.named_parameters())
    buffers = dict(gm.named_buffers())
    names = list(params) + list(buffers)
    access = _ParamAccess(gm, names)
    k = len(names)

    # Scalar inputs (sizes of a dynamic graph, Python numbers) are baked in as constants: the
    # SpecializingRunner keys on their values, so a new value gets its own specialisation.
    for x in example_inputs:
        if not isinstance(x, torch.Tensor) and _meta(x)[0] != "const":
            raise TrainingUnsupported(f"graph input of type {type(x).__name__}")
    tensor_pos = [i for i, x in enumerate(example_inputs) if isinstance(x, torch.Tensor)]
    consts = {i: _const(x) for i, x in enumerate(example_inputs) if i not in set(tensor_pos)}

    def fn(*primals):
        state = dict(zip(names, primals[:k]))
        args = list(consts.get(i) for i in range(len(example_inputs)))
        for i, t in zip(tensor_pos, primals[k:]):
            args[i] = t
        return torch.func.functional_call(gm, state, tuple(args))

    example_tensors = [example_inputs[i] for i in tensor_pos]
    primals = access() + example_tensors
    table = decompositions if decompositions is not None else training_decompositions()
    try:
        joint = trace_joint(fn, primals, table)
    except TrainingUnsupported:
        raise
    except Exception as exc:   # the captured graph runs in eager, so eager is a safe fallback
        raise TrainingUnsupported(f"joint tracing failed: {type(exc).__name__}: {exc}") from exc
    # parameters/buffers: lifted ones, and those the frontend passes as graph inputs
    joint.module_state = frozenset(range(k)) | frozenset(
        k + j for j, x in enumerate(example_tensors) if isinstance(x, torch.nn.Parameter))
    logs.artifact("aot_joint_graph", lambda: _readable(joint.graph, name), graph="joint",
                  graph_name=name, filename="aot_joint_graph.py")
    part = partition_joint(joint, strategy=config.aot.partitioner,
                           recompute_pointwise=config.aot.recompute_pointwise)
    log.info("partitioned", graph=name, strategy=part.strategy, saved=len(part.saved),
             recomputed=len(part.recomputed), saved_bytes=part.saved_bytes,
             baseline_bytes=part.baseline_bytes)
    logs.artifact("partition_decision", part.decision, graph_name=name)
    logs.artifact("aot_graphs", lambda: _decision_text(part, name), graph="partition",
                  graph_name=name, filename="aot_partition.txt")
    logs.artifact("aot_graphs", lambda: _readable(part.forward, name), graph="forward",
                  graph_name=name, filename="aot_forward.py")

    written = _write_back_in_graph(part.forward, joint.num_user_outputs, joint.mutated_inputs)
    # what the backward alone reads (saved values) may come out in any layout (channels_last)
    part.forward.meta[FREE_LAYOUT_OUTPUTS] = joint.num_user_outputs + (0 if written else len(joint.mutated_inputs))
    compiled_fw = fw_compiler(part.forward, primals)
    mutated = [] if written else joint.mutated_inputs
    # the user outputs and the values written back into inputs leave the graph; the rest are saved
    graphs = wrap_training(compiled_fw, part.forward, primals, joint.num_user_outputs + len(mutated)) \
        if wrap_training is not None else None
    runtime = TrainingRuntime(
        name=name, forward=graphs or compiled_fw, backward_graph=part.backward, bw_compiler=bw_compiler,
        num_primals=joint.num_primals, num_user_outputs=joint.num_user_outputs, graphs=graphs,
        mutated_inputs=mutated, diff_outputs=joint.diff_outputs,
        grad_input_indices=joint.grad_input_indices, compile_id=logs.current_compile_id(),
        backward_log=lambda: logs.artifact(
            "aot_graphs", lambda: _readable(part.backward, name), graph="backward", graph_name=name,
            filename="aot_backward.py", is_backward=True))
    _compile_backward_ahead(runtime, part.forward, part.backward, name)
    return _make_runner(gm, joint, runtime, access, tensor_pos)


def _compile_backward_ahead(runtime: TrainingRuntime, fw: fx.GraphModule, bw: fx.GraphModule,
                            name: str) -> None:
    """Compile the backward now (TrainingRuntime.compile_backward_ahead) where its inputs can be
    predicted: the saved values as the compiled forward returns them (its output nodes' values
    after the backend's layout passes, channels_last activations included), the tangents as
    traced. Otherwise, or if this fails, the first backward compiles it (the reason logged)."""
    from tracetorch.compiler.aot.output_layouts import graph_outputs
    why = _why_not_ahead()
    predicted = []
    if why is None:
        saved = graph_outputs(fw.graph)[1][runtime.saved_start:]
        placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
        tangents = placeholders[len(saved):]
        if len(placeholders) != len(saved) + len(runtime.tangent_positions):
            why = "the backward's inputs do not line up with the forward's saved values"
        else:
            predicted = [n.meta.get("val") if isinstance(n, fx.Node) else None for n in saved] + \
                [n.meta.get("val") for n in tangents]
            if not all(isinstance(v, torch.Tensor) for v in predicted):
                why = "a saved value or tangent without a traced tensor value"
            elif any(isinstance(d, torch.SymInt) for v in predicted for d in (*v.shape, *v.stride())):
                why = "symbolic sizes: the backward compiles for the sizes of its first call"
    if why is not None:
        log.debug("backward_compiled_lazily", graph=name, reason=why)
        return
    try:
        runtime.compile_backward_ahead(predicted)
    except Exception as e:       # never fatal: the first backward compiles it as before
        log.info("backward_compiled_lazily", graph=name,
                 reason=f"compiling ahead failed: {type(e).__name__}: {e}"[:300])


def _why_not_ahead() -> str | None:
    if not config.aot.compile_backward_ahead:
        return "aot.compile_backward_ahead is off"
    if config.repro.after == "backend":
        return "repro mode records the backward's real example inputs when it compiles"
    return None


def _write_back_in_graph(fw: fx.GraphModule, num_user_outputs: int, mutated: list[int]) -> bool:
    """Make the forward graph write each mutated input's new value into the input itself
    (`copy_` into its placeholder, as the inference graphs do) instead of returning it for the
    caller to copy: the backend then stores it from the kernel that computes it (a training
    batch norm's running statistics: three buffers per layer, each a copy kernel launched by the
    autograd function on every step, 159 of them per ResNet-50 forward). True when rewritten."""
    if not mutated:
        return False
    placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    output = next(n for n in fw.graph.nodes if n.op == "output")
    outs = list(output.args[0])
    new_values = outs[num_user_outputs:num_user_outputs + len(mutated)]
    if len(new_values) != len(mutated) or not all(isinstance(v, fx.Node) for v in new_values) \
            or any(i >= len(placeholders) for i in mutated):
        return False
    with fw.graph.inserting_before(output):
        for i, value in zip(mutated, new_values):
            copy = fw.graph.call_function(torch.ops.aten.copy_.default, (placeholders[i], value))
            copy.meta["val"] = placeholders[i].meta.get("val")     # copy_ returns its destination
    output.args = (outs[:num_user_outputs] + outs[num_user_outputs + len(mutated):],)
    fw.graph.lint()
    fw.recompile()
    log.debug("mutations_written_in_graph", inputs=list(mutated))
    return True


def _make_runner(gm, joint: JointGraph, runtime: TrainingRuntime, access: _ParamAccess,
                 tensor_pos: list[int]) -> Callable:
    """The runner of one specialisation (SpecializingRunner checked the inputs)."""
    leaf_kinds, aliased, spec = joint.leaf_kinds, joint.aliased, joint.out_spec
    apply = CompiledFunction.apply
    # the common case: every output leaf is a graph output, in order, returned as a flat
    # tuple/list (or a single tensor): no per-call pytree work
    # outputs that eager returns as the caller's input object (`a.add_(b)`, `a.contiguous()`):
    # handed back as that input, already updated by the write-back, unless the graph's value
    # carries autograd history the input does not (then the new tensor is the one to return)
    returned = returned_inputs(gm)
    direct = not returned and all(kind == "graph" and value == k for k, (kind, value) in enumerate(leaf_kinds))
    flat_type = spec.type if direct and spec.type in (tuple, list) and \
        spec.num_children == spec.num_leaves == len(leaf_kinds) else None
    single = direct and spec.num_children == 0 and spec.num_leaves == len(leaf_kinds) == 1

    def run(*args):
        primals = access() + [args[i] for i in tensor_pos]
        outs = apply(runtime, *primals)
        if flat_type is not None:
            return outs if flat_type is tuple else list(outs)
        if single:
            return outs[0]
        leaves = []
        for kind, value in leaf_kinds:
            if kind == "graph":
                leaves.append(outs[value])
            elif kind == "alias":
                # a view of an input in eager: regenerate the view so it aliases (and autograd
                # flows through the view op to the input, outside the compiled graph)
                a = aliased[value]
                base = primals[a.primal_index]
                leaves.append(base.as_strided(a.size, a.stride,
                                              base.storage_offset() + a.relative_offset))
            else:
                leaves.append(value)
        for pos, k in returned.items():
            leaf = leaves[pos]
            if isinstance(leaf, torch.Tensor) and not leaf.requires_grad:
                leaves[pos] = args[k]
        return pytree.tree_unflatten(leaves, spec)

    run.runtime = runtime
    return run
