"""Reader for the structured trace (DESIGN section 5): ours and PyTorch's TORCH_TRACE logs.

Wire format, one record per glog line::

    V1122 12:19:24.863000 6195 torch/_dynamo/convert_frame.py:303] {"dynamo_start": {...}, "frame_id": 0, ...}
    <TAB>payload line 1
    <TAB>payload line 2

`has_payload` in the envelope is the md5 of the payload (its lines joined by newlines).

Reading is lazy so that a 100,000-event trace opens at once: `read_trace` only finds where
each record starts (one regex pass in C over the file's bytes) and collects the `str` string
table; an envelope is JSON-decoded the first time its event is touched, and a payload the first
time `.payload` is read. Nothing from a trace is ever executed (no pickle, no eval): envelopes
and json payloads go through `json.loads` only.

Damage never stops the reader. A record that cannot be parsed (truncated line, flipped byte,
stray text) is dropped and listed in `Trace.skipped` as (line number, reason); a record whose
payload does not match its md5 is kept (nothing lost) and listed in `Trace.damaged`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

try:  # share the compile id type with the writer when `logs` provides it
    from logs.compile_ids import CompileId  # type: ignore[assignment]
except ImportError:  # `logs` not built yet (or mid-import): same fields, same str()

    @dataclasses.dataclass(frozen=True, order=True)
    class CompileId:  # type: ignore[no-redef]
        frame_id: int
        frame_compile_id: int
        attempt: int = 0

        def __str__(self) -> str:
            base = f"{self.frame_id}/{self.frame_compile_id}"
            return f"{base}_{self.attempt}" if self.attempt else base


__all__ = ["CompileId", "Trace", "TraceEvent", "TraceError", "read_trace", "find_trace_files"]

# Envelope keys that describe the record's context rather than its kind.
CONTEXT_KEYS = frozenset(
    {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload",
     "stack", "subgraph_name", "severity", "timestamp", "pathname", "thread"}
)


def _split_prefix(head: str):
    """(level, "MMDD HH:MM:SS.us", pid, pathname, line, envelope text) of a glog-prefixed record,
    or None. String methods rather than a regex: this runs once per record."""
    if head.startswith("[rank"):  # "[rank0]:V1122 ..." (rank-prefixed logs)
        head = head.partition("]:")[2]
    pre, sep, rest = head.partition("] ")
    if not sep:
        return None
    parts = pre.split(None, 3)
    if len(parts) != 4:
        return None
    lvl_date, clock, pid, where = parts
    path, _, line = where.rpartition(":")
    if (len(lvl_date) != 5 or not lvl_date[0].isalpha() or not lvl_date[1:].isdigit()
            or not pid.isdigit() or not line.isdigit() or clock.count(":") != 2):
        return None
    return lvl_date[0], f"{lvl_date[1:]} {clock}", int(pid), path, int(line), rest


# Start of every record but the first: a newline not followed by a tab (payload lines start
# with one). A literal first character lets the regex engine skip ahead fast.
_RECORD_START = re.compile(rb"\n[^\t]")
# A string-table record (literal first, for a fast search; matches inside payloads are dropped).
_STR_RECORD = re.compile(rb'\] \{"str": \[("(?:[^"\\\n]|\\.)*"), (\d+)\]\}')


class TraceError(Exception):
    """The path cannot be read as a trace at all (missing, unreadable, no trace files)."""


def _make_compile_id(env: dict) -> CompileId | None:
    fid, fcid = env.get("frame_id"), env.get("frame_compile_id")
    if not isinstance(fid, int) or not isinstance(fcid, int):
        return None
    attempt = env.get("attempt", 0)
    return CompileId(fid, fcid, attempt if isinstance(attempt, int) else 0)


class TraceEvent:
    """One record. The envelope is parsed on first attribute access; the payload on `.payload`."""

    __slots__ = ("_trace", "index", "lineno", "file_index", "_start", "_head_end", "_end",
                 "_parsed", "key", "compile_id", "level", "time", "pid", "pathname",
                 "source_line", "metadata", "envelope", "_payload", "_payload_ok", "error")

    def __init__(self, trace: "Trace", index: int, lineno: int, file_index: int,
                 start: int, head_end: int, end: int):
        self._trace, self.index, self.lineno, self.file_index = trace, index, lineno, file_index
        self._start, self._head_end, self._end = start, head_end, end
        self._parsed = False
        self._payload: str | None = None
        self._payload_ok = True

    def __getattr__(self, name: str) -> Any:
        # Only reached for envelope fields not set yet: parse, then answer.
        if name.startswith("_") or self._parsed:
            raise AttributeError(name)
        self._parse()
        return object.__getattribute__(self, name)

    def _parse(self) -> None:
        self._parsed = True
        self.key, self.compile_id, self.level, self.time, self.pid = "", None, "", "", 0
        self.pathname, self.source_line, self.metadata, self.envelope = "", 0, {}, {}
        self.error = None
        data = self._trace._data[self.file_index]
        head = data[self._start:self._head_end].decode("utf-8", "replace").rstrip("\r")
        parts = _split_prefix(head)
        if parts is None:
            self.error = "not a trace record (no glog prefix)"
            return
        self.level, self.time, self.pid, self.pathname, self.source_line, rest = parts
        try:
            env = json.loads(rest)
        except ValueError as e:
            self.error = f"envelope is not valid JSON ({e.msg} at column {e.pos})"
            return
        if not isinstance(env, dict):
            self.error = "envelope is not a JSON object"
            return
        key = next((k for k in env if k not in CONTEXT_KEYS), None)
        if key is None:
            self.error = "envelope has no record kind"
            return
        meta = env[key]
        self.envelope, self.metadata = env, meta if isinstance(meta, dict) else {"value": meta}
        self.key = key
        if key == "artifact" and isinstance(meta, dict) and isinstance(meta.get("name"), str):
            self.key = meta["name"]
        self.compile_id = _make_compile_id(env)

    # -- payload ---------------------------------------------------------------------------
    @property
    def has_payload(self) -> bool:
        return "has_payload" in self.envelope

    @property
    def is_artifact(self) -> bool:
        return "artifact" in self.envelope

    @property
    def encoding(self) -> str | None:
        return self.metadata.get("encoding") if self.is_artifact else None

    @property
    def payload(self) -> str:
        if self._payload is None:
            data = self._trace._data[self.file_index]
            raw = data[self._head_end:self._end]  # "\n\tline1\n\tline2..." (maybe trailing \n)
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            text = raw.replace(b"\n\t", b"\n")[1:].decode("utf-8", "replace") if raw else ""
            expected = self.envelope.get("has_payload")
            if isinstance(expected, str):
                got = hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()
                self._payload_ok = got == expected
            self._payload = text
        return self._payload

    @property
    def payload_ok(self) -> bool:
        """False when the payload does not match the envelope's md5 (truncated or edited)."""
        self.payload  # noqa: B018 - reading it checks the md5
        return self._payload_ok

    def payload_json(self) -> Any:
        """The payload decoded as JSON, or None when it is absent or not JSON."""
        text = self.payload
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    @property
    def stack(self) -> list[dict]:
        """Stack frames of the record (`stack` in the envelope or in dynamo_start), filenames resolved."""
        frames = self.envelope.get("stack") or self.metadata.get("stack") or []
        return self._trace.resolve_frames(frames)

    def __repr__(self) -> str:
        return f"TraceEvent({self.index}, line {self.lineno}, {self.key!r}, {self.compile_id})"


class _Events(Sequence[TraceEvent]):
    """The events in order; TraceEvent objects are created on first access."""

    def __init__(self, trace: "Trace"):
        self._trace = trace

    def __len__(self) -> int:
        return len(self._trace)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._trace._event(i)

    def __iter__(self) -> Iterator[TraceEvent]:
        for i in range(len(self)):
            yield self._trace._event(i)


class Trace:
    """An opened trace: `events`, `skipped`, `damaged`, `compile_ids()`, `strings`."""

    def __init__(self, path: Path, files: list[Path]):
        self.path, self.files = path, files
        self._data: list[bytes] = []
        # one row per record: byte offsets of its start, header end and end; its line; its file
        self._cols = {k: np.zeros(0, dtype=np.int64) for k in ("start", "head", "end", "line", "file")}
        self._cache: dict[int, TraceEvent] = {}
        self._bad: list[int] = []  # record indexes that failed to parse
        self._scanned = False
        self._skipped: list[tuple[int, str]] = []
        self._damaged: list[tuple[int, str]] = []
        self.strings: dict[int, str] = {}
        for fi, f in enumerate(files):
            try:
                data = f.read_bytes()
            except OSError as e:
                raise TraceError(f"cannot read {f}: {e.strerror or e}") from None
            self._data.append(data)
            self._index(fi, data)
        self._events = _Events(self)

    @property
    def events(self) -> _Events:
        """The parsed events, without the records listed in `skipped` (forces `scan()`)."""
        self.scan()
        return self._events

    @property
    def raw_events(self) -> _Events:
        """Every record as indexed, unvalidated (`.error` set on bad ones): for a fast first look."""
        return self._events

    def _index(self, fi: int, data: bytes) -> None:
        # Vectorised: every newline not followed by a tab starts a record. numpy turns a
        # 30 MB / 100,000-record file into columns of offsets in a few tens of milliseconds.
        buf = np.frombuffer(data, dtype=np.uint8)
        nl = np.flatnonzero(buf == 10)
        after = nl + 1
        inside = after < len(buf)
        is_start = np.zeros(len(nl), dtype=bool)
        is_start[inside] = buf[after[inside]] != 9
        which = np.flatnonzero(is_start)  # index into nl of the newline before each record
        starts = after[which]
        lines = which + 2  # the line after newline number k (0-based) is line k + 2
        # header end: the newline after the one that opened the record (or the end of data)
        nxt = which + 1
        padded = np.append(nl, len(buf))
        head = padded[nxt]
        if len(buf) and buf[0] != 9:  # the first line is a record too
            starts = np.concatenate(([0], starts))
            lines = np.concatenate(([1], lines))
            head = np.concatenate(([nl[0] if len(nl) else len(buf)], head))
        ends = np.append(starts[1:], len(buf))
        n = len(starts)
        cols = (starts, head, ends, lines, np.full(n, fi))
        for name, col in zip(("start", "head", "end", "line", "file"), cols):
            self._cols[name] = np.concatenate((self._cols[name], col.astype(np.int64)))
        for m in _STR_RECORD.finditer(data):
            line_start = data.rfind(b"\n", 0, m.start()) + 1
            if data[line_start:line_start + 1] == b"\t":
                continue  # inside a payload
            try:
                self.strings[int(m.group(2))] = json.loads(m.group(1))
            except ValueError:
                pass  # a damaged string entry: frames using it show the index instead

    def __len__(self) -> int:
        return len(self._cols["start"])

    def _event(self, i: int) -> TraceEvent:
        ev = self._cache.get(i)
        if ev is None:
            if i < 0:
                i += len(self)
            c = self._cols
            ev = self._cache[i] = TraceEvent(self, i, int(c["line"][i]), int(c["file"][i]),
                                             int(c["start"][i]), int(c["head"][i]), int(c["end"][i]))
        return ev

    def where(self, ev: TraceEvent) -> str:
        """'line N' (or 'file:line N' for a folder of several files) for messages."""
        if len(self.files) > 1:
            return f"{self.files[ev.file_index].name} line {ev.lineno}"
        return f"line {ev.lineno}"

    # -- full scan (validation) -------------------------------------------------------------
    def scan(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Parse every envelope and check every payload; fills `skipped` and `damaged`, and
        drops unparseable records from `events` (their line numbers stay in `skipped`).
        `progress(done, total)` is called every few thousand records."""
        if self._scanned:
            return
        n = len(self)
        keep = np.ones(n, dtype=bool)
        for i in range(n):
            if progress is not None and i % 5000 == 0:
                progress(i, n)
            ev = self._event(i)
            if not ev._parsed:
                ev._parse()
            if ev.error:
                keep[i] = False
                self._skipped.append((ev.lineno, f"{self.where(ev)}: {ev.error}"))
            elif ev.has_payload and not ev.payload_ok:
                self._damaged.append((ev.lineno, f"{self.where(ev)}: payload of {ev.key!r} does "
                                      "not match its md5 (truncated or edited)"))
        if not keep.all():
            old = self._cache
            self._cols = {k: v[keep] for k, v in self._cols.items()}
            self._cache = {}
            for new_i, old_i in enumerate(np.flatnonzero(keep)):
                ev = old[int(old_i)]
                ev.index = new_i
                self._cache[new_i] = ev
        self._scanned = True
        if progress is not None:
            progress(n, n)

    @property
    def skipped(self) -> list[tuple[int, str]]:
        self.scan()
        return self._skipped

    @property
    def damaged(self) -> list[tuple[int, str]]:
        self.scan()
        return self._damaged

    def search(self, pattern: str, ignore_case: bool = True) -> list[int]:
        """Indexes of the events whose record (envelope or payload text) matches the regex.
        Runs over the raw bytes, so it is fast on big traces. Raises re.error on a bad regex."""
        rx = re.compile(pattern.encode("utf-8"), re.I if ignore_case else 0)
        hits: set[int] = set()
        starts, files = self._cols["start"], self._cols["file"]
        for fi, data in enumerate(self._data):
            sel = np.flatnonzero(files == fi)
            if not len(sel):
                continue
            file_starts = starts[sel]
            offsets = [m.start() for m in rx.finditer(data)]
            if offsets:
                pos = np.searchsorted(file_starts, np.asarray(offsets), side="right") - 1
                hits.update(int(sel[p]) for p in pos if p >= 0)
        return sorted(hits)

    def compile_ids(self) -> list[CompileId]:
        """Compile ids in order of first appearance."""
        seen: dict[CompileId, None] = {}
        for ev in self.events:
            if ev.compile_id is not None:
                seen.setdefault(ev.compile_id, None)
        return list(seen)

    def resolve_frames(self, frames: Any) -> list[dict]:
        out = []
        for fr in frames if isinstance(frames, list) else []:
            if not isinstance(fr, dict):
                continue
            fr = dict(fr)
            fn = fr.get("filename")
            if isinstance(fn, int):
                fr["filename"] = self.strings.get(fn, f"<string {fn}>")
            out.append(fr)
        return out


def find_trace_files(folder: Path) -> list[Path]:
    """Trace files of a folder: ours (trace_*.log, trace.log), PyTorch's
    (dedicated_log_torch_trace_*.log), else any *.log; oldest first."""
    for pattern in ("trace.log", "trace_*.log", "dedicated_log_torch_trace_*.log", "*.log"):
        found = sorted((p for p in folder.glob(pattern) if p.is_file()),
                       key=lambda p: (p.stat().st_mtime, p.name))
        if found:
            return found
    return []


def read_trace(path: str | Path) -> Trace:
    """Open a trace file, or a folder of trace files (all of them, in time order)."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"no such file or folder: {p}")
    if p.is_dir():
        files = find_trace_files(p)
        if not files:
            raise TraceError(f"no trace files (*.log) in folder {p}")
    else:
        files = [p]
    return Trace(p, files)
