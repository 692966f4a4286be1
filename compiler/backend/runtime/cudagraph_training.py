"""CUDA graphs for training graphs (`compiler.compile(model, mode="reduce-overhead")`, or
`backend.cudagraphs`): a compiled forward and its backward, each recorded once per input signature
and replayed, so that a training step's launches cost one call each way instead of one per kernel.

What differs from inference graphs (cudagraphs.py, whose bookkeeping is reused):

- The forward's saved values (what only its backward reads) stay in the recording's memory: they
  are handed to autograd as they are, and the backward's recording reads them in place, so a step
  copies activations neither out nor in. The next replay of the forward overwrites them, so the
  forward replays only when no earlier replay's saved values still wait for their backward: each
  replay puts a token on its autograd context; the token dies with the context and is marked
  consumed once the backward has run and autograd has released the saved values (not after a
  backward with retain_graph=True). Otherwise the call runs as compiled, in fresh memory (a debug
  event `cudagraph_skipped` with the reason): two forwards before one backward stay right.
- The backward replays only for a context whose forward replayed (its saved values are the
  recording's); after a forward that ran as compiled, its backward runs as compiled too.
- User outputs and gradients are copied out of the recordings' memory (one batched copy each
  way): autograd accumulates gradients into .grad, which the next replay would overwrite. Inputs
  the forward writes (batch-norm statistics) are written in place where they persist, as for
  inference graphs (cudagraphs.py).
- Random ops (dropout) as for inference: refused unless backend.cudagraph_random_ops is on;
  then they draw from the default CUDA generator, which each replay advances, and the
  backward reads the masks the forward saved.
- The forward's and the backward's recordings (every input signature's) allocate from one memory
  pool, as PyTorch's cudagraph trees do: a recording only reuses memory that was free when it
  was recorded, i.e. other recordings' intermediates, which are dead outside their own replay;
  what must outlive a replay (saved values, static inputs, recorded outputs) stays held by its
  recording. Replays run in order on one stream and their outputs are copied out (or, for saved
  values, read by the next backward) before another replay runs.
"""
from __future__ import annotations

import weakref

import torch

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.backend.runtime import cudagraphs

log = logs.get_logger(__name__)


class ReplayToken:
    """Put on the autograd context of a forward that replayed: alive and not consumed while the
    recording's saved values are still that context's."""
    __slots__ = ("consumed", "__weakref__")

    def __init__(self):
        self.consumed = False


class TrainingGraphs:
    """The forward's runner (`call_boxed`, as the training runtime calls a compiled forward) and
    the maker of its backward's runner (`wrap_backward`)."""

    def __init__(self, compiled_forward, mutated: list[int], n_copied_outputs: int, recorder):
        self.compiled = compiled_forward
        self.recorder = recorder
        self.forward = cudagraphs.CudaGraphRunner(compiled_forward, mutated, recorder,
                                                  copied_outputs=n_copied_outputs)
        self._pending = None          # weak reference to the last replay's token
        self.token: ReplayToken | None = None     # the last call's token (None: not replayed)

    # the compiled forward's inspection attributes stay reachable (code, path, key, ...)
    def __getattr__(self, name):
        if name == "compiled":        # not set yet (unpickling, a failed __init__)
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def call_boxed(self, args: list):
        unboxed = tuple(args)
        args.clear()
        pending = self._pending() if self._pending is not None else None
        if pending is not None and not pending.consumed:
            self.token = None
            with logs.compile_id_scope(self.forward.compile_id):
                log.debug("cudagraph_skipped", reason="the saved values of an earlier replay still "
                          "wait for their backward: this call runs as compiled")
                return self.compiled(*unboxed)
        outs = self.forward(*unboxed)
        if self.forward.replayed:
            self.token = ReplayToken()
            self._pending = weakref.ref(self.token)
        else:
            self.token = None
        return outs

    def take_token(self) -> ReplayToken | None:
        token, self.token = self.token, None
        return token

    def wrap_backward(self, compiled_backward, gm: torch.fx.GraphModule, n_saved: int):
        """The backward's runner for calls whose forward replayed, or None when it cannot be
        recorded (the reason logged)."""
        if cudagraphs.mutated_inputs(gm):
            log.info("cudagraph_skipped", reason="the backward writes into its inputs", is_backward=True)
            return None
        return BackwardGraphs(compiled_backward, n_saved, self.recorder, self.forward.compile_id)


class BackwardGraphs:
    """Records the backward with its saved values read in place (the forward recording's memory)
    and the incoming gradients copied into the recording's own inputs; gradients copied out."""

    def __init__(self, compiled, n_saved: int, recorder, compile_id=None):
        self.compiled = compiled
        self.n_saved = n_saved
        self.recorder = recorder
        self.max_recordings = config.backend.cudagraph_max_recordings
        self.recordings: dict[tuple, cudagraphs.Recording] = {}
        self.warm: set[tuple] = set()
        self.disabled: str | None = None
        self.compile_id = compile_id        # the forward's compile: what its run-time events carry

    def call_boxed(self, args: list):
        if self.disabled:
            return self.compiled.call_boxed(args)
        sig = cudagraphs._signature(args)
        rec = self.recordings.get(sig)
        if rec is not None and not self._moved(rec, args):
            return self._replay(rec, args)
        with logs.compile_id_scope(self.compile_id):
            return self._record_and_run(sig, rec, args)

    def _moved(self, rec, args) -> bool:
        return any(args[i] is not rec.static_inputs[i] and
                   cudagraphs._pointer(args[i]) != cudagraphs._pointer(rec.static_inputs[i])
                   for i in range(self.n_saved))

    def _record_and_run(self, sig, rec, args: list):
        """A call with no recording to replay: warm up, record, or run as compiled."""
        if rec is not None:
            # the forward was recorded again (a new signature of its own): other saved memory
            log.info("cudagraph_record", reason="the saved values live in other memory than when "
                     "recorded", is_backward=True, recordings=len(self.recordings))
            del self.recordings[sig]
        if sig not in self.warm:          # compile and autotune outside any recording
            self.warm.add(sig)
            return self.compiled.call_boxed(args)
        if len(self.recordings) >= self.max_recordings:
            self.disabled = f"more than {self.max_recordings} input signatures"
            log.warning("cudagraph_disabled", reason=self.disabled, is_backward=True)
            return self.compiled.call_boxed(args)
        log.info("cudagraph_record", reason="first recording" if not self.recordings else
                 "new input signature", is_backward=True, recordings=len(self.recordings) + 1)
        rec = self._record(args)
        if rec is None:
            return self.compiled.call_boxed(args)
        self.recordings[sig] = rec
        return self._replay(rec, args)

    def _replay(self, rec, args: list):
        cudagraphs.copy_into([rec.static_inputs[i] for i in rec.copied_in], [args[i] for i in rec.copied_in])
        args.clear()
        self.recorder.replay(rec)
        rec.replays += 1
        return cudagraphs.copy_out(rec.outputs, None)

    def _record(self, args: list) -> cudagraphs.Recording | None:
        static = [a if i < self.n_saved or not isinstance(a, torch.Tensor) else a.clone()
                  for i, a in enumerate(args)]
        run = lambda: list(self.compiled(*static))  # noqa: E731  (the recorded launches)
        recorded = cudagraphs.record_or_disable(self, run, is_backward=True)
        if recorded is None:
            return None
        handle, outputs = recorded
        return cudagraphs.Recording(handle, static, set(range(self.n_saved)), outputs, run,
                                    copied_in=[i for i in range(self.n_saved, len(args))
                                               if isinstance(args[i], torch.Tensor)])


def maybe_wrap(compiled, gm: torch.fx.GraphModule, example_inputs, n_copied_outputs: int):
    """A training forward wrapped for CUDA graphs when backend.cudagraphs is on and the graph
    allows it (TrainingGraphs), else None."""
    if not config.backend.cudagraphs:
        return None
    if getattr(compiled, "code", None) is None:
        log.info("cudagraph_skipped", reason="the forward runs eagerly")
        return None
    why = cudagraphs.refusal(gm, example_inputs)
    if why:
        log.info("cudagraph_skipped", reason=why)
        logs.artifact("perf_hints", lambda: f"CUDA graphs not used for a training graph: {why}")
        return None
    recorder = cudagraphs.EagerRecorder() if config.testing.cudagraph_stand_in else \
        cudagraphs.CudaRecorder(share_pool=True)
    mutated = cudagraphs.mutated_inputs(gm)
    log.info("cudagraph_enabled", training=True, mutated_inputs=len(mutated), recorder=type(recorder).__name__)
    return TrainingGraphs(compiled, mutated, n_copied_outputs, recorder)
