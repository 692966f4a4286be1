"""CUDA graphs for compiled inference graphs: `compiler.compile(model, mode="reduce-overhead")`
or the config option `backend.cudagraphs` (TRACE_BACKEND_CUDAGRAPHS=1).

A compiled graph launches one kernel (or ATen call) at a time from Python; on models made of
many small kernels that host work, not the GPU, sets the speed. Recorded into a CUDA graph, the
same launches replay with one call. What makes that safe here, each refusal logged with its
reason (the graph then runs as compiled, never wrong):

- The graph is recorded once per input signature (sizes, strides, dtypes, devices), at most
  `backend.cudagraph_max_recordings` of them; a new signature records anew (a logged
  `cudagraph_record` event with the reason), one beyond the limit runs without graphs.
- The first call of each signature runs without recording: Triton kernels compile and autotune
  at their first launch, which must not happen inside a recording.
- Inputs that persist are read in place: the recording reads their memory. An input persists
  when it is an nn.Parameter, or when its slot held the very same memory (data pointer) at the
  warm-up call and at the recording call: a module's buffers (ResNet-50's 106 batch-norm
  statistics were copied on every replay, 1.75 ms of host time per call) and constants. Other
  inputs are copied into static buffers before each replay. If other memory arrives in a slot
  read in place, the graph is re-recorded (logged), never written through; a slot other than a
  parameter's is copied from then on.
- Inputs the graph mutates (functionalized write-backs) are copied back after each replay.
- Outputs are copied out of the recording's memory, which the next replay overwrites.
- Random ops are refused unless `backend.cudagraph_random_ops` is on (experimental: a GPT-2
  training step with dropout crashed inside autograd's backward on the H100, cause not yet
  found). With it, ops that draw from the default CUDA generator are recorded: a recording
  registers that generator's state, and each replay draws at its current offset and advances it
  by what the recorded ops consume, as the same ops run eagerly would (so a model trained with
  dropout draws the same masks as eagerly under the same seed). Fused attention with dropout
  stays refused: it returns its RNG state as tensors for the backward, on the GPU during a
  recording and on the CPU otherwise.
- Refused outright: inputs on the CPU or on several devices, random ops with a generator of
  their own or drawing on the CPU (their state would be frozen into the recording), outputs that
  alias an input.

`Recorder` is the only part that talks to CUDA: tests run the same bookkeeping on CPU tensors
with `EagerRecorder`, which re-runs the graph on replay and writes into the recorded outputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tracetorch import logs
from tracetorch.compiler import config

log = logs.get_logger(__name__)


# -- who records and replays ------------------------------------------------------------------
class CudaRecorder:
    """Records with torch.cuda.CUDAGraph (on the side stream torch.cuda.graph uses). With
    share_pool, every recording of this recorder allocates from the first one's memory pool
    (a training forward and its backward: cudagraph_training.py says why that is safe)."""

    def __init__(self, share_pool: bool = False):
        self.share_pool = share_pool
        self.pool = None

    def record(self, run):
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, pool=self.pool):
            outputs = run()
        if self.share_pool and self.pool is None:
            self.pool = graph.pool()
        return graph, outputs

    def replay(self, rec: "Recording") -> None:
        rec.handle.replay()


class EagerRecorder:
    """A stand-in with the same memory behaviour on any device: replay re-runs the graph and
    writes into the recorded output tensors, as a real replay does (CPU tests of the
    bookkeeping; config testing.cudagraph_stand_in)."""

    def record(self, run):
        # a real recording executes nothing, so it draws no random numbers: the generator's state
        # is put back, and the replay that follows draws what the call would draw eagerly
        state = torch.random.get_rng_state()
        outputs = run()
        torch.random.set_rng_state(state)
        return None, outputs

    def replay(self, rec: "Recording") -> None:
        for static, fresh in zip(rec.outputs, rec.run()):
            # an output that is an input read in place (a training forward saves its weights)
            # is not written by a real replay: writing it here would bump its version counter
            if isinstance(static, torch.Tensor) and static.data_ptr() != fresh.data_ptr():
                static.copy_(fresh)


# -- when not to use graphs --------------------------------------------------------------------
def refusal(gm: torch.fx.GraphModule, example_inputs) -> str | None:
    """Why this graph must not be recorded, or None."""
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    devices = {x.device for x in tensors}
    if not tensors:
        return "the graph has no tensor inputs"
    if any(d.type == "cpu" for d in devices) and not config.testing.cudagraph_stand_in:
        return "an input is on the CPU"
    if len(devices) > 1:
        return f"inputs on several devices ({', '.join(sorted(map(str, devices)))})"
    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        return "a symbolic size or scalar input (dynamic shapes are recorded per concrete size " \
               "only when sizes come from tensors)"
    for node in gm.graph.nodes:
        why = _random_op_refusal(node) if node.op == "call_function" else None
        if why:
            return f"random op {node.target}: {why}"
    return None


def _argument(node: torch.fx.Node, schema, name: str):
    for i, arg in enumerate(schema.arguments):
        if arg.name == name:
            return node.args[i] if i < len(node.args) else node.kwargs.get(name, arg.default_value)
    return None


_FROZEN = "its generator state would be frozen into the graph"


def _random_op_refusal(node: torch.fx.Node) -> str | None:
    """Why a node's random draws must not be recorded, or None (not random, or drawing from the
    default CUDA generator, whose state a recording registers, with random ops allowed). ATen
    tags every attention op as seeded for its dropout_p: with p = 0 it draws nothing."""
    if torch.Tag.nondeterministic_seeded not in getattr(node.target, "tags", ()):
        return None
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return f"no schema says which generator it draws from ({_FROZEN})"
    if any(a.name == "dropout_p" for a in schema.arguments):
        p = _argument(node, schema, "dropout_p")
        if isinstance(p, (int, float)) and p == 0:
            return None
        return "attention with dropout (it returns its RNG state as tensors for the backward)"
    if not config.backend.cudagraph_random_ops:
        return "backend.cudagraph_random_ops is off"
    if _argument(node, schema, "generator") is not None:
        return f"it draws from a generator of its own ({_FROZEN})"
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else (val,)
    on_cpu = any(isinstance(v, torch.Tensor) and v.device.type == "cpu" for v in vals)
    if on_cpu and not config.testing.cudagraph_stand_in:
        return f"it draws on the CPU ({_FROZEN})"
    return None


def mutated_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of the inputs a functionalized graph writes back into (copy_ into a placeholder)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    return sorted({index[n.args[0]] for n in gm.graph.nodes
                   if n.op == "call_function" and n.target is torch.ops.aten.copy_.default
                   and n.args and n.args[0] in index})


def _pointer(a):
    """Where a tensor's data starts (None for other arguments and empty tensors)."""
    return a.data_ptr() if isinstance(a, torch.Tensor) and a.numel() else None


def _signature(args) -> tuple:
    return tuple((tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor)
                 else (type(a), a) for a in args)


@dataclass
class Recording:
    handle: object
    static_inputs: list          # the tensors the recording reads, slot by slot
    in_place: set[int]           # slots read in place (parameters): their tensor must stay the same
    outputs: list                # the tensors the recording writes
    run: object = None
    replays: int = field(default=0)


class CudaGraphRunner:
    """Wraps a compiled graph (callable(*args) -> flat outputs) with record-and-replay."""

    def __init__(self, compiled, mutated: list[int], recorder=None, max_recordings: int | None = None,
                 copied_outputs: int | None = None):
        self.compiled = compiled
        self.mutated = mutated
        # outputs copied out of the recording's memory: all (None), or the first n; a training
        # forward hands its saved values to the backward in place (cudagraph_training.py)
        self.copied_outputs = copied_outputs
        self.replayed = False                    # did the last call replay a recording?
        self.recorder = recorder or CudaRecorder()
        self.max_recordings = max_recordings or config.backend.cudagraph_max_recordings
        self.recordings: dict[tuple, Recording] = {}
        self.warm: dict[tuple, list] = {}        # signature -> the warm-up call's data pointers
        self.copied: set[int] = set()            # slots seen with other memory: always copied
        self.disabled: str | None = None
        self.compile_id = logs.current_compile_id()     # what its run-time events carry

    # the compiled graph's inspection attributes stay reachable (code, path, key, ...)
    def __getattr__(self, name):
        return getattr(self.compiled, name)

    def __call__(self, *args):
        self.replayed = False
        if self.disabled:
            return self.compiled(*args)
        sig = _signature(args)
        rec = self.recordings.get(sig)
        moved = self._moved_in_place(rec, args) if rec is not None else []
        if rec is not None and not moved:
            return self._replay(rec, args)
        with logs.compile_id_scope(self.compile_id):
            return self._record_and_run(sig, rec, moved, args)

    def _record_and_run(self, sig, rec, moved, args):
        """A call with no recording to replay: warm up, record, or run as compiled."""
        if moved:
            # a parameter stays read in place (replaced once, say by load_state_dict(assign=True));
            # any other slot is copied from now on (a user input that was the same tensor twice)
            self.copied.update(i for i in moved if not isinstance(args[i], torch.nn.Parameter))
            log.info("cudagraph_record", reason="a slot read in place holds other memory than when "
                                                "recorded", slots=moved[:8], recordings=len(self.recordings))
            del self.recordings[sig]
            rec = self._record(sig, args)
            if rec is None:
                return self.compiled(*args)
        elif rec is None:
            if sig not in self.warm:
                # warm-up: compile and autotune outside any recording
                self.warm[sig] = [_pointer(a) for a in args]
                return self.compiled(*args)
            if len(self.recordings) >= self.max_recordings:
                self.disabled = f"more than {self.max_recordings} input signatures"
                log.warning("cudagraph_disabled", reason=self.disabled)
                logs.artifact("perf_hints", lambda: f"CUDA graphs off for a graph: {self.disabled}")
                return self.compiled(*args)
            log.info("cudagraph_record", reason="new input signature" if self.recordings else
                     "first recording", recordings=len(self.recordings) + 1,
                     sizes=[list(a.shape) for a in args if isinstance(a, torch.Tensor)][:8])
            rec = self._record(sig, args)
            if rec is None:
                return self.compiled(*args)
        return self._replay(rec, args)

    def _moved_in_place(self, rec: Recording, args) -> list[int]:
        """The slots read in place whose memory is not the recording's."""
        return [i for i in rec.in_place if _pointer(args[i]) != _pointer(rec.static_inputs[i])]

    def _record(self, sig, args) -> Recording | None:
        # inputs that persist and that the graph does not write are read where they are (module
        # docstring); anything written is copied
        seen = self.warm.get(sig) or [None] * len(args)
        in_place = {i for i, a in enumerate(args)
                    if isinstance(a, torch.Tensor) and i not in self.mutated and i not in self.copied
                    and (isinstance(a, torch.nn.Parameter) or _pointer(a) == seen[i])}
        static = [a if i in in_place else a.clone() for i, a in enumerate(args)]
        run = lambda: list(self.compiled(*static))  # noqa: E731  (the recorded launches)
        recorded = record_or_disable(self, run)
        if recorded is None:
            return None
        handle, outputs = recorded
        storages = {a.untyped_storage().data_ptr() for a in static}
        copied = outputs if self.copied_outputs is None else outputs[:self.copied_outputs]
        if any(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in storages for o in copied):
            self.disabled = "an output aliases an input"
            log.warning("cudagraph_disabled", reason=self.disabled)
            return None
        rec = Recording(handle, static, in_place, outputs, run)
        self.recordings[sig] = rec
        return rec

    def _replay(self, rec: Recording, args):
        for i, a in enumerate(args):
            if i not in rec.in_place:
                rec.static_inputs[i].copy_(a)
        self.recorder.replay(rec)
        rec.replays += 1
        self.replayed = True
        for i in self.mutated:
            if i not in rec.in_place:
                args[i].copy_(rec.static_inputs[i])
        n = len(rec.outputs) if self.copied_outputs is None else self.copied_outputs
        return [o.clone() if isinstance(o, torch.Tensor) and k < n else o for k, o in enumerate(rec.outputs)]


def record_or_disable(runner, run, **fields):
    """runner.recorder.record(run), or None with graphs turned off for `runner` (its `disabled`
    reason, logged) where recording fails: e.g. a host synchronisation inside the graph."""
    try:
        return runner.recorder.record(run)
    except Exception as e:
        runner.disabled = f"recording failed: {type(e).__name__}: {e}"[:300]
        log.warning("cudagraph_disabled", reason=runner.disabled, **fields)
        return None


def maybe_wrap(compiled, gm: torch.fx.GraphModule, example_inputs):
    """`compiled` wrapped for CUDA graphs when backend.cudagraphs is on and the graph allows it."""
    if not config.backend.cudagraphs:
        return compiled
    if getattr(compiled, "code", None) is None:       # an eager fallback: nothing to record
        log.info("cudagraph_skipped", reason="the graph runs eagerly")
        return compiled
    why = refusal(gm, example_inputs)
    if why:
        log.info("cudagraph_skipped", reason=why)
        logs.artifact("perf_hints", lambda: f"CUDA graphs not used for a graph: {why}")
        return compiled
    recorder = EagerRecorder() if config.testing.cudagraph_stand_in else CudaRecorder()
    mutated = mutated_inputs(gm)
    log.info("cudagraph_enabled", mutated_inputs=len(mutated), recorder=type(recorder).__name__)
    return CudaGraphRunner(compiled, mutated, recorder)
