"""Wire a compiled forward graph and its backward graph into autograd.

One `TrainingRuntime` per captured graph holds both graphs; `CompiledFunction` is the
torch.autograd.Function that calls them. The backward graph is compiled right after the
forward (`compile_backward_ahead`, as AOTAutograd does when no size is symbolic), on fake
inputs in the layouts the compiled forward returns: its code generation runs while the worker
pool compiles the forward's Triton kernels, and its own kernels compile while the forward runs.
The first backward checks its real inputs against those layouts and compiles again where one
differs; where nothing could be predicted (symbolic sizes, a saved value without a traced
tensor value), in backend repro mode (it records real example inputs) or with
aot.compile_backward_ahead off, the backward is compiled the first time a gradient flows
through it. Either way it compiles under the forward's compile id with
`is_backward=True` on every event, so logs, the trace and the debug folder show it as that
graph's backward.

Double backward is not supported: the saved intermediates were computed without autograd
history. When a backward runs with create_graph=True, its results are routed through
`_DoubleBackwardUnsupported`, whose backward raises a clear error, only if a second
differentiation actually reaches it.
"""
from __future__ import annotations

import threading
from typing import Callable

import torch

from tracetorch import logs
from tracetorch.compiler.aot import output_layouts

log = logs.get_logger(__name__)


class TrainingRuntime:
    def __init__(self, *, name: str, forward: Callable, backward_graph, bw_compiler: Callable,
                 num_primals: int, num_user_outputs: int, mutated_inputs: list[int],
                 diff_outputs: list[bool], grad_input_indices: list[int], compile_id,
                 backward_log: Callable[[], None] | None = None, graphs=None):
        self.name = name
        self.forward = forward
        # CUDA graphs (backend/runtime/cudagraph_training.py): `forward` is then their runner
        self.graphs = graphs
        self._graph_backward = None
        self.backward_graph = backward_graph
        self.bw_compiler = bw_compiler
        self.num_primals = num_primals
        self.num_user_outputs = num_user_outputs
        self.mutated_inputs = mutated_inputs
        self.diff_outputs = diff_outputs
        self.grad_input_indices = grad_input_indices
        self.compile_id = compile_id
        self.backward_log = backward_log
        self._compiled_backward = None
        # (compiled backward, the input layouts it was compiled for): compile_backward_ahead
        self._ahead = None
        self._lock = threading.Lock()
        # precomputed for the per-call paths (CompiledFunction.forward/backward)
        self.call_forward = boxed_caller(forward)
        self.saved_start = num_user_outputs + len(mutated_inputs)
        self.non_diff_positions = [i for i, d in enumerate(diff_outputs) if not d]
        self.tangent_positions = [i for i, d in enumerate(diff_outputs) if d]
        self.all_primals_get_grads = grad_input_indices == list(range(num_primals))

    def _context(self):
        cid = self.compile_id
        if cid is None:
            import contextlib
            return contextlib.nullcontext()
        return logs.compile_context(cid.frame_id, cid.frame_compile_id, cid.attempt)

    def backward(self, inputs: list, replayed: bool = False):
        """inputs: saved values + tangents, a list this call owns: it is handed on boxed (the
        compiled graph clears it and drops each saved value after its last use), so the
        caller must hold no other reference to them. `replayed`: the forward that saved them
        replayed a CUDA graph (its backward may then replay one too)."""
        call = self._call_backward
        if call is None:
            call = self._compile_backward(inputs)
        if replayed and self._graph_backward is not None:
            return self._graph_backward(inputs)
        return call(inputs)

    _call_backward = None

    def compile_backward_ahead(self, predicted: list) -> None:
        """Compile the backward now, for inputs like `predicted` (fake tensors: the saved
        values as the compiled forward returns them, then the tangents as traced)."""
        with self._lock:
            if self._call_backward is not None or self._ahead is not None:
                return
            with self._context():
                compiled = self._compile_for(predicted, lazy=False)
            self._ahead = (compiled, [_layout(t) for t in predicted])

    def _compile_for(self, inputs: list, *, lazy: bool):
        log.info("compile_backward", graph=self.name, is_backward=True, lazy=lazy, num_inputs=len(inputs))
        if self.backward_log is not None:
            self.backward_log()
            self.backward_log = None            # the graph's text, once
        _sync_input_layouts(self.backward_graph, inputs, self.name)
        compiled = self.bw_compiler(self.backward_graph, inputs)
        log.debug("compiled_backward", graph=self.name, is_backward=True,
                  boxed=hasattr(compiled, "call_boxed"))
        return compiled

    def _take_ahead(self, inputs: list):
        """The backward compiled ahead, if the real inputs have the layouts it was compiled for."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        compiled, layouts = ahead
        for i, (t, want) in enumerate(zip(inputs, layouts)):
            got = _layout(t)
            if got != want:
                log.info("backward_recompiled", graph=self.name, is_backward=True,
                         reason=f"input {i} arrived as {_describe(got)}, compiled ahead for {_describe(want)}")
                return None
        return compiled

    def _compile_backward(self, inputs: list):
        with self._lock:
            if self._call_backward is None:
                compiled = self._take_ahead(inputs)
                if compiled is None:
                    with self._context():
                        compiled = self._compile_for(inputs, lazy=True)
                self._compiled_backward = compiled
                if self.graphs is not None:
                    n_saved = len(inputs) - len(self.tangent_positions)
                    runner = self.graphs.wrap_backward(compiled, self.backward_graph, n_saved)
                    self._graph_backward = runner.call_boxed if runner is not None else None
                self._call_backward = boxed_caller(compiled)
        return self._call_backward


def _layout(t):
    """What a backward compiled for input `t` assumes of it: what the lazy compile takes from a
    real input (_sync_input_layouts: sizes and strides) and its dtype. Not the device: both
    compiles take it from the traced value, and PyTorch's own meta functions trace some CPU
    results as CUDA ones (flash attention's philox seed and offset, 0-d int64 CPU tensors)."""
    if not isinstance(t, torch.Tensor):
        return None
    return tuple(t.shape), tuple(t.stride()), t.dtype


def _describe(layout) -> str:
    if layout is None:
        return "a non-tensor"
    shape, stride, dtype = layout
    return f"{str(dtype).removeprefix('torch.')}{list(shape)} strides {list(stride)}"


def boxed_caller(compiled: Callable) -> Callable[[list], object]:
    """call(args: list): the compiled graph's boxed entry when it has one (our backend's
    output code clears `args` and frees each input after its last use), else a plain call
    that empties the list first so that only the callee's frame holds the inputs."""
    boxed = getattr(compiled, "call_boxed", None)
    if boxed is not None:
        return boxed

    def call(args: list):
        unboxed = tuple(args)
        args.clear()
        return compiled(*unboxed)
    return call


def _sync_input_layouts(gm, inputs: list, name: str) -> None:
    """The backward's inputs were produced by the compiled forward, whose output strides may
    differ from what fake tracing predicted (channels_last activations, backend/conv_layout.py).
    Inner compilers read layouts from the nodes' meta, so we make the placeholders describe the
    tensors that will actually arrive and re-propagate (a convolution's gradient comes out in its
    input's layout); the forward is deterministic, so every later call sees the same layouts.
    Gradients keep their traced strides (a clone back where they changed), as eager's do."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    saved = {n: n.meta.get("val") for n in gm.graph.nodes}
    changed = 0
    for node, t in zip(placeholders, inputs):
        val = node.meta.get("val")
        if not isinstance(t, torch.Tensor) or not isinstance(val, torch.Tensor):
            continue
        if tuple(val.shape) == tuple(t.shape) and tuple(val.stride()) == tuple(t.stride()):
            continue
        log.debug("backward_input_layout", graph=name, input=node.name, is_backward=True,
                  traced_stride=list(val.stride()), actual_stride=list(t.stride()))
        fake_mode = getattr(val, "fake_mode", None)
        if fake_mode is not None:
            node.meta["val"] = fake_mode.from_tensor(t, static_shapes=True)
            changed += 1
    if not changed:
        return
    try:
        output_layouts.repropagate(gm, output_layouts.fake_mode_of(gm))
    except Exception as e:    # the wrapper's ensure_layout still copies ATen results to the meta's strides
        for n, v in saved.items():
            if n.op != "placeholder":
                n.meta["val"] = v
        log.info("backward_layouts_kept", graph=name, is_backward=True, inputs_changed=changed,
                 reason=f"re-propagation failed: {type(e).__name__}: {e}"[:300])
        return
    added: list = []
    why = output_layouts.restore_output_strides(gm, saved, len(output_layouts.graph_outputs(gm.graph)[1]), added)
    gm.graph.lint()
    gm.recompile()
    log.info("backward_layouts_repropagated", graph=name, is_backward=True, inputs_changed=changed,
             gradients_restored=len(added), note=why)


class CompiledFunction(torch.autograd.Function):
    """apply(runtime, *primals) -> the graph's (non-aliased) user outputs."""

    @staticmethod
    def forward(ctx, rt: TrainingRuntime, *primals):
        outs = rt.call_forward(list(primals))
        nu, start = rt.num_user_outputs, rt.saved_start
        if start != nu:
            for i, value in zip(rt.mutated_inputs, outs[nu:start]):
                primals[i].copy_(value)    # write back what eager's in-place op would have left
        ctx.rt = rt
        if rt.graphs is not None:
            ctx.replay_token = rt.graphs.take_token()
        ctx.save_for_backward(*outs[start:])
        if rt.non_diff_positions:
            ctx.mark_non_differentiable(*[outs[i] for i in rt.non_diff_positions])
        return tuple(outs[:nu])

    @staticmethod
    def backward(ctx, *grad_outputs):
        rt: TrainingRuntime = ctx.rt
        inputs = list(ctx.saved_tensors)
        # tangents were traced contiguous; gradients from e.g. sum() arrive expanded
        inputs += [grad_outputs[i].contiguous() for i in rt.tangent_positions]
        # the list now holds the only references autograd lets us drop: release ctx's (unless
        # retain_graph), so each saved value is freed after its last use in the backward
        # graph, as eager frees a node's saved tensors once that node has run
        ctx.maybe_clear_saved_tensors()
        token = getattr(ctx, "replay_token", None)
        create_graph = torch.is_grad_enabled()   # autograd runs backward under no_grad otherwise
        if create_graph:
            with torch.no_grad():
                grads = rt.backward(inputs, token is not None)
        else:
            grads = rt.backward(inputs, token is not None)
        if token is not None:
            _release(ctx, token)
        if rt.all_primals_get_grads:
            result = list(grads)
        else:
            result = [None] * rt.num_primals
            for i, g in zip(rt.grad_input_indices, grads):
                result[i] = g
        if create_graph:
            result = _guard_double_backward(result, rt.name)
        return (None, *result)


def _release(ctx, token) -> None:
    """The forward's recording may be replayed again once autograd has let go of the saved
    values (not after backward(retain_graph=True): a second backward would read them)."""
    try:
        ctx.saved_tensors
    except RuntimeError:        # released: "Trying to backward through the graph a second time"
        token.consumed = True


_MARKER = None


def _guard_double_backward(grads: list, name: str) -> list:
    global _MARKER
    if _MARKER is None:
        _MARKER = torch.zeros((), requires_grad=True)
    idx = [i for i, g in enumerate(grads) if isinstance(g, torch.Tensor)]
    wrapped = _DoubleBackwardUnsupported.apply(name, _MARKER, *[grads[i] for i in idx])
    out = list(grads)
    for i, w in zip(idx, wrapped):
        out[i] = w
    return out


class _DoubleBackwardUnsupported(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, marker, *grads):
        ctx.graph_name = name
        return tuple(g.detach() for g in grads)

    @staticmethod
    def backward(ctx, *_):
        log.error("double_backward_unsupported", graph=ctx.graph_name, is_backward=True)
        raise RuntimeError(
            "tracetorch: double backward (differentiating a gradient, e.g. "
            "torch.autograd.grad(..., create_graph=True) followed by another backward) through "
            f"compiled graph {ctx.graph_name} is not supported: its saved intermediates carry no "
            "autograd history. Run this code eagerly, or compile it with backend='eager'.")
