"""Reader for the structured trace (DESIGN section 5): ours and PyTorch's TORCH_TRACE logs.

Wire format, one record per glog line::

    V1122 12:19:24.863000 6195 torch/_dynamo/convert_frame.py:303] {"dynamo_start": {...}, "frame_id": 0, ...}
    <TAB>payload line 1
    <TAB>payload line 2

`has_payload` in the envelope is the md5 of the payload (its lines joined by newlines).

Reading is lazy so that a 100,000-event trace opens at once: `read_trace` only reads the bytes.
Where each record starts is found on first need (one vectorised pass over the bytes; `peek`
looks at the first records without it), the `str` string table on first use of `strings`, an
envelope the first time its event is touched, a payload the first time `.payload` is read.
`scan` (validation, meant for a worker thread) parses every envelope in one tight loop and
checks payload md5s on the raw bytes, decoding no payload. Nothing from a trace is ever executed
(no pickle, no eval): envelopes and json payloads go through the json decoder only.

Damage never stops the reader. A record that cannot be parsed (truncated line, flipped byte,
stray text) is dropped and listed in `Trace.skipped` as (line number, reason); a record whose
payload does not match its md5 is kept (nothing lost) and listed in `Trace.damaged`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from json.decoder import JSONDecoder
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from tracetorch.logs.compile_ids import CompileId
from tracetorch.logs.sanitize import clean, clean_deep, needs_cleaning

__all__ = ["CompileId", "Trace", "TraceEvent", "TraceError", "read_trace", "find_trace_files"]

# Envelope keys that describe the record's context rather than its kind.
CONTEXT_KEYS = frozenset(
    {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload",
     "stack", "subgraph_name", "severity", "timestamp", "pathname", "thread"}
)


_CONTEXT_KEYS_BYTES = frozenset(k.encode() for k in CONTEXT_KEYS)


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
    if (len(lvl_date) != 5 or not lvl_date[0].isalpha() or not lvl_date[1:].isdecimal()
            or not pid.isdecimal() or not line.isdecimal() or clock.count(":") != 2):
        return None
    return lvl_date[0], f"{lvl_date[1:]} {clock}", int(pid), path, int(line), rest


# Start of every record but the first: a newline not followed by a tab (payload lines start
# with one). A literal first character lets the regex engine skip ahead fast.
_RECORD_START = re.compile(rb"\n[^\t]")
# A string-table record (literal first, for a fast search; matches inside payloads are dropped).
_STR_RECORD = re.compile(rb'\] \{"str": \[("(?:[^"\\\n]|\\.)*"), (\d+)\]\}')

# The common record header, as our writer and PyTorch's write it, e.g.
#   V1122 12:00:00.233000 4242 x.py:1] {"artifact": {"name": "fusion_decision", "encoding":
#   "json"}, "frame_id": 0, "frame_compile_id": 1, "attempt": 0, "has_payload": "db9a...7c2"}
# Every header it matches is one `_split_prefix` accepts and one valid JSON object (a subset:
# ASCII strings without escapes, integers, no duplicate "name"), so `scan` takes the record
# kind, compile id and md5 from its groups and leaves the rest (time, pid, envelope...) to be
# parsed if and when it is looked at. Anything else takes the exact path (`_parse`).
_SCALAR = rb'(?:"[ !#-\[\]-~]*+"|-?+(?:0|[1-9][0-9]*+)|true|false|null)'
_PAIR = rb'"(?!name")[A-Za-z_][A-Za-z0-9_]*+": ' + _SCALAR
_INT = rb'(0|[1-9][0-9]{0,17})'
_FAST_HEADER = re.compile(  # possessive quantifiers (*+, ++): no backtracking where none helps
    rb'(?:\[rank[0-9]+\]:)?[A-Za-z][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]++ ++[0-9]++ '
    rb'[^\s\]][^\]\n]*:[0-9]++\] '
    rb'\{"([A-Za-z_][A-Za-z0-9_]*+)": '                                  # 1: record kind
    rb'\{(?:"name": "([A-Za-z_][A-Za-z0-9_.-]*+)"(?:, ' + _PAIR + rb')*+'  # 2: artifact name
    rb'|(?:' + _PAIR + rb'(?:, ' + _PAIR + rb')*+)?)\}'
    rb'(?:, "rank": (?:0|[1-9][0-9]*+))?'
    rb'(?:, "frame_id": ' + _INT + rb', "frame_compile_id": ' + _INT +  # 3, 4
    rb', "attempt": ' + _INT + rb')?'                                    # 5
    rb'(?:, "has_payload": "([0-9a-f]{32})")?\}')                        # 6: md5


class TraceError(Exception):
    """The path cannot be read as a trace at all (missing, unreadable, no trace files)."""


# The json module's C scanner without json.loads' Python wrappers (half the cost per record);
# anything it does not take whole goes through json.loads, for its exact rules and messages.
_SCAN_JSON = JSONDecoder().scan_once
_COLUMNS = ("start", "head", "end", "line", "file")


def _loads_envelope(text: str) -> Any:
    """json.loads(text), faster on the common case (raises ValueError like json.loads)."""
    try:
        obj, end = _SCAN_JSON(text, 0)
        if end == len(text):
            return obj
    except (StopIteration, ValueError, RecursionError):
        pass
    try:
        return json.loads(text)
    except RecursionError:  # absurdly nested (damage): not a record
        raise ValueError("envelope nested too deeply") from None


# Fields `TraceEvent._fast` leaves for `_parse` (on first access).
_DEFERRED = frozenset({"level", "time", "pid", "pathname", "source_line", "metadata", "envelope"})


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
        self._payload_ok: bool | None = None  # None: md5 not checked yet

    def __getattr__(self, name: str) -> Any:
        # Only reached for envelope fields not set yet: parse, then answer. After `scan`'s fast
        # path (`_fast`) only the kind, compile id and error are set; the rest comes from here.
        if name.startswith("_") or (self._parsed and name not in _DEFERRED):
            raise AttributeError(name)
        self._parse()
        return object.__getattribute__(self, name)

    def _fast(self, m: re.Match, trace: "Trace") -> None:
        """Set the kind and compile id from a `_FAST_HEADER` match (see there)."""
        self._parsed = True
        self.error = None
        kind, name, fid, fcid, attempt, _ = m.groups()
        self.key = trace._key_text(name if name is not None and kind == b"artifact" else kind)
        self.compile_id = None if fid is None else trace._compile_id_of(fid, fcid, attempt)

    def _parse(self) -> None:
        self._parsed = True
        self.key, self.compile_id, self.level, self.time, self.pid = "", None, "", "", 0
        self.pathname, self.source_line, self.metadata, self.envelope = "", 0, {}, {}
        self.error = None
        data = self._trace._data[self.file_index]
        head = data[self._start:self._head_end].decode("utf-8", "replace").rstrip("\r")
        parts = _split_prefix(clean(head))  # untrusted: no control codes reach a terminal
        if parts is None:
            self.error = "not a trace record (no glog prefix)"
            return
        self.level, self.time, self.pid, self.pathname, self.source_line, rest = parts
        try:
            env = _loads_envelope(rest)
        except ValueError as e:
            where = f" at column {e.pos}" if isinstance(e, json.JSONDecodeError) else ""
            self.error = f"envelope is not valid JSON ({getattr(e, 'msg', e)}{where})"
            return
        if not isinstance(env, dict):
            self.error = "envelope is not a JSON object"
            return
        if needs_cleaning(rest):  # an escaped control character in some string of it
            env = clean_deep(env)
        key = None
        for k in env:
            if k not in CONTEXT_KEYS:
                key = k
                break
        if key is None:
            self.error = "envelope has no record kind"
            return
        meta = env[key]
        self.envelope, self.metadata = env, meta if isinstance(meta, dict) else {"value": meta}
        self.key = key
        if key == "artifact" and isinstance(meta, dict) and isinstance(meta.get("name"), str):
            self.key = meta["name"]
        self.compile_id = self._trace._compile_id(env)

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

    def _payload_bytes(self) -> bytes:
        """The payload as written (its lines joined by newlines), still encoded."""
        raw = self._trace._data[self.file_index][self._head_end:self._end]  # "\n\tl1\n\tl2\n"
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        return raw.replace(b"\n\t", b"\n")[1:] if raw else b""

    def _check_md5(self, raw: bytes) -> None:
        # On the bytes: the writer hashed the text's UTF-8, which valid bytes round-trip to
        # exactly (invalid bytes are damage, and fail either way).
        expected = self.envelope.get("has_payload")
        self._payload_ok = (not isinstance(expected, str)
                            or hashlib.md5(raw, usedforsecurity=False).hexdigest() == expected)

    @property
    def payload(self) -> str:
        if self._payload is None:
            raw = self._payload_bytes()
            if self._payload_ok is None:
                self._check_md5(raw)
            self._payload = clean(raw.decode("utf-8", "replace"))
        return self._payload

    @property
    def payload_ok(self) -> bool:
        """False when the payload does not match the envelope's md5 (truncated or edited)."""
        if self._payload_ok is None:
            self._check_md5(self._payload_bytes())
        return self._payload_ok

    def payload_json(self) -> Any:
        """The payload decoded as JSON, or None when it is absent or not JSON."""
        text = self.payload
        if not text:
            return None
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return None
        return clean_deep(data) if needs_cleaning(text) else data

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


def _index_records(data: bytes, fi: int) -> dict[str, Any]:
    """Columns (numpy int64) of byte offsets of each record's start, header end and end, its
    line number and its file. Vectorised: every newline not followed by a tab starts a record;
    a 30 MB / 100,000-record file takes a few tens of milliseconds."""
    import numpy as np  # here, not at import: the first paint does not wait for it

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
    head = np.append(nl, len(buf))[which + 1]
    if len(buf) and buf[0] != 9:  # the first line is a record too
        starts = np.concatenate(([0], starts))
        lines = np.concatenate(([1], lines))
        head = np.concatenate(([nl[0] if len(nl) else len(buf)], head))
    ends = np.append(starts[1:], len(buf))
    cols = (starts, head, ends, lines, np.full(len(starts), fi))
    return {name: col.astype(np.int64) for name, col in zip(_COLUMNS, cols)}


class Trace:
    """An opened trace: `events`, `skipped`, `damaged`, `compile_ids()`, `strings`.

    Opening reads the files' bytes and nothing else; the record index, the string table and the
    validation pass are built on first need. They are guarded by a lock, so a worker thread can
    run `scan()` while another thread peeks."""

    def __init__(self, path: Path, files: list[Path]):
        self.path, self.files = path, files
        self._data: list[bytes] = []
        self._lock = threading.RLock()
        # one row per record: byte offsets of its start, header end and end; its line; its file
        self._cols: dict[str, Any] | None = None
        self._cache: dict[int, TraceEvent] = {}
        self._all: list[TraceEvent] | None = None  # every event, once scanned
        self._scanned = False
        self._skipped: list[tuple[int, str]] = []
        self._damaged: list[tuple[int, str]] = []
        self._strings: dict[int, str] | None = None
        self._compile_ids: dict[tuple, CompileId] = {}  # one object per id (thousands of events share it)
        self._keys: dict[bytes, str] = {}  # record kinds seen by the fast path, decoded once
        for f in files:
            try:
                self._data.append(f.read_bytes())
            except OSError as e:
                raise TraceError(f"cannot read {f}: {e.strerror or e}") from None
        self._events = _Events(self)

    @property
    def size(self) -> int:
        """Bytes of trace read."""
        return sum(len(d) for d in self._data)

    @property
    def events(self) -> _Events:
        """The parsed events, without the records listed in `skipped` (forces `scan()`)."""
        self.scan()
        return self._events

    @property
    def raw_events(self) -> _Events:
        """Every record as indexed, unvalidated (`.error` set on bad ones): for a fast first look."""
        return self._events

    def _index(self) -> dict[str, Any]:
        cols = self._cols
        if cols is None:
            with self._lock:
                if self._cols is None:
                    import numpy as np

                    parts = [_index_records(data, fi) for fi, data in enumerate(self._data)]
                    self._cols = {k: np.concatenate([p[k] for p in parts]) if parts
                                  else np.zeros(0, dtype=np.int64) for k in _COLUMNS}
                cols = self._cols
        return cols

    @property
    def strings(self) -> dict[int, str]:
        """The `str` string table (index -> filename) of the records' stacks."""
        if self._strings is None:
            with self._lock:
                if self._strings is None:
                    self._strings = self._read_strings()
        return self._strings

    def _read_strings(self) -> dict[int, str]:
        strings: dict[int, str] = {}
        for data in self._data:
            for m in _STR_RECORD.finditer(data):
                line_start = data.rfind(b"\n", 0, m.start()) + 1
                if data[line_start:line_start + 1] == b"\t":
                    continue  # inside a payload
                try:
                    strings[int(m.group(2))] = clean(json.loads(m.group(1)))
                except ValueError:
                    pass  # a damaged string entry: frames using it show the index instead
        return strings

    def _compile_id(self, env: dict) -> CompileId | None:
        fid, fcid = env.get("frame_id"), env.get("frame_compile_id")
        if not isinstance(fid, int) or not isinstance(fcid, int):
            return None
        attempt = env.get("attempt", 0)
        key = (fid, fcid, attempt if isinstance(attempt, int) else 0)
        cid = self._compile_ids.get(key)
        if cid is None:
            cid = self._compile_ids[key] = CompileId(*key)
        return cid

    def _compile_id_of(self, fid: bytes, fcid: bytes, attempt: bytes) -> CompileId:
        key = (fid, fcid, attempt)
        cid = self._compile_ids.get(key)
        if cid is None:
            cid = self._compile_ids[key] = self._compile_id(
                {"frame_id": int(fid), "frame_compile_id": int(fcid), "attempt": int(attempt)})
        return cid

    def _key_text(self, raw: bytes) -> str:
        text = self._keys.get(raw)
        if text is None:
            text = self._keys[raw] = raw.decode("ascii")
        return text

    def __len__(self) -> int:
        return len(self._index()["start"])

    def _event(self, i: int) -> TraceEvent:
        if self._all is not None:
            return self._all[i]
        ev = self._cache.get(i)
        if ev is None:
            c = self._index()
            if i < 0:
                i += len(c["start"])
            ev = self._cache.get(i)
            if ev is None:
                ev = self._cache[i] = TraceEvent(self, i, int(c["line"][i]), int(c["file"][i]),
                                                 int(c["start"][i]), int(c["head"][i]),
                                                 int(c["end"][i]))
        return ev

    def peek(self, n: int) -> list[TraceEvent]:
        """The first `n` records (parsed, unvalidated) without indexing the whole trace: what a
        caller checks before deciding the file is a trace at all."""
        out: list[TraceEvent] = []
        for fi, data in enumerate(self._data):
            starts = [] if data.startswith(b"\t") or not data else [0]
            for m in _RECORD_START.finditer(data):
                if len(starts) > n - len(out):
                    break
                starts.append(m.start() + 1)
            starts.append(len(data))
            for s, e in zip(starts, starts[1:]):
                if len(out) >= n:
                    return out
                h = data.find(b"\n", s, e)
                ev = TraceEvent(self, len(out), data.count(b"\n", 0, s) + 1, fi, s,
                                e if h < 0 else h, e)
                ev._parse()
                out.append(ev)
        return out

    def where(self, ev: TraceEvent) -> str:
        """'line N' (or 'file:line N' for a folder of several files) for messages."""
        if len(self.files) > 1:
            return f"{self.files[ev.file_index].name} line {ev.lineno}"
        return f"line {ev.lineno}"

    # -- full scan (validation) -------------------------------------------------------------
    def scan(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Parse every envelope and check every payload; fills `skipped` and `damaged`, and
        drops unparseable records from `events` (their line numbers stay in `skipped`).
        `progress(done, total)` is called every few thousand records (from this thread)."""
        if self._scanned:
            return
        with self._lock:
            if not self._scanned:
                self._scan(progress)

    def _scan(self, progress) -> None:
        c = self._index()
        n = len(c["start"])
        rows = zip(c["start"].tolist(), c["head"].tolist(), c["end"].tolist(),
                   c["line"].tolist(), c["file"].tolist())
        cache, kept, bad, data, md5 = self._cache, [], [], self._data, hashlib.md5
        fast, context_keys = _FAST_HEADER.fullmatch, _CONTEXT_KEYS_BYTES
        for i, (start, head, end, line, fi) in enumerate(rows):
            if progress is not None and i % 5000 == 0:
                progress(i, n)
            ev = cache.get(i)
            if ev is None:
                ev = TraceEvent(self, i, line, fi, start, head, end)
            if not ev._parsed:
                m = fast(data[fi], start, head)
                if m is not None and m.group(1) not in context_keys:
                    ev._fast(m, self)
                    expected = m.group(6)
                    if expected is not None:  # as below, without parsing the envelope
                        raw = data[fi][head:end]
                        if raw.endswith(b"\n"):
                            raw = raw[:-1]
                        raw = raw.replace(b"\n\t", b"\n")[1:] if raw else b""
                        ev._payload_ok = (md5(raw, usedforsecurity=False).hexdigest()
                                          == expected.decode())
                        if not ev._payload_ok:
                            self._damaged.append((line, f"{self.where(ev)}: payload of {ev.key!r} "
                                                  "does not match its md5 (truncated or edited)"))
                    ev.index = len(kept)
                    kept.append(ev)
                    continue
                ev._parse()
            if ev.error:
                self._skipped.append((line, f"{self.where(ev)}: {ev.error}"))
                bad.append(i)
                continue
            expected = ev.envelope.get("has_payload")
            if expected is None:
                pass
            elif ev._payload_ok is None and isinstance(expected, str):
                raw = data[fi][head:end]  # inline _payload_bytes / _check_md5: 100,000 times
                if raw.endswith(b"\n"):
                    raw = raw[:-1]
                raw = raw.replace(b"\n\t", b"\n")[1:] if raw else b""
                ev._payload_ok = md5(raw, usedforsecurity=False).hexdigest() == expected
            if expected is not None and not ev.payload_ok:
                self._damaged.append((line, f"{self.where(ev)}: payload of {ev.key!r} does "
                                      "not match its md5 (truncated or edited)"))
            ev.index = len(kept)
            kept.append(ev)
        if bad:  # the columns follow the kept events (search maps byte offsets through them)
            import numpy as np

            keep = np.ones(n, dtype=bool)
            keep[bad] = False
            self._cols = {k: v[keep] for k, v in c.items()}
        self._all, self._cache = kept, {}
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
        import numpy as np

        rx = re.compile(pattern.encode("utf-8"), re.I if ignore_case else 0)
        self.scan()
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
