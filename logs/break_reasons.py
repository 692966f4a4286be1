"""The registry of graph-break reasons: an id, an explanation and hints for every reason a
graph break (or a frame that capture gives up on) can have.

Break reasons are written where the frontend meets something it cannot capture, as text
("print() (a side effect outside the graph)"). `explain(reason)` finds the registry entry whose
pattern matches that text; the frontend adds its `id`, `explanation` and `hints` to the
`graph_break` trace record and the `graph_breaks` log text, tracetui shows them, and tlparse
shows them in the record's file. Every reason gets an entry: `TT-GB-000` is the catch-all.

The ids are stable: a reason that changes its words keeps its id (patterns may be widened, never
reused for another meaning). `python -m tracetorch.logs.break_reasons` prints the registry.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["BreakReason", "REGISTRY", "explain", "by_id", "registry_text"]


@dataclass(frozen=True)
class BreakReason:
    id: str
    title: str
    explanation: str
    hints: tuple[str, ...] = ()
    patterns: tuple[str, ...] = field(default=(), repr=False)
    frame_skipped: bool = False  # capture gives up on the frame (it runs eagerly)

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "explanation": self.explanation,
                "hints": list(self.hints)}


# Order matters: the first entry whose pattern matches wins (specific before general). The
# "cannot resume" reasons are suffixes the frontend appends to the break's own reason; they are
# checked first, since they decide what happens to the rest of the frame.
REGISTRY: tuple[BreakReason, ...] = (
    BreakReason(
        "TT-GB-101", "graph break inside a loop",
        "The break is inside a for/while loop. Capture cannot end the graph in the middle of a "
        "loop and resume after it, so the loop (and what follows it in this function) runs "
        "eagerly: nothing of it is compiled, although the functions it calls are compiled on "
        "their own.",
        ("Move the code that breaks (print, .item(), a branch on tensor data) out of the loop.",
         "Or put the loop body in its own function: that function is compiled, and breaks, on "
         "its own.",
         "For a data-dependent branch inside the loop, use torch.where or torch.cond."),
        (r"graph break inside a loop",), frame_skipped=True),
    BreakReason(
        "TT-GB-102", "graph break inside a try or with block",
        "The break is inside a try block, an inlined comprehension or the with block of a "
        "context manager capture does not trace; the graph cannot end there, so the rest of "
        "the function runs eagerly.",
        ("Move the breaking call out of the try/with block.",),
        (r"inside a try block", r"inside a with block", r"inlined comprehension"),
        frame_skipped=True),
    BreakReason(
        "TT-GB-103", "cannot resume after the break",
        "Capture cannot make a resume function at this point (a live closure over the "
        "function's variables, a cleared local on the stack, or an instruction it cannot resume "
        "after), so the rest of the function runs eagerly.",
        ("Restructure so that the break happens at a statement boundary of the function itself.",),
        (r"closure over this function's variables is alive", r"cannot resume after",
         r"cleared local on the stack"), frame_skipped=True),
    BreakReason(
        "TT-GB-001", "side effect: print",
        "print() writes to the terminal, which a compiled graph cannot do: the graph ends before "
        "the call, print runs eagerly, and a new graph starts after it.",
        ("Remove the print from the compiled region, or log outside the model's forward.",
         "To inspect values inside compiled code, use TRACE_LOGS=graph_code or the debug folder "
         "(TRACE_COMPILE_DEBUG=1)."),
        (r"^print\(\)",)),
    BreakReason(
        "TT-GB-002", "data-dependent control flow",
        "A Python branch (if/while/and/or/bool()) depends on the values in a tensor, which are "
        "not known while capturing: the graph ends at the branch and the branch runs eagerly.",
        ("Use torch.where(cond, a, b) to compute both sides and select.",
         "Or torch.cond(pred, true_fn, false_fn) to keep the branch in the graph.",
         "If the value is really a constant, compute it outside the compiled function."),
        (r"data-dependent control flow", r"data-dependent branch", r"bool\(\) of a tensor")),
    BreakReason(
        "TT-GB-003", "data-dependent output shape",
        "The operation's output shape depends on tensor values (e.g. nonzero, unique, boolean "
        "masking), which capture does not know.",
        ("Use a fixed-size alternative (masking with torch.where instead of boolean indexing).",),
        (r"data-dependent output shape",)),
    BreakReason(
        "TT-GB-004", "tensor value needed in Python",
        "Python code needs a tensor's value (.item(), .tolist(), int()/float() of a tensor, "
        "numpy()): the graph ends, the value is computed, and capture resumes with it.",
        ("Keep the value as a 0-d tensor and use tensor operations on it.",),
        (r"\.item\(\)", r"\.tolist\(\)", r"Tensor\.numpy", r"numpy of a tensor",
         r"\b(int|float)\(\) of a tensor")),
    BreakReason(
        "TT-GB-005", "numpy",
        "A numpy operation that capture does not model (in-place changes, data access, "
        "unsupported arguments).",
        ("Use the torch equivalent of the numpy call.",),
        (r"numpy",)),
    BreakReason(
        "TT-GB-006", "call capture cannot trace",
        "A call to a function capture cannot trace into (a C extension, a builtin with "
        "arguments it does not model, a generator or coroutine): it runs eagerly between two "
        "graphs.",
        ("If the function is pure, mark it with torch._dynamo.assume_constant_result or move it "
         "outside the compiled region.",
         "TRACE_LOGS=graph_breaks shows the full user stack of the call."),
        (r"^call to ", r"^builtin ", r"has effects outside the graph", r"generator",
         r"coroutine", r"\braised\b")),
    BreakReason(
        "TT-GB-007", "unsupported Python construct",
        "An opcode, attribute, subscript or object kind capture does not support.",
        ("Rewrite the construct in plain tensor code, or move it out of the compiled region.",),
        (r"opcode \w+ is not supported", r"has no attribute", r"^subscript of",
         r"^unary ", r"super\(\)", r"^yield", r"^setting Tensor\.", r"global")),
    BreakReason(
        "TT-GB-008", "dynamic shapes",
        "A property of a tensor with symbolic (dynamic) sizes that capture cannot express.",
        ("Mark fewer dimensions dynamic, or pass dynamic=False.",),
        (r"dynamic sizes", r"symbolic", r"Sym\(")),
    BreakReason(
        "TT-GB-009", "return value cannot be rebuilt",
        "The function's return value cannot be rebuilt after the graph (e.g. a closure made in "
        "the frame): the graph stops before the return.",
        ("Return tensors or plain containers of tensors from compiled functions.",),
        (r"return value cannot be rebuilt",)),
    BreakReason(
        "TT-GB-000", "other",
        "A construct capture does not support. The reason text says what it was.",
        ("TRACE_LOGS=graph_breaks prints every break with its user stack.",),
        (r"",)),
)

_COMPILED = [(r, [re.compile(p) for p in r.patterns]) for r in REGISTRY]


def explain(reason: str) -> BreakReason:
    """The registry entry for a break reason's text (TT-GB-000 when nothing more specific)."""
    text = reason if isinstance(reason, str) else str(reason)
    for entry, pats in _COMPILED:
        if any(p.search(text) for p in pats):
            return entry
    return REGISTRY[-1]


def by_id(reason_id: str) -> BreakReason | None:
    return next((r for r in REGISTRY if r.id == reason_id), None)


def registry_text() -> str:
    out = []
    for r in REGISTRY:
        out.append(f"{r.id}  {r.title}{'  (capture gives up on the frame)' if r.frame_skipped else ''}")
        out.append(f"    {r.explanation}")
        out += [f"    hint: {h}" for h in r.hints]
    return "\n".join(out)


if __name__ == "__main__":
    print(registry_text())
