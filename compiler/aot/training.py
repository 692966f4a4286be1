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

import itertools
from typing import Callable

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

import logs
from compiler import config
from compiler.aot.autograd_function import CompiledFunction, TrainingRuntime
from compiler.aot.joint import JointGraph, TrainingUnsupported, trace_joint, training_decompositions
from compiler.aot.partition import Partition, partition_joint

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

    def __call__(self) -> list:
        return [getattr(mod, attr) for mod, attr in self.slots]


def aot_module_training(gm: fx.GraphModule, example_inputs, inner_compile: Callable, *,
                        fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
                        decompositions: dict | None = None) -> Callable:
    fw_compiler = fw_compiler or inner_compile
    bw_compiler = bw_compiler or inner_compile
    name = f"graph_{next(_graph_counter)}"
    try:
        return _compile(gm, list(example_inputs), fw_compiler, bw_compiler, decompositions, name)
    except TrainingUnsupported as exc:
        log.warning("aot_training_fallback", graph=name, reason=str(exc),
                    action="run the captured graph eagerly under autograd")
        logs.artifact("perf_hint", lambda: {"reason": str(exc), "graph": name,
                                            "fallback": "eager autograd"})
        return gm


def _compile(gm, example_inputs, fw_compiler, bw_compiler, decompositions, name) -> Callable:
    params = dict(gm.named_parameters())
    buffers = dict(gm.named_buffers())
    names = list(params) + list(buffers)
    access = _ParamAccess(gm, names)
    k = len(names)

    def fn(*primals):
        state = dict(zip(names, primals[:k]))
        return torch.func.functional_call(gm, state, tuple(primals[k:]))

    primals = access() + list(example_inputs)
    table = decompositions if decompositions is not None else training_decompositions()
    try:
        joint = trace_joint(fn, primals, table)
    except TrainingUnsupported:
        raise
    except Exception as exc:   # the captured graph runs in eager, so eager is a safe fallback
        raise TrainingUnsupported(f"joint tracing failed: {type(exc).__name__}: {exc}") from exc
    # parameters/buffers: lifted ones, and those the frontend passes as graph inputs
    joint.module_state = frozenset(range(k)) | frozenset(
        k + i for i, x in enumerate(example_inputs) if isinstance(x, torch.nn.Parameter))
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

    compiled_fw = fw_compiler(part.forward, primals)
    runtime = TrainingRuntime(
        name=name, forward=compiled_fw, backward_graph=part.backward, bw_compiler=bw_compiler,
        num_primals=joint.num_primals, num_user_outputs=joint.num_user_outputs,
        mutated_inputs=joint.mutated_inputs, diff_outputs=joint.diff_outputs,
        grad_input_indices=joint.grad_input_indices, compile_id=logs.current_compile_id(),
        backward_log=lambda: logs.artifact(
            "aot_graphs", lambda: _readable(part.backward, name), graph="backward", graph_name=name,
            filename="aot_backward.py", is_backward=True))
    return _make_runner(gm, joint, runtime, access, example_inputs)


def _meta(t):
    return (t.shape, t.stride(), t.dtype, t.device, t.requires_grad) \
        if isinstance(t, torch.Tensor) else type(t)


def _make_runner(gm, joint: JointGraph, runtime: TrainingRuntime, access: _ParamAccess,
                 example_inputs) -> Callable:
    leaf_kinds, aliased, spec = joint.leaf_kinds, joint.aliased, joint.out_spec
    # Graphs are specialised to the traced sizes/strides. The frontend guards on them; this
    # check keeps a direct caller correct too. Parameters are skipped (a module cannot change
    # a parameter's shape without the frontend seeing a different module): per-call cost stays
    # proportional to the few activations, not to the many parameters.
    checked = [i for i, x in enumerate(example_inputs) if not isinstance(x, torch.nn.Parameter)]
    expected = [_meta(example_inputs[i]) for i in checked]
    n_args = len(example_inputs)
    warned = set()

    def run(*args):
        if len(args) != n_args or any(_meta(args[i]) != e for i, e in zip(checked, expected)):
            key = tuple(_meta(a) for a in args)
            if key not in warned:
                warned.add(key)
                log.warning("compiled_graph_skipped", graph=runtime.name,
                            reason="inputs differ from the traced sizes/strides/dtypes",
                            action="run the graph eagerly under autograd")
            return gm(*args)
        primals = access() + list(args)
        outs = CompiledFunction.apply(runtime, *primals)
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
        return pytree.tree_unflatten(leaves, spec)

    run.runtime = runtime
    return run
