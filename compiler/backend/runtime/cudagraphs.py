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
- Inputs the graph mutates (functionalized write-backs) are written in place when they persist
  (parameters, buffers, optimizer state: an optimizer step writes every parameter and its state,
  and copying each one in and out cost two kernels per tensor per step); their version counters
  are bumped after each replay, as the compiled graph's own code bumps them. Mutated inputs that
  do not persist are copied in and copied back after each replay.
- Outputs are copied out of the recording's memory, which the next replay overwrites. Copies
  in and out are batched (`copy_into`: one foreach copy, a few launches for hundreds of tensors).
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
from tracetorch.compiler.backend.runtime import cudagraph_buckets

log = logs.get_logger(__name__)


# -- who records and replays ------------------------------------------------------------------
class CudaRecorder:
    """Records with torch.cuda.CUDAGraph (on the side stream torch.cuda.graph uses). With
    share_pool, every recording of this recorder allocates from the first one's memory pool
    (a training forward and its backward: cudagraph_training.py says why that is safe)."""

    def __init__(self, share_pool: bool = False):
        self.share_pool = share_pool
        self.pool = None

    def record(self, run, written=()):
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

    def record(self, run, written=()):
        # a real recording executes nothing, so it draws no random numbers and writes no input:
        # the generator's state and the inputs written in place (`written`) are put back, and
        # the replay that follows draws and writes what the call would eagerly
        state = torch.random.get_rng_state()
        before = [t.clone() for t in written]
        outputs = run()
        torch.random.set_rng_state(state)
        with torch.no_grad():
            for t, old in zip(written, before):
                t.copy_(old)
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
    if any(not isinstance(x, (torch.Tensor, int, torch.SymInt)) for x in example_inputs):
        return "a scalar input that is not a size (its value would be frozen into the recording)"
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
    copied_in: list = field(default_factory=list)      # slots copied into static_inputs per replay
    copied_back: list = field(default_factory=list)    # mutated slots copied back after a replay
    written_in_place: list = field(default_factory=list)   # mutated slots the replay writes itself


def copy_into(dsts: list, srcs: list) -> None:
    """dst.copy_(src) for each pair, as one foreach copy where the tensors allow it: on CUDA a
    few launches for hundreds of tensors (a training step's gradients, an optimizer's state)
    instead of one launch per tensor."""
    if not dsts:
        return
    try:
        torch._foreach_copy_(dsts, srcs)
    except (RuntimeError, TypeError, AttributeError):    # mixed devices, an older torch
        for d, src in zip(dsts, srcs):
            d.copy_(src)


def clone_all(tensors: list) -> list:
    """Each tensor cloned (its layout kept, as Tensor.clone keeps it), with one batched copy."""
    out = [torch.empty_like(t) for t in tensors]
    copy_into(out, tensors)
    return out


def copy_out(outputs: list, n: int | None) -> list:
    """The recording's outputs as the caller gets them: the first n (all when None) tensors
    cloned out of the recording's memory, the rest as they are."""
    n = len(outputs) if n is None else n
    which = [k for k, o in enumerate(outputs[:n]) if isinstance(o, torch.Tensor)]
    result = list(outputs)
    for k, t in zip(which, clone_all([outputs[k] for k in which])):
        result[k] = t
    return result


def _bump_versions(tensors: list) -> None:
    if tensors:
        from tracetorch.compiler.backend.runtime.wrapper_support import increment_version
        increment_version(tensors)


class CudaGraphRunner:
    """Wraps a compiled graph (callable(*args) -> flat outputs) with record-and-replay."""

    def __init__(self, compiled, mutated: list[int], recorder=None, max_recordings: int | None = None,
                 copied_outputs: int | None = None, buckets=None):
        self.compiled = compiled
        # a dynamic size padded to its bucket (cudagraph_buckets.Plan), or None: every size its own
        self.buckets = buckets
        self.mutated = mutated
        # outputs copied out of the recording's memory: all (None), or the first n; a training
        # forward hands its saved values to the backward in place (cudagraph_training.py)
        self.copied_outputs = copied_outputs
        self.replayed = False                    # did the last call replay a recording?
        self.recorder = recorder or CudaRecorder()
        self.max_recordings = max_recordings or config.backend.cudagraph_max_recordings
        self.recordings: dict[tuple, Recording] = {}
        self.warm: dict[tuple, list] = {}        # signature -> the warm-up call's data pointers
        self.copied: set[int] = set(buckets.inputs) if buckets else set()   # slots always copied
        self.disabled: str | None = None
        self.compile_id = logs.current_compile_id()     # what its run-time events carry

    # the compiled graph's inspection attributes stay reachable (code, path, key, ...)
    def __getattr__(self, name):
        return getattr(self.compiled, name)

    def __call__(self, *args):
        self.replayed = False
        if self.disabled:
            return self.compiled(*args)
        fit = self.buckets.fit(args) if self.buckets is not None else None    # (size, bucket)
        if fit is not None:
            try:
                return self._bucketed(args, fit)
            except cudagraph_buckets.BucketError as e:
                # never a wrong or failed call: this graph records each size from now on (the
                # inference graph writes no input, so running the call again is safe)
                self.buckets = None
                with logs.compile_id_scope(self.compile_id):
                    log.warning("cudagraph_buckets_dropped", reason=str(e))
        sig = _signature(args)
        rec = self.recordings.get(sig)
        moved = self._moved_in_place(rec, args) if rec is not None else []
        if rec is not None and not moved:
            return self._replay(rec, args)
        with logs.compile_id_scope(self.compile_id):
            return self._record_and_run(sig, rec, moved, args)

    def _bucketed(self, args, fit):
        """A call replayed (or warmed up, or recorded) at its size's bucket."""
        n, b = fit
        sig = self.buckets.signature(_signature(args), args, b)
        rec = self.recordings.get(sig)
        moved = self._moved_in_place(rec, args) if rec is not None else []   # (never a padded slot)
        if rec is not None and not moved:
            return self._replay(rec, args, fit)
        with logs.compile_id_scope(self.compile_id):
            log.info("cudagraph_bucket", symbol=str(self.buckets.symbol), size=n, bucket=b)
            padded = self.buckets.pad(args, n, b)
            return self.buckets.cut(self._record_and_run(sig, rec, moved, padded), n, b)

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
        # inputs that persist are read and written where they are (module docstring); the others
        # are copied in (and back, when written)
        seen = self.warm.get(sig) or [None] * len(args)
        in_place = {i for i, a in enumerate(args)
                    if isinstance(a, torch.Tensor) and i not in self.copied
                    and (isinstance(a, torch.nn.Parameter) or _pointer(a) == seen[i])}
        # (a size passed as an int is part of the signature: the recording keeps its value)
        static = [a.clone() if isinstance(a, torch.Tensor) and i not in in_place else a
                  for i, a in enumerate(args)]
        written = [i for i in self.mutated if i in in_place]
        log.debug("cudagraph_inputs", read_in_place=len(in_place), written_in_place=len(written),
                  copied_in=sum(isinstance(a, torch.Tensor) for a in args) - len(in_place),
                  copied_back=len(self.mutated) - len(written))
        run = lambda: list(self.compiled(*static))  # noqa: E731  (the recorded launches)
        recorded = record_or_disable(self, run, written=[static[i] for i in written])
        if recorded is None:
            return None
        handle, outputs = recorded
        storages = {a.untyped_storage().data_ptr() for a in static if isinstance(a, torch.Tensor)}
        copied = outputs if self.copied_outputs is None else outputs[:self.copied_outputs]
        if any(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in storages for o in copied):
            self.disabled = "an output aliases an input"
            log.warning("cudagraph_disabled", reason=self.disabled)
            return None
        rec = Recording(handle, static, in_place, outputs, run,
                        copied_in=[i for i, a in enumerate(args) if i not in in_place
                                   and isinstance(a, torch.Tensor)],
                        copied_back=[i for i in self.mutated if i not in in_place],
                        written_in_place=written)
        self.recordings[sig] = rec
        return rec

    def _replay(self, rec: Recording, args, fit=None):
        static = rec.static_inputs
        padded = self.buckets.inputs if fit is not None else {}
        copied = [i for i in rec.copied_in if i not in padded]
        copy_into([static[i] for i in copied], [args[i] for i in copied])
        for i, axis in padded.items():          # the call's rows, then its last row repeated
            cudagraph_buckets.pad_into(static[i], args[i], axis)
        self.recorder.replay(rec)
        rec.replays += 1
        self.replayed = True
        copy_into([args[i] for i in rec.copied_back], [static[i] for i in rec.copied_back])
        _bump_versions([args[i] for i in rec.written_in_place])
        outputs = rec.outputs if fit is None else self.buckets.cut(rec.outputs, *fit)
        return copy_out(outputs, self.copied_outputs)


def record_or_disable(runner, run, written=(), **fields):
    """runner.recorder.record(run), or None with graphs turned off for `runner` (its `disabled`
    reason, logged) where recording fails: e.g. a host synchronisation inside the graph.
    `written`: the inputs the graph writes in place (the stand-in recorder puts them back)."""
    try:
        return runner.recorder.record(run, written)
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
    try:
        buckets, why_not = cudagraph_buckets.plan(gm, mutated)
    except Exception as e:          # the analysis is an optimisation: never a failed compile
        buckets, why_not = None, f"the bucket analysis failed: {type(e).__name__}: {e}"[:300]
    log.info("cudagraph_enabled", mutated_inputs=len(mutated), recorder=type(recorder).__name__,
             buckets=str(buckets.symbol) if buckets else None)
    if buckets is None and why_not != cudagraph_buckets.STATIC:
        log.info("cudagraph_buckets_refused", reason=why_not)
        logs.artifact("perf_hints", lambda: f"CUDA graphs record each size of a dynamic graph: {why_not}")
    return CudaGraphRunner(compiled, mutated, recorder, buckets=buckets)
