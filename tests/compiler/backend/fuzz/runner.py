"""Run one fuzz program on one target, compiled vs eager, and classify the outcome.

Targets (TARGETS): "cpp" is torch.compile(fn, backend=compiler.backend) with the C++ code
generator; "triton" the same with `backend.cpu_codegen="triton"` (Triton kernels under
TRITON_INTERPRET=1); "frontend" is compiler.compile(fn) (our frontend and backend). All run with
`backend.fallback_on_error=False`, so a backend error is a crash, not a silent eager run.

Outcomes (worst over the program's calls): ok, rounding (each differing element explained by
one of _Judges' rules: no farther from the float64 reference than eager, compare; equal to the
program's answer with each op rounded once, rounded_reference; or inside eager's own answers
when its inexact math rounds by an ulp the other way, ulp_envelope), stride (values
right, an observable output stride differs from eager's), wrong (values, dtype, shape, a
mutated input, a returned input that is not the caller's tensor, or an output that is a view
of an input in one and not the other), crash (compiled raised
where eager did not), invalid (eager rejects the first call, or its answer is undefined: an
in-place op that reads memory it writes through another view, fuzz/overlap.py; not counted). A wrong or crash
that a baseline of the target (the same frontend with backend="eager"; PyTorch's Dynamo with its
own aot_eager) shows as well is reported as "upstream" (Dynamo, PyTorch's fake tensors) or
"frontend" (our frontend) instead: not the backend's.
`eager_graphs` lists why whole graphs ran eagerly (events graph_runs_eagerly, aot_runs_eagerly).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

from tracetorch import compiler, logs  # noqa: E402
from tracetorch.compiler import config  # noqa: E402

from . import compare, overlap, rounded_reference, ulp_envelope  # noqa: E402
from .generator import Program  # noqa: E402
from .values import clone_all, clone_input  # noqa: E402

ORDER = ["ok", "rounding", "stride", "upstream", "frontend", "wrong", "crash"]
EAGER_EVENTS = {"graph_runs_eagerly", "aot_runs_eagerly", "compiled_graph_skipped"}


def _dynamo(fn):
    return torch.compile(fn, backend=compiler.backend)


def _dynamo_eager(fn):
    return torch.compile(fn, backend="eager")


def _frontend_eager(fn):
    return compiler.compile(fn, backend="eager")


def _torch_aot_eager(fn):
    return torch.compile(fn, backend="aot_eager")


TARGETS = {
    "cpp": (_dynamo, {}),
    "triton": (_dynamo, {"backend.cpu_codegen": "triton"}),
    "frontend": (compiler.compile, {}),
    # baselines: the same frontend with no backend at all
    "dynamo_eager": (_dynamo_eager, {}),
    "frontend_eager": (_frontend_eager, {}),
    # PyTorch's own stack down to its aot stage (Dynamo, AOTAutograd on fake tensors, eager
    # kernels): what inductor's graphs see
    "torch_aot_eager": (_torch_aot_eager, {}),
}
#: a failure that one of the target's baselines shows too is not the backend's, tried in order:
#: status "upstream" (Dynamo's; or PyTorch's fake tensors, whose strides for a few ops differ
#: from the eager kernel's, so a traced reshape copies where eager's views: torch's aot_eager
#: and inductor answer the same) or "frontend" (ours, owned by compiler/frontend)
BASELINES = {"cpp": [("dynamo_eager", "upstream"), ("torch_aot_eager", "upstream")],
             "triton": [("dynamo_eager", "upstream"), ("torch_aot_eager", "upstream")],
             "frontend": [("frontend_eager", "frontend"), ("torch_aot_eager", "upstream")]}


@dataclasses.dataclass
class Result:
    status: str = "ok"
    detail: str = ""
    call: int = 0
    eager_graphs: list = dataclasses.field(default_factory=list)
    calls_run: int = 0

    def worse(self, status, detail, call):
        if ORDER.index(status) > ORDER.index(self.status):
            self.status, self.detail, self.call = status, detail, call


def _reference(prog_fn, inputs):
    """The program on float64 copies of its floating inputs, its sums exact (compare's
    docstring): its output leaves, then the inputs after the call (None if that fails)."""
    up = [clone_input(x).double() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else clone_input(x)
          for x in inputs]
    try:
        with warnings.catch_warnings(), compare.exact_sums():
            warnings.simplefilter("ignore")
            return compare.leaves(prog_fn(*up)) + up
    except Exception:
        return None


def _work_dtype(prog_fn, inputs):
    """The coarsest float dtype the program computes in: its inputs' and those its source names."""
    src = getattr(prog_fn, "__fuzz_source__", "")
    named = [d for d, names in _DTYPE_WORDS.items() if any(n in src for n in names)]
    return compare.coarsest([x.dtype for x in inputs if isinstance(x, torch.Tensor)] + named)


_DTYPE_WORDS = {torch.float16: ("float16", ".half()"), torch.bfloat16: ("bfloat16",),
                torch.float32: ("float32", ".float()", "linspace", "arange(", "torch.tensor(", "empty(")}


def _shares_memory(out, inp) -> bool:
    """`out` is (a view of) the input's memory: same storage, both non-empty."""
    if not (isinstance(out, torch.Tensor) and isinstance(inp, torch.Tensor)) or not out.numel() or not inp.numel():
        return False
    return out.untyped_storage().data_ptr() == inp.untyped_storage().data_ptr()


class _Judges:
    """The rules that call a difference rounding, elementwise, each element by any of them:
    within the float64 reference's rule (compare.rounding_mask, decided_mask), equal to the
    program's answer with each op rounded once (rounded_reference), or inside eager's answers
    under ulp moves of its inexact results (ulp_envelope). Each rule's answers for a call are
    computed on first use, cheapest first."""

    def __init__(self, prog_fn, inputs):
        self.prog_fn, self.inputs = prog_fn, inputs
        self.work_dtype = _work_dtype(prog_fn, inputs)
        self._answers = {}

    def _answer(self, name, make):
        if name not in self._answers:
            self._answers[name] = make(self.prog_fn, self.inputs) or []
        return self._answers[name]

    def _by_reference(self, k, e, c):
        ref = self._answer("reference", _reference)
        r = ref[k] if k < len(ref) else None
        if e.dtype.is_floating_point:
            return compare.rounding_mask(e, c, r, self.work_dtype)
        return compare.decided_mask(e, c, r)

    def _by_rounded_reference(self, k, e, c):
        answers = self._answer("rounded", rounded_reference.rounded_reference)
        return compare.matches_mask(c, answers[k], self.work_dtype) if k < len(answers) else None

    def _by_envelope(self, k, e, c):
        env = self._answer("envelope", ulp_envelope.envelope)
        return ulp_envelope.within_mask(c, env[k], self.work_dtype) if k < len(env) else None

    def explain(self, k, e, c) -> bool:
        """Every element of output leaf k where c differs from e is explained by some rule."""
        unexplained = compare.differs(e, c)
        for rule in (self._by_reference, self._by_rounded_reference, self._by_envelope):
            if not bool(unexplained.any()):
                break
            mask = rule(k, e, c)
            if mask is not None:
                unexplained &= ~mask
        return not bool(unexplained.any())


def _check_call(prog_fn, inputs, e_in, e_out, c_in, c_out) -> tuple[str, str] | None:
    """(status, detail) of the worst difference of one call, or None if all match."""
    e_leaves, c_leaves = compare.leaves(e_out), compare.leaves(c_out)
    if len(e_leaves) != len(c_leaves):
        return "wrong", f"{len(c_leaves)} outputs, eager {len(e_leaves)}"
    pairs = [(f"output {i}", i, e, c) for i, (e, c) in enumerate(zip(e_leaves, c_leaves))]
    pairs += [(f"input {j} after the call", len(e_leaves) + j, e, c) for j, (e, c) in enumerate(zip(e_in, c_in))]
    for i, (e, c) in enumerate(zip(e_leaves, c_leaves)):
        for j, x in enumerate(e_in):
            if e is x and c is not c_in[j]:
                return "wrong", f"output {i} is input {j} in eager, a new tensor compiled"
            if _shares_memory(e, x) != _shares_memory(c, c_in[j]):
                # a later write to the input shows in eager's output and not in the compiled one
                # (or the reverse)
                return "wrong", (f"output {i} is {'' if _shares_memory(e, x) else 'not '}a view of input {j} "
                                 f"in eager, {'' if _shares_memory(c, c_in[j]) else 'not '}compiled")
    worst = None
    judges = _Judges(prog_fn, inputs)
    for what, k, e, c in pairs:
        why = compare.mismatch(e, c)
        if why is None:
            continue
        if isinstance(e, torch.Tensor) and isinstance(c, torch.Tensor) and c.shape == e.shape \
                and c.dtype == e.dtype and judges.explain(k, e, c):
            worst = worst or ("rounding", f"{what}: {why}")
            continue
        return "wrong", f"{what}: {why}"
    if worst:
        return worst
    for i, (e, c) in enumerate(zip(e_leaves, c_leaves)):
        if compare.strides_differ(e, c):
            return "stride", f"output {i}: strides {c.stride()} != eager {e.stride()}"
    return None


def run_program(prog: Program, target: str, max_calls: int | None = None) -> Result:
    res = _run(prog, target, max_calls)
    for base, label in BASELINES.get(target, []) if res.status in ("wrong", "crash") else []:
        if _run(prog, base, max_calls).status in ("wrong", "crash"):
            res.status, res.detail = label, f"(also with {base}) {res.detail}"
            break
    return res


def _run(prog: Program, target: str, max_calls: int | None) -> Result:
    make, patch = TARGETS[target]
    res = Result()
    torch._dynamo.reset()
    eager_fn, compiled_fn = prog.function(), make(prog.function())
    with logs.testing.capture(names=EAGER_EVENTS, level=logging.WARNING, artifacts=None) as eagerly:
        with config.patch(**{"backend.fallback_on_error": False, **patch}), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(len(prog.calls) if max_calls is None else min(max_calls, len(prog.calls))):
                inputs = prog.make_inputs(k)
                e_in, c_in = clone_all(inputs), clone_all(inputs)
                try:
                    with overlap.WritesReadOverlap() as watch:
                        e_out = eager_fn(*e_in)
                    if watch.found:      # eager's own answer is undefined (overlap.py)
                        raise ValueError(f"undefined in eager: {watch.found[0]}")
                except Exception as ex:
                    if k == 0:
                        res.status, res.detail = "invalid", f"eager: {type(ex).__name__}: {ex}"[:300]
                        return res
                    continue     # eager rejects these sizes: nothing to compare
                try:
                    c_out = compiled_fn(*c_in)
                except Exception as ex:
                    res.worse("crash", f"{type(ex).__name__}: {ex}"[:400], k)
                    break
                res.calls_run += 1
                found = _check_call(eager_fn, inputs, e_in, e_out, c_in, c_out)
                if found:
                    res.worse(found[0], found[1][:400], k)
                    if found[0] == "wrong":
                        break
    res.eager_graphs = [str(ev.fields.get("reason", ""))[:160] for ev in eagerly]
    return res
