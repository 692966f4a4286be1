"""Turn individual trace records (ours or PyTorch's) into the facts tracetui shows.

Each function takes one `TraceEvent` and returns plain data; none of them raises on odd
input, because traces can be damaged or come from other versions of either writer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Record kinds, by what they tell us. Ours first, PyTorch's after.
GRAPH_KEYS = ("dynamo_output_graph", "graph", "graph_code")
AOT_KEYS = ("aot_forward_graph", "aot_backward_graph", "aot_inference_graph", "aot_joint_graph")
GUARD_KEYS = ("guards", "verbose_guards", "dynamo_guards", "dynamo_cpp_guards_str")
BREAK_KEYS = ("graph_break", "dynamo_graph_break_reason")
RECOMPILE_KEYS = ("recompile", "recompile_reasons", "guard_failure")
FAIL_KEYS = ("compile_error", "dynamo_error", "backend_error", "compile_failure")
KERNEL_KEYS = ("kernel", "kernel_code")
OUTPUT_KEYS = ("inductor_output_code", "output_code")
IR_KEYS = ("ir_pre_fusion", "ir_post_fusion", "schedule", "fusion_decision")
SOURCE_KEYS = ("source", "user_source")


@dataclass
class GraphBreak:
    reason: str
    instruction: str = ""
    filename: str = ""
    lineno: int | None = None
    source_line: str = ""
    user_stack: list[dict] = field(default_factory=list)
    event: int = -1
    reason_id: str = ""        # ours: the registry id (logs/break_reasons.py); PyTorch: GBnnnn
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    frame_skipped: bool = False  # capture gave up on the frame: it runs eagerly
    eager_from: int | None = None  # the rest of the function runs eagerly from this line on
    link: str = ""             # PyTorch's page about this graph break


_EAGER_FROM = re.compile(r"runs eagerly from line (\d+) on")
_PT_SKIPPED = re.compile(r"graph break in (?:a for/while )?loop|Skipping the (?:frame|function)|"
                         r"frame skipped", re.I)
_PT_GB_LINK = re.compile(r"(https://\S+/gb/(gb\d+)\.html)")


def skipped_frame_text(text: str) -> bool:
    """Does a PyTorch failure text say Dynamo skipped the frame (it then runs eagerly)?"""
    return bool(_PT_SKIPPED.search(text))


def _with_registry(gb: GraphBreak) -> GraphBreak:
    """Fill the id, explanation and hints from our registry when the record has none (older
    traces of ours); the registry is data, never code from the trace."""
    from tracetorch.logs.break_reasons import explain
    if not gb.reason_id:
        why = explain(gb.reason)
        gb.reason_id, gb.explanation, gb.hints = why.id, why.explanation, list(why.hints)
        gb.frame_skipped = gb.frame_skipped or why.frame_skipped and gb.eager_from is None
    return gb


@dataclass
class GuardFailure:
    """Why a cache entry did not match: the reason a recompile happened."""

    entry: str  # compile id of the cache entry that failed, e.g. "0/0"
    text: str
    guard: str = ""
    source: str = ""
    expected: str = ""
    actual: str = ""
    user_location: str = ""
    user_code: str = ""  # the user's source line that created the guard, when recorded
    what: str = ""  # what failed, in words, without the values (they are `change`)
    event: int = -1

    @property
    def change(self) -> str:
        """The changed value, as shown: "0.5 → 0.7", or "was 0.5" when only that is known."""
        if self.expected and self.actual:
            return f"{self.expected} → {self.actual}"
        return f"was {self.expected}" if self.expected else ""


@dataclass
class Kernel:
    name: str
    code: str
    language: str = "python"
    fx_nodes: list[str] = field(default_factory=list)
    user_lines: list[tuple[str, int]] = field(default_factory=list)
    event: int = -1
    module: bool = False  # the whole generated module (output code), not one kernel


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


_FRAME_TEXT = re.compile(r"^(.*):(\d+) in ([^:\s]+):?\s?(.*)$")


def frames_of(trace, raw: Any) -> list[dict]:
    """Stack frames as dicts; accepts dicts (PyTorch's layout) and our "file:line in fn: code"."""
    out = []
    for fr in raw if isinstance(raw, list) else []:
        if isinstance(fr, str):
            m = _FRAME_TEXT.match(fr)
            out.append({"filename": m.group(1), "line": int(m.group(2)), "name": m.group(3),
                        "loc": m.group(4)} if m else {"filename": "", "line": None, "name": "",
                                                      "loc": fr})
        elif isinstance(fr, dict):
            out.append(fr)
    return trace.resolve_frames(out)


# -- graph breaks -------------------------------------------------------------------------
_PT_AT = re.compile(r"Graph break in user code at (.+):(\d+)")
_PT_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s+(.*)')


def graph_break(ev, trace) -> GraphBreak:
    if ev.key == "graph_break":  # ours: JSON with the facts already separated
        d = as_dict(ev.payload_json()) or ev.metadata
        stack = frames_of(trace, d.get("user_stack"))
        line = d.get("lineno")
        reason = _text(d.get("reason")) or "(no reason recorded)"
        m = _EAGER_FROM.search(reason)
        hints = d.get("hints")
        gb = GraphBreak(reason=reason,
                        instruction=_text(d.get("instruction")), filename=_text(d.get("filename")),
                        lineno=line if isinstance(line, int) else None,
                        source_line=_text(d.get("source_line")), user_stack=stack, event=ev.index,
                        reason_id=_text(d.get("reason_id")), explanation=_text(d.get("explanation")),
                        hints=[_text(h) for h in hints] if isinstance(hints, list) else [],
                        frame_skipped=d.get("frame_skipped") is True,
                        eager_from=int(m.group(1)) if m else None)
        return _with_registry(gb)
    # PyTorch: a text block ("Graph break in user code at f:l", "Graph Break Reason: ...",
    # "User code traceback:" with File/line frames, then the compiler's own traceback).
    text = ev.payload
    user_part = text.split("Traceback (most recent call last)", 1)[0]
    at = _PT_AT.search(text)
    reason = ""
    expl_text, hints = "", []
    m = re.search(r"Graph Break Reason: (.*?)\n\s*\n(.*?)(?:\n\s*\n|\Z)", text, re.S)
    if m:
        # PyTorch >= 2.8: "Graph Break Reason: <what was traced>", blank line, then the graph
        # break type and "Explanation: ..."; the type + explanation is what a user needs
        title, _, body = m.group(2).strip().partition("\n")
        expl = re.search(r"Explanation: (.*)", body)
        reason = f"{title.strip()}: {expl.group(1).strip()}" if expl else m.group(1).strip()
        expl_text = expl.group(1).strip() if expl else ""
    else:
        m = re.search(r"Graph Break Reason: (.*)", text)
        reason = m.group(1).strip() if m else ""
    first_block = user_part.split("*** While handling", 1)[0]
    hints = [h.strip() for h in re.findall(r"^\s*Hint: (.*)$", first_block, re.M)]
    link = _PT_GB_LINK.search(first_block)
    skipped = bool(_PT_SKIPPED.search(user_part))
    if skipped and "skipping" not in reason.lower():
        reason += " (graph break in a loop: the frame is skipped and runs eagerly)"
    stack = [{"filename": f, "line": int(ln), "name": n, "loc": loc.strip()}
             for f, ln, n, loc in _PT_FRAME.findall(user_part.split("User code traceback:", 1)[-1])]
    instr = re.search(r"attempting to trace (\w+)", text)
    return GraphBreak(reason=reason or text.strip().split("\n")[0][:300],
                      instruction=instr.group(1) if instr else "",
                      filename=at.group(1) if at else (stack[-1]["filename"] if stack else ""),
                      lineno=int(at.group(2)) if at else (stack[-1]["line"] if stack else None),
                      source_line=stack[-1]["loc"] if stack else "", user_stack=stack,
                      event=ev.index, reason_id=link.group(2).upper() if link else "",
                      explanation=expl_text, hints=hints, frame_skipped=skipped,
                      link=link.group(1) if link else "")


# -- recompiles ---------------------------------------------------------------------------
_EXPECTED = re.compile(r"expected\s*([^,]+?),\s*actual\s*(.+?)\s*$", re.I | re.M)
_ENTRY = re.compile(r"^\s*-?\s*(\d+/\d+(?:_\d+)?):\s*(.*)$", re.S)
_ENTRY_LINE = re.compile(r"^\s*-?\s*\d+/\d+(?:_\d+)?: ")
_QUOTED = re.compile(r"'([A-Za-z_]\w*)'")
# PyTorch: "guard   # user code  # path/file.py:10 in fn", then "User stack trace:" and frames
_PT_COMMENT_LOC = re.compile(r"#\s*([^\s#]+\.py):(\d+)(?: in \w+)?\s*$")
_PT_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*(.*)')
_EQ = re.compile(r"^(.*?)\s*==\s*(.+)$")
MAX_SHOWN = 300


def one_line(text: str, limit: int = MAX_SHOWN) -> str:
    """A reason shown in a table row: whitespace (a multi-line module repr) collapsed, cut with
    an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _split_reason(entry: str, text: str, event: int) -> GuardFailure:
    text = text.strip()
    body, _, user_stack = text.partition("\nUser stack trace:")
    head = body.split("\n", 1)[0]
    gf = GuardFailure(entry=entry, text=text, event=event)
    frames = _PT_USER_FRAME.findall(user_stack)
    if frames:  # PyTorch: the user's stack of the guard, innermost last
        fn, ln, code = frames[-1]
        gf.user_location, gf.user_code = f"{fn}:{ln}", code.strip()
    loc = _PT_COMMENT_LOC.search(head)
    if "  #" in head:  # PyTorch's "guard   # code  # file:line in fn"
        guard, _, comment = head.partition("  #")
        gf.guard = guard.strip()
        if not gf.user_code:
            gf.user_code = comment.split("  #")[0].strip(" #")
        if loc and not gf.user_location:
            gf.user_location = f"{loc.group(1)}:{loc.group(2)}"
    m = _EXPECTED.search(body)
    if m:
        gf.expected, gf.actual = m.group(1).strip(), m.group(2).strip()
    if not gf.guard:
        # ours: "<guard>: <what failed>. expected X, actual Y"; the last part after "; " is the
        # guard (earlier parts say what else changed, e.g. "module L['self'] was mutated")
        last = head.rsplit("; ", 1)[-1]
        g, sep, _ = last.partition(": ")
        gf.guard = g.strip() if sep and ("L[" in g or "G[" in g or "==" in g) else one_line(head)
    what = head.partition("  #")[0].strip() if "  #" in head else head
    gf.what = re.sub(r"[.;,]?\s*expected\s.*$", "", what, flags=re.I).strip() if gf.expected else what
    if gf.expected and gf.guard.lower().find("expected") > 0:  # ours: the value is its column
        gf.guard = re.sub(r"[.;,]?\s*expected\s.*$", "", gf.guard, flags=re.I | re.S).strip()
    if not gf.expected:
        eq = _EQ.match(gf.guard)
        if eq:  # PyTorch reports the guard only: the value it expected, not the new one
            gf.expected = eq.group(2).strip()
    q = _QUOTED.search(head)
    if q:
        gf.source = f"L['{q.group(1)}']"
    elif "L[" in head or "G[" in head:
        gf.source = head.split(" ", 1)[0]
    else:
        gf.source = gf.guard.split(" ", 1)[0]
    return gf


def _reason_texts(lines: list[str]) -> list[str]:
    """Reasons of a text payload: a new one starts at "N/M: "; other lines continue it (PyTorch's
    reasons span lines: the guard, then "User stack trace:" and its frames)."""
    out: list[str] = []
    for line in lines:
        if _ENTRY_LINE.match(line) or not out:
            out.append(line)
        else:
            out[-1] += "\n" + line
    return out


def guard_failures(ev) -> list[GuardFailure]:
    """Reasons in a recompile record: one per (cache entry, failed guard)."""
    if ev.key == "guard_failure":
        d = as_dict(ev.payload_json()) or ev.metadata
        text = _text(d.get("reason") or d.get("guard"))
        gf = _split_reason(_text(d.get("cache_entry") or d.get("entry")), text, ev.index)
        for k in ("guard", "source", "expected", "actual", "user_location"):
            if d.get(k):
                setattr(gf, k, _text(d[k]))
        if d.get("guard_location") and not d.get("user_location"):  # what our writer calls it
            gf.user_location = _text(d["guard_location"])
        return [gf]
    located: list[tuple[str, str]] = []
    if ev.key == "recompile":
        d = as_dict(ev.payload_json()) or ev.metadata
        reasons = d.get("reasons") or []
        lines = []
        for r in reasons if isinstance(reasons, list) else [reasons]:
            if isinstance(r, dict):  # ours: {"compile_id": "0/0", "failures": [...], "guard_locations": [...]}
                locs = r.get("guard_locations") if isinstance(r.get("guard_locations"), list) else []
                for i, f in enumerate(r.get("failures") or []):
                    lines.append(f"{r.get('compile_id', '')}: {f}")
                    located.append((lines[-1], _text(locs[i]) if i < len(locs) and locs[i] else ""))
            else:
                lines.append(str(r))
    else:  # recompile_reasons: PyTorch writes a JSON list, or one reason as plain text
        data = ev.payload_json()
        lines = [str(x) for x in data] if isinstance(data, list) else _reason_texts(
            ev.payload.splitlines())
    where = dict(located)
    out = []
    for line in lines:
        m = _ENTRY.match(str(line))
        gf = (_split_reason(m.group(1), m.group(2), ev.index) if m
              else _split_reason("", str(line), ev.index) if str(line).strip() else None)
        if gf is None:
            continue
        if where.get(line) and not gf.user_location:
            gf.user_location = where[line]
        out.append(gf)
    return out


def reason_key(gf: GuardFailure) -> tuple:
    """What makes two failures the same reason, whichever cache entry they were checked against."""
    return (gf.guard or one_line(gf.text), gf.expected, gf.actual)


@dataclass
class RecompileReason:
    """One distinct reason (deduplicated over the cache entries it failed for)."""

    first: GuardFailure
    entries: list[str] = field(default_factory=list)
    seen_before: str = ""  # the earlier compile id of this frame that already reported it


def distinct_reasons(failures: list[GuardFailure]) -> list[RecompileReason]:
    """Failures grouped by reason, in order of first appearance; changed values first."""
    groups: dict[tuple, RecompileReason] = {}
    for gf in failures:
        g = groups.get(reason_key(gf))
        if g is None:
            g = groups[reason_key(gf)] = RecompileReason(gf)
        elif not g.first.user_location and gf.user_location:
            g.first = gf
        if gf.entry and gf.entry not in g.entries:
            g.entries.append(gf.entry)
    rows = list(groups.values())
    return sorted(rows, key=lambda r: not (r.first.expected or r.first.actual))


# -- guards ---------------------------------------------------------------------------------
_LOC = re.compile(r"#\s*(?:(.*?)\s*#\s*)?([^\s#]+\.py):(\d+)(?: in (\w+))?\s*$")


def guard_lines(ev) -> list[tuple[str, str]]:
    """(guard text, user location 'file:line' or '') for each guard in a guards record."""
    data = ev.payload_json()
    out: list[tuple[str, str]] = []
    if isinstance(data, list):  # PyTorch dynamo_guards / our json guards
        for g in data:
            g = as_dict(g)
            code = _text(g.get("code") or g.get("guard") or g.get("text"))
            if not code and g.get("source"):
                code = f"{g.get('kind', '')} {g.get('source')} {g.get('expected', '')}".strip()
            loc = _text(g.get("user_location"))
            us = g.get("user_stack")
            if not loc and isinstance(us, list) and us and isinstance(us[-1], dict):
                loc = f"{us[-1].get('filename', '')}:{us[-1].get('line', '')}"
            out.append((code, loc))
        return out
    for line in ev.payload.splitlines():
        if not line.strip():
            continue
        m = _LOC.search(line)
        loc = f"{m.group(2)}:{m.group(3)}" if m else ""
        out.append((line.rstrip(), loc))
    return out


# -- kernels ----------------------------------------------------------------------------------
# A provenance source string: "file.py:12" (synthetic traces) or "file.py:12: code" (ours,
# compiler/backend/lowering/graph.py user_location); the first ":digits" ending at ":" or the end.
_SOURCE_LOC = re.compile(r"(.+?):(\d+)(?::|$)")


def kernel(ev, trace) -> Kernel:
    if ev.key == "kernel":
        d = as_dict(ev.payload_json()) or ev.metadata
        prov = d.get("provenance")
        if isinstance(prov, list):  # ours: [{"node": fx node, "source": "file:line" or ""}]
            prov = {"fx_nodes": [p.get("node") for p in prov if isinstance(p, dict) and p.get("node")],
                    "user_lines": [p.get("source") for p in prov if isinstance(p, dict)]}
        prov = as_dict(prov)
        lines = []
        for item in prov.get("user_lines") or []:
            if isinstance(item, dict) and isinstance(item.get("line"), int):
                fn = item.get("filename")
                fn = trace.strings.get(fn, str(fn)) if isinstance(fn, int) else _text(fn)
                lines.append((fn, item["line"]))
            elif isinstance(item, str):
                m = _SOURCE_LOC.match(item)
                if m:
                    lines.append((m.group(1), int(m.group(2))))
        lines = list(dict.fromkeys(lines))  # several fx nodes often share one user line
        backend = _text(d.get("language") or d.get("backend"))
        src = _text(d.get("source") or d.get("code"))
        return Kernel(name=_text(d.get("name")) or f"kernel@{ev.lineno}", code=src,
                      language="cpp" if backend in ("cpp", "c++", "c") and "def " not in src
                      else "python",
                      fx_nodes=[str(n) for n in prov.get("fx_nodes") or []], user_lines=lines,
                      event=ev.index)
    # kernel_code (one kernel's text) / inductor_output_code / output_code (the whole module)
    name = _text(ev.metadata.get("kernel") or ev.metadata.get("filename")) or ev.key
    lang = "cpp" if _text(ev.metadata.get("filename")).endswith((".cpp", ".c")) else "python"
    return Kernel(name=name.rsplit("/", 1)[-1], code=ev.payload, language=lang, event=ev.index,
                  module=ev.key in OUTPUT_KEYS)


# -- metrics ---------------------------------------------------------------------------------
STAGE_FIELDS = {
    # field in compilation_metrics -> stage label (ours and PyTorch's names)
    "entire_frame_compile_time_s": "total",
    "frontend_time_s": "frontend (capture)",
    "dynamo_time_before_restart_s": "frontend before restart",
    "aot_time_s": "aot",
    "backend_compile_time_s": "backend (incl. aot)",
    "inductor_compile_time_s": "inductor",
    "lowering_time_s": "lowering",
    "scheduling_time_s": "scheduling",
    "codegen_time_s": "codegen",
    "code_gen_time_s": "codegen",
}


def stage_times(metrics: dict) -> list[tuple[str, float]]:
    out = []
    for k, label in STAGE_FIELDS.items():
        v = metrics.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((label, float(v)))
    stages = metrics.get("stages")  # ours may send {stage: seconds}
    for k, v in as_dict(stages).items():
        if isinstance(v, (int, float)):
            out.append((str(k), float(v)))
    return out


def failure_text(ev) -> str:
    d = as_dict(ev.payload_json()) or ev.metadata
    for k in ("error", "fail_reason", "message", "reason"):
        if d.get(k) and isinstance(d[k], str):
            return _text(d[k])
    return exception_line(ev.payload) or ev.key


def exception_line(text: str) -> str:
    """What a failure says: for a Python traceback, its exception line ("Type: message"), not
    "Traceback (most recent call last):"; else the first line."""
    text = text.strip()
    if not text:
        return ""
    lines = text.splitlines()
    if text.startswith("Traceback (most recent call last)"):
        lines = [ln for ln in lines[1:] if ln and not ln.startswith((" ", "\t"))] or lines
    first = lines[0].strip()
    # "X raised:" / "...failed with:" says what comes next: the cause is the next line
    rest = [ln.strip() for ln in text.splitlines()[text.splitlines().index(lines[0]) + 1:]
            if ln.strip()] if first.endswith(":") else []
    return (f"{first} {rest[0]}" if rest else first)[:300]


# -- PyTorch's inductor output code: kernels and their source lines ------------------------------
# A kernel in the output module: `name = async_compile.cpp_pybinding([...], r'''...''')` (C++)
# or `name = async_compile.triton('name', '''...''', ...)` (Triton).
_PT_KERNEL = re.compile(r"^(\w+) = async_compile\.(cpp_pybinding|cpp|triton)\((.*?)^(?:''', |''')",
                        re.M | re.S)
_PT_FILE_COMMENT = re.compile(r"^\s*# File: (.+?):(\d+) in \w+, code: (.*)$")
_PT_NODE_LINE = re.compile(r"^\s*(\w+)(?:: \"[^\"]*\")? = (?:torch\.ops\.)?(?:aten\.)?([\w.]+)")
_TRIPLE = "'" * 3
_PT_SOURCE_NODES = re.compile(r"Source Nodes: \[([^\]]*)\]")


def post_grad_lines(graph_text: str) -> dict[str, tuple[str, int, str]]:
    """FX node name -> (file, line, code) from the `# File: f:l in fn, code: ...` comments
    PyTorch writes above the nodes of its graphs (each comment covers the nodes below it)."""
    out: dict[str, tuple[str, int, str]] = {}
    where = None
    for line in graph_text.splitlines():
        m = _PT_FILE_COMMENT.match(line)
        if m:
            where = (m.group(1), int(m.group(2)), m.group(3).strip())
            continue
        if not line.strip():
            where = None
            continue
        n = _PT_NODE_LINE.match(line)
        if n and where is not None:
            out[n.group(1)] = where
            out.setdefault(f"__op__{n.group(2).split('.')[0]}", where)
    return out


def _op_base(name: str) -> str:
    return re.sub(r"_\d+$", "", name)


_PT_TRACE_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _strip_suffix(d) -> dict:
    """PyTorch's provenance keys name kernels as "name:N" (the N-th launch): by name."""
    out: dict = {}
    for k, v in (d or {}).items() if isinstance(d, dict) else []:
        out.setdefault(str(k).split(":", 1)[0], []).extend(v if isinstance(v, list) else [])
    return out


def output_code_kernels(code: str, nodes: dict[str, tuple[str, int, str]],
                        mapping: dict | None = None,
                        stack_traces: dict | None = None) -> list[Kernel]:
    """The kernels of PyTorch's output code, each with its FX nodes and the user lines they
    came from. Nodes: from the provenance mapping (kernel -> post-grad nodes) when the trace has
    one, else `Source Nodes: [...]` comments, else the ops in the fused kernel's name (an
    approximation). Lines: the provenance kernel stack traces when present, else the nodes'
    `# File:` comments in the post-grad graph."""
    out = []
    mapping, stack_traces = _strip_suffix(mapping), _strip_suffix(stack_traces)
    for m in _PT_KERNEL.finditer(code):
        name, kind, body = m.group(1), m.group(2), m.group(3)
        fx: list[str] = []
        if mapping and isinstance(mapping.get(name), list):
            fx = [str(n) for n in mapping[name]]
        if not fx:
            sn = _PT_SOURCE_NODES.search(body) or re.search(
                rf"Source Nodes: \[([^\]]*)\][^\n]*\n[^\n]*{re.escape(name)}\(", code)
            if sn:
                fx = [s.strip() for s in sn.group(1).split(",") if s.strip()]
        if not fx:
            ops = name.split("fused_", 1)[1] if "fused_" in name else ""
            ops = re.sub(r"_\d+$", "", ops)
            fx = [n for n in nodes if not n.startswith("__op__") and _op_base(n) in ops.split("_")]
        lines = []
        for tb in stack_traces.get(name, []):   # the kernel's own user stacks: exact
            frames = _PT_TRACE_FRAME.findall(str(tb))
            if frames and (frames[-1][0], int(frames[-1][1])) not in lines:
                lines.append((frames[-1][0], int(frames[-1][1])))
        for n in fx if not lines else []:
            w = nodes.get(n) or nodes.get(f"__op__{_op_base(n)}")
            if w and (w[0], w[1]) not in lines:
                lines.append((w[0], w[1]))
        src = body.split(_TRIPLE, 1)[1] if _TRIPLE in body else body
        out.append(Kernel(name=name, code=src.strip("\n"), language="cpp" if "cpp" in kind
                          else "python", fx_nodes=fx, user_lines=sorted(lines, key=lambda t: t[1])))
    return out
