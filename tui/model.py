"""What tracetui shows, built from a trace in one pass: frames, their compiles, and per compile
the breaks, guards, recompile reasons, graphs, IR, kernels, metrics and failure.

A compile is (frame_id, frame_compile_id); attempts (restarts after a graph break) are merged
into it, as tlparse's stack trie does, and listed in `Compile.attempts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tracetorch.logs.sanitize import clean
from tracetorch.tui import extract as X

OK, BREAK, RECOMPILE, FAILED, EMPTY = "ok", "graph break", "recompile", "failed", "empty graph"
CRASHED, SKIPPED = "crashed", "frame skipped (eager)"
OUTCOME_STYLE = {OK: "green", BREAK: "yellow", RECOMPILE: "magenta", FAILED: "bold red",
                 EMPTY: "bright_black", CRASHED: "bold red", SKIPPED: "bold yellow"}


@dataclass
class Compile:
    frame_id: int
    frame_compile_id: int
    attempts: list[int] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    name: str = ""
    filename: str = ""
    firstlineno: int | None = None
    breaks: list[X.GraphBreak] = field(default_factory=list)
    restart_reasons: list[str] = field(default_factory=list)
    recompile_reasons: list[X.GuardFailure] = field(default_factory=list)
    # the reasons deduplicated (TraceModel fills it): changed values first, each once
    reasons: list[X.RecompileReason] = field(default_factory=list)
    guard_sets: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # record kind -> guards
    resume_line: int | None = None  # a resume function: the break line it resumes after
    graphs: list[tuple[str, str, int]] = field(default_factory=list)  # (title, code, event)
    ir: list[tuple[str, str, int]] = field(default_factory=list)  # (key, text, event)
    fusion: list[int] = field(default_factory=list)  # event indexes, decoded when shown
    kernels: list[X.Kernel] = field(default_factory=list)
    perf_hints: list[str] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    stages: list[tuple[str, float]] = field(default_factory=list)
    failure: str = ""
    failure_event: int = -1
    crashed: bool = False  # the trace ends inside this compile (no metrics record closed it)
    skip_reason: str = ""  # PyTorch: Dynamo gave up on the frame (fail_type Unsupported)
    caller: str = ""  # ours: "file:line" of the call that started the compile
    post_grad: int = -1  # PyTorch: the inductor_post_grad_graph record
    provenance: int = -1  # PyTorch: an inductor provenance mapping record
    kernel_traces: int = -1  # PyTorch: inductor's kernel -> user stack traces record
    has_metrics: bool = False
    source: tuple[str, int, str] | None = None  # (filename, first line, text) when in the trace

    @property
    def guards(self) -> list[tuple[str, str]]:
        """One record's guards (several kinds say the same thing): structured ones first."""
        for k in ("dynamo_guards", "guards", "dynamo_cpp_guards_str", "verbose_guards"):
            if self.guard_sets.get(k):
                return self.guard_sets[k]
        return next(iter(self.guard_sets.values()), [])

    @property
    def id(self) -> str:
        return f"{self.frame_id}/{self.frame_compile_id}"

    @property
    def skipped(self) -> bool:
        """Capture gave up on the frame: it runs eagerly (a break inside a loop, ...)."""
        return bool(self.skip_reason) or any(b.frame_skipped for b in self.breaks) or (
            any(b.eager_from is not None for b in self.breaks) and not self.graphs
            and not self.metrics.get("graph_op_count"))

    @property
    def display_name(self) -> str:
        """The function's name; a resume function is named after the line it resumes at."""
        pt = _PT_RESUME.search(self.name)
        ours = _OUR_RESUME.search(self.name)
        if pt or ours:
            base = pt.group(1) if pt else _OUR_RESUME_ALL.sub("", self.name) or self.name
            line = self.resume_line or (int(pt.group(2)) if pt else None)
            return f"{base} (resume at line {line})" if line else f"{base} (resume)"
        if not self.name and self.caller:
            return f"(function called at {Path(self.caller.rpartition(':')[0]).name}:" \
                   f"{self.caller.rpartition(':')[2]})"
        return self.name

    @property
    def is_recompile(self) -> bool:
        return self.frame_compile_id > 0 or bool(self.recompile_reasons)

    @property
    def has_break(self) -> bool:
        return bool(self.breaks or self.restart_reasons or max(self.attempts, default=0) > 0)

    @property
    def is_empty(self) -> bool:
        ops = self.metrics.get("graph_op_count")
        return not self.graphs and (ops in (None, 0)) and not self.kernels

    @property
    def outcome(self) -> str:
        if self.crashed:
            return CRASHED
        if self.failure:
            return FAILED
        if self.skipped:
            return SKIPPED
        if self.has_break:
            return BREAK
        if self.is_recompile:
            return RECOMPILE
        if self.is_empty:
            return EMPTY
        return OK

    @property
    def flags(self) -> list[str]:
        """Every outcome that applies (a recompile can also break), most serious first."""
        out = [f for f, on in ((CRASHED, self.crashed), (FAILED, bool(self.failure) and not self.crashed),
                               (SKIPPED, self.skipped), (BREAK, self.has_break),
                               (RECOMPILE, self.is_recompile),
                               (EMPTY, self.is_empty and not self.failure and not self.skipped
                                and not self.crashed)) if on]
        return out or [OK]

    @property
    def kernel_count(self) -> int:
        return sum(not k.module for k in self.kernels)

    @property
    def compile_time(self) -> float:
        v = self.metrics.get("entire_frame_compile_time_s")
        return float(v) if isinstance(v, (int, float)) else 0.0

    @property
    def location(self) -> str:
        return f"{Path(self.filename).name}:{self.firstlineno}" if self.filename else ""


@dataclass
class Frame:
    frame_id: int
    compiles: list[Compile] = field(default_factory=list)

    @property
    def name(self) -> str:
        return next((c.display_name for c in self.compiles if c.display_name),
                    f"frame {self.frame_id}")

    @property
    def location(self) -> str:
        return next((c.location for c in self.compiles if c.location), "")

    def count(self, outcome: str) -> int:
        return sum(outcome in c.flags for c in self.compiles)

    @property
    def severity(self) -> tuple:
        # worst offenders first: failures, then recompiles, then breaks
        return (-self.count(CRASHED) - self.count(FAILED), -self.count(SKIPPED),
                -self.count(RECOMPILE), -self.count(BREAK), self.frame_id)


@dataclass
class Totals:
    frames: int = 0
    compiles: int = 0
    graphs: int = 0
    breaks: int = 0
    recompiles: int = 0
    failures: int = 0
    kernels: int = 0
    compile_time: float = 0.0
    events: int = 0


class TraceModel:
    """frames (worst first), compiles by id, and for each event index its compile id."""

    def __init__(self, trace, debug_dir: Path | None = None):
        self.trace, self.debug_dir = trace, debug_dir
        self.compiles: dict[tuple[int, int], Compile] = {}
        self.event_compile: dict[int, tuple[int, int]] = {}
        self.other_events: list[int] = []  # records without a compile id
        self._pending: list = []  # recompile records written before their compile's first record
        # event indexes the replay can jump to, in order
        self.marks: dict[str, list[int]] = {"break": [], "recompile": [], "failure": []}
        for ev in trace.events:
            self._add(ev)
        by_frame: dict[int, Frame] = {}
        for key in sorted(self.compiles):
            by_frame.setdefault(key[0], Frame(key[0])).compiles.append(self.compiles[key])
        self.frames = sorted(by_frame.values(), key=lambda f: f.severity)
        self._classify()
        self.frames.sort(key=lambda f: f.severity)  # crashed and skipped frames are known now
        self.totals = self._totals()
        self._group_reasons()

    def _compile(self, cid) -> Compile:
        key = (cid.frame_id, cid.frame_compile_id)
        c = self.compiles.get(key)
        if c is None:
            c = self.compiles[key] = Compile(*key)
        if cid.attempt not in c.attempts:
            c.attempts.append(cid.attempt)
        return c

    def _add(self, ev) -> None:
        cid = ev.compile_id
        if cid is None:
            self.other_events.append(ev.index)
            if ev.key in X.RECOMPILE_KEYS:  # ours: written (with a stack) just before the
                self._pending.append(ev)    # recompile's dynamo_start
            return
        c = self._compile(cid)
        c.events.append(ev.index)
        self.event_compile[ev.index] = (c.frame_id, c.frame_compile_id)
        k, t = ev.key, self.trace
        if k == "dynamo_start":
            stack = ev.stack
            if stack:
                top = stack[-1]
                if "loc" in top and isinstance(top.get("line"), int):
                    # ours: the stack ends at the call of the compiled function (the caller's
                    # line), not at the function; its name comes from the bytecode or metrics
                    c.caller = f"{top.get('filename', '')}:{top['line']}"
                    if len(stack) > 1:
                        c.resume_line = top["line"]  # a resume frame: its parent's break line
                elif not c.name:  # PyTorch: the last frame is the compiled function
                    c.name = str(top.get("name", ""))
                    c.filename = str(top.get("filename", ""))
                    c.firstlineno = top.get("line") if isinstance(top.get("line"), int) else None
            pending, self._pending = self._pending, []
            for p in pending:
                self._add_recompile(c, p)
                self.event_compile[p.index] = (c.frame_id, c.frame_compile_id)
        elif k in X.BREAK_KEYS:
            c.breaks.append(X.graph_break(ev, t))
            self.marks["break"].append(ev.index)
        elif k in X.RECOMPILE_KEYS:
            self._add_recompile(c, ev)
        elif k in X.GUARD_KEYS:
            c.guard_sets.setdefault(k, []).extend(X.guard_lines(ev))
        elif k in X.GRAPH_KEYS or k in X.AOT_KEYS:
            title = {"dynamo_output_graph": "captured graph (frontend)", "graph": "captured graph",
                     "graph_code": "captured graph (code)"}.get(k, k.replace("_", " "))
            c.graphs.append((title, ev.payload, ev.index))
        elif k in ("ir_pre_fusion", "ir_post_fusion", "schedule"):
            c.ir.append((k, ev.payload, ev.index))
        elif k == "fusion_decision":
            c.fusion.append(ev.index)  # can be thousands: decoded only when shown
        elif k in X.KERNEL_KEYS or k in X.OUTPUT_KEYS:
            kern = X.kernel(ev, t)
            # ours writes each kernel twice (kernel_code text, kernel json): keep the json one
            same = [i for i, o in enumerate(c.kernels) if o.name == kern.name]
            if not same:
                c.kernels.append(kern)
            elif k == "kernel":
                c.kernels[same[0]] = kern
        elif k == "perf_hint":
            d = X.as_dict(ev.payload_json()) or ev.metadata
            c.perf_hints.append(str(d.get("message") or d.get("reason") or ev.payload))
        elif k == "inductor_post_grad_graph":  # PyTorch: the graph the kernels were made from
            c.post_grad = ev.index
            c.graphs.append(("post-grad graph (inductor)", ev.payload, ev.index))
        elif k.startswith("inductor_provenance_tracking_node_mappings"):
            c.provenance = ev.index
        elif k.startswith("inductor_provenance_tracking_kernel_stack_traces"):
            c.kernel_traces = ev.index
        elif k == "bytecode":  # ours: "ORIGINAL BYTECODE <name> <file> line <n>" names the frame
            m = _BYTECODE_HEAD.match(ev.payload[:1000])
            if m and not c.has_metrics:
                c.name, c.filename, c.firstlineno = m.group(1), m.group(2), int(m.group(3))
        elif k in ("compilation_metrics", "compile_metrics"):
            c.has_metrics = True
            c.metrics.update(ev.metadata)
            c.stages = X.stage_times(c.metrics)
            if ev.metadata.get("fail_type") or ev.metadata.get("fail_reason"):
                c.failure = c.failure or (f"{ev.metadata.get('fail_type') or 'failure'}: "
                                          f"{ev.metadata.get('fail_reason') or ''}").strip(": ")
                c.failure_event = ev.index if c.failure_event < 0 else c.failure_event
                self.marks["failure"].append(ev.index)
            for r in ev.metadata.get("restart_reasons") or []:
                c.restart_reasons.append(str(r))
            m = ev.metadata  # the code object itself: better than the first stack frame
            if isinstance(m.get("co_name"), str):
                c.name = m["co_name"]
            if isinstance(m.get("co_filename"), str):
                c.filename = m["co_filename"]
            if isinstance(m.get("co_firstlineno"), int):
                c.firstlineno = m["co_firstlineno"]
        elif k in X.FAIL_KEYS or ev.level in ("E", "C"):
            self.marks["failure"].append(ev.index)
            c.failure = c.failure or X.failure_text(ev)
            c.failure_event = ev.index if c.failure_event < 0 else c.failure_event
        elif k in X.SOURCE_KEYS:
            fl = ev.metadata.get("firstlineno")
            c.source = (str(ev.metadata.get("filename", "")), fl if isinstance(fl, int) else 1,
                        ev.payload)

    def _add_recompile(self, c: Compile, ev) -> None:
        if not self.marks["recompile"] or self.compile_of_event(self.marks["recompile"][-1]) is not c:
            self.marks["recompile"].append(ev.index)  # one mark per recompiled compile
        # several records can describe the same failure (ours: recompile + guard_failure):
        # keep one, the most detailed
        for gf in X.guard_failures(ev):
            same = [o for o in c.recompile_reasons if o.entry == gf.entry and o.text == gf.text]
            if not same:
                c.recompile_reasons.append(gf)
            elif ev.key == "guard_failure":
                c.recompile_reasons[c.recompile_reasons.index(same[0])] = gf

    def _classify(self) -> None:
        """After every record: PyTorch's "Unsupported" compiles are frames Dynamo skipped (they
        run eagerly), not failures; a compile no metrics record closed, when the trace has
        them for other compiles or it is the last compile started, was cut off by a crash."""
        any_metrics = any(c.has_metrics for c in self.compiles.values())
        for c in self.compiles.values():
            fail_type = c.metrics.get("fail_type")
            if fail_type == "Unsupported" and X.skipped_frame_text(str(c.metrics.get("fail_reason") or "")):
                c.skip_reason = X.exception_line(str(c.metrics.get("fail_reason") or ""))
                self.marks["failure"] = [i for i in self.marks["failure"] if i not in c.events]
                c.failure, c.failure_event = "", -1
            if not c.has_metrics and not c.failure and any_metrics:
                c.crashed = True
                c.failure = ("cut off: the trace ends inside this compile (the process crashed "
                             "or was killed while compiling)")
                c.failure_event = c.events[-1] if c.events else -1
                if c.failure_event >= 0:
                    self.marks["failure"].append(c.failure_event)
        self.marks["failure"].sort()
        for c in self.compiles.values():
            self._split_output_code(c)
            if not c.name and not c.caller:
                # no start record (our backend under torch.compile): where its code came from
                where = next((ln for k in c.kernels for ln in k.user_lines), None)
                if where:
                    c.name = f"(code from {Path(where[0]).name}:{where[1]})"
                    c.filename, c.firstlineno = where[0], where[1]

    def _split_output_code(self, c: Compile) -> None:
        """PyTorch writes no per-kernel records: its kernels are read out of the output code
        and tied to user lines through the post-grad graph's `# File:` comments."""
        modules = [k for k in c.kernels if k.module]
        if not modules or any(not k.module for k in c.kernels):
            return
        events = self.trace.events
        nodes = X.post_grad_lines(events[c.post_grad].payload) if c.post_grad >= 0 else {}
        mapping = None
        if c.provenance >= 0:
            data = X.as_dict(events[c.provenance].payload_json())
            mapping = next((data[k] for k in ("cppCodeToPost", "tritonCodeToPost", "kernelToPost")
                            if isinstance(data.get(k), dict)), None)
        traces = X.as_dict(events[c.kernel_traces].payload_json()) if c.kernel_traces >= 0 else None
        for mod in modules:
            for k in X.output_code_kernels(mod.code, nodes, mapping, traces):
                k.event = mod.event
                c.kernels.append(k)

    def _group_reasons(self) -> None:
        """Each compile's recompile reasons deduplicated; a reason an earlier compile of the
        frame already gave (its cache entry is still checked, and still fails) is marked."""
        for f in self.frames:
            said: dict[tuple, str] = {}
            for c in f.compiles:
                c.reasons = X.distinct_reasons(c.recompile_reasons)
                for r in c.reasons:
                    key = X.reason_key(r.first)
                    if key in said:
                        r.seen_before = said[key]
                    else:
                        said[key] = c.id
                    if not r.first.user_location:
                        r.first.user_location = introduced_at(self, c, r.first)
                    if r.first.user_location and not r.first.user_code:
                        r.first.user_code = self.line_text(r.first.user_location)

    def line_text(self, location: str) -> str:
        """The user's source line at 'file:line' (read from the file, never run), or ''."""
        fn, _, ln = location.rpartition(":")
        if not ln.isdigit():
            return ""
        cache = self.__dict__.setdefault("_lines", {})
        if fn not in cache:
            p = self._user_file(fn)
            try:
                cache[fn] = clean(p.read_text(errors="replace")).splitlines() if p else []
            except OSError:
                cache[fn] = []
        lines = cache[fn]
        return lines[int(ln) - 1].strip() if 0 < int(ln) <= len(lines) else ""

    def _totals(self) -> Totals:
        cs = list(self.compiles.values())
        return Totals(
            frames=len(self.frames), compiles=len(cs),
            graphs=sum(1 for c in cs if c.graphs or c.metrics.get("graph_op_count")),
            breaks=sum(max(len(c.breaks), 1 if c.has_break else 0) for c in cs),
            recompiles=sum(c.is_recompile for c in cs), failures=sum(bool(c.failure) for c in cs),
            kernels=sum(c.kernel_count for c in cs),
            compile_time=sum(c.compile_time for c in cs), events=len(self.trace.events))

    # -- lookups ---------------------------------------------------------------------------
    def compile_of_event(self, index: int) -> Compile | None:
        key = self.event_compile.get(index)
        return self.compiles.get(key) if key else None

    def next_mark(self, kind: str, index: int, step: int) -> int | None:
        """The next (step 1) or previous (step -1) event of a kind ('break', 'recompile',
        'failure') after/before event `index`."""
        marks = self.marks.get(kind, [])
        later = [m for m in marks if (m > index if step > 0 else m < index)]
        if not later:
            return None
        return later[0] if step > 0 else later[-1]

    def ordered_compiles(self) -> list[Compile]:
        return [c for f in self.frames for c in f.compiles]

    def repro_script(self) -> Path | None:
        if self.debug_dir is None:
            return None
        p = self.debug_dir / "repro" / "repro.py"
        return p if p.is_file() else None

    def _user_file(self, filename: str | None) -> Path | None:
        """The user's file named by the trace: where it was recorded, else beside the trace file
        (a trace sent along with the script it came from, as in a bug report)."""
        if not filename:
            return None
        for p in (Path(filename), Path(self.trace.path).parent / Path(filename).name):
            if p.is_file():
                return p
        return None

    def source_of(self, c: Compile) -> tuple[str, int, list[str]] | None:
        """(filename, first line number, lines) of the compile's user function: from the trace,
        else the user's file on disk, else the debug folder's source.py (read only, never run)."""
        if c.source:
            fn, first, text = c.source
            return fn, first, text.splitlines()
        found = self._user_file(c.filename)
        if found is not None:
            try:
                lines = clean(found.read_text(errors="replace")).splitlines()
            except OSError:
                lines = []
            if lines:
                start = _def_line(lines, c) - 1
                return c.filename, start + 1, _function_block(lines, start)
        if self.debug_dir is not None:
            p = self.debug_dir / f"{c.frame_id}_{c.frame_compile_id}" / "source.py"
            if p.is_file():
                try:
                    return _parse_debug_source(clean(p.read_text(errors="replace")), str(p))
                except OSError:
                    pass
        return None


def introduced_at(model, c, gf) -> str:
    """The user line behind a failed guard: recorded with the failure, else found among the
    failed cache entry's own guards (a guard line that mentions the same source, preferring one
    in the user's file over library code; PyTorch cuts paths from the left: the user's file's
    full name is put back)."""
    if gf.user_location:
        return gf.user_location
    try:
        f, _, rest = gf.entry.partition("/")
        entry = model.compiles.get((int(f), int(rest.split("_")[0])))
    except ValueError:
        entry = None
    if entry is None or not gf.source:
        return ""
    name = gf.source.replace("L['", "").replace("']", "") if gf.source.startswith("L['") else gf.source
    user = Path(c.filename).name if c.filename else ""

    def mine(loc: str) -> bool:
        return bool(user) and Path(loc.rpartition(":")[0]).name == user

    cands = [loc for text, loc in entry.guards if loc and (gf.source in text or f"'{name}'" in text
                                                            or name in text)]
    tensor = [loc for text, loc in entry.guards if loc and gf.source in text and (
        "TENSOR_MATCH" in text or "size" in text or "check_tensor" in text)]
    for pool in (tensor, cands):
        for loc in pool:
            if mine(loc):
                return f"{c.filename}:{loc.rpartition(':')[2]}"
    return next(iter(tensor or cands), "")


_BYTECODE_HEAD = re.compile(r"ORIGINAL BYTECODE (\S+) (.+?) line (\d+)")
_PT_RESUME = re.compile(r"resume_in_(\w+?)_at_(\d+)$")
_OUR_RESUME = re.compile(r"__resume_at_\d+_(\w+)$")
_OUR_RESUME_ALL = re.compile(r"_?_resume_at_\d+_")
_MARKED = re.compile(r"^(.*?)\s*# >>> (\d+)$")


def _def_line(lines: list[str], c: Compile) -> int:
    """The `def` line of the user function (a resume function points into its parent)."""
    line = c.firstlineno or 1
    m = _PT_RESUME.search(c.name) or _OUR_RESUME.search(c.name)
    if m:
        if c.resume_line is None and m.re is _PT_RESUME:
            c.resume_line = int(m.group(2))
        fname = m.group(1)
        for i in range(min(line, len(lines)) - 1, -1, -1):
            if re.match(rf"\s*(async\s+)?def {re.escape(fname)}\b", lines[i]):
                return i + 1
    return line


def _parse_debug_source(text: str, path: str) -> tuple[str, int, list[str]] | None:
    """The debug folder's source.py marks each compiled line with `# >>> N`."""
    numbered = [(int(m.group(2)), m.group(1)) for m in map(_MARKED.match, text.splitlines()) if m]
    if not numbered:
        return None
    first = numbered[0][0]
    by_line = dict(numbered)
    return path, first, [by_line.get(n, "") for n in range(first, numbered[-1][0] + 1)]


def _function_block(lines: list[str], start: int) -> list[str]:
    """The lines of the def starting at `start` (by indentation), at most 200."""
    if start >= len(lines):
        return []
    first = lines[start]
    indent = len(first) - len(first.lstrip())
    out = [first]
    for line in lines[start + 1:start + 200]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent and not line.lstrip().startswith(")"):
            break
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out
