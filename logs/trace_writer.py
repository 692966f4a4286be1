"""The structured trace writer: PyTorch's TORCH_TRACE wire format (DESIGN section 5).

Each record is one line `<glog prefix> <JSON envelope>`, followed by its payload (if any) on
lines that each start with a tab; the envelope's `has_payload` is the payload's md5. File names
in stacks are interned through `{"str": [filename, index]}` records. The file is opened lazily
(no empty files from processes that never compile) and written line-buffered, so a crash leaves
a valid trace up to the crash. See docs/trace-format.md for every record kind.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import sys
import threading
import time
import traceback
import warnings

from tracetorch.logs.compile_ids import CompileId

TRACE_FILE_PREFIX = "trace_"


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("tracetorch")
    except Exception:          # running from a checkout that was never pip-installed
        return "0.1.0+checkout"


def _rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return None


def encode_payload(payload) -> str | None:
    """Text stays text; JSON payloads use PyTorch's layout (indent=0; a list one item per line)."""
    if payload is None or isinstance(payload, str):
        return payload
    if isinstance(payload, list):
        return "[\n" + ",\n".join(json.dumps(item, default=repr) for item in payload) + "\n]"
    return json.dumps(payload, indent=0, default=repr)


def md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


class TraceWriter:
    """Writes one trace file. `path` is a file, or with `directory` a folder in which the file
    `trace_<pid>.log` (`trace_rank_<r>_<pid>.log` under torch.distributed) is created lazily.
    `prefix(when, pathname, lineno) -> str`, when given, makes each line's glog prefix in place
    of the clock, pid and caller: a trace that must be the same on every run (tui/synthetic.py)."""

    def __init__(self, path: str | None = None, *, directory: str | None = None, prefix=None):
        if (path is None) == (directory is None):
            raise ValueError("TraceWriter needs exactly one of path= or directory=")
        self.path = path
        self.directory = directory
        self._prefix = prefix or self._glog_prefix
        self._file = None
        self._pid = None
        self._strings: dict[str, int] = {}
        self._lock = threading.Lock()
        self.closed = False

    # -- file handling ---------------------------------------------------------------------
    def _open(self, when: float):
        if self.directory is not None:
            os.makedirs(self.directory, exist_ok=True)
            rank = _rank()
            name = (f"{TRACE_FILE_PREFIX}rank_{rank}_{os.getpid()}.log" if rank is not None
                    else f"{TRACE_FILE_PREFIX}{os.getpid()}.log")
            self.path = os.path.join(self.directory, name)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._file = open(self.path, "a", buffering=1, encoding="utf-8")   # line-buffered
        self._pid = os.getpid()
        self._strings = {}
        self._write_line("artifact", {"name": "tracetorch_version", "encoding": "json"},
                         encode_payload({"tracetorch_version": _version(),
                                         "python": sys.version.split()[0],
                                         "torch_version": _torch_version()}),
                         None, __file__, 0, when, None)

    def close(self):
        with self._lock:
            if self._file is not None:
                self._file.close()
            self._file = None
            self.closed = True

    # -- records -----------------------------------------------------------------------------
    def intern(self, filename: str) -> int:
        """Index of `filename` in the string table, writing its `str` record the first time."""
        idx = self._strings.get(filename)
        if idx is None:
            idx = self._strings[filename] = len(self._strings)
            self._raw(self._prefix(time.time(), __file__, 0), {"str": [filename, idx]}, None)
        return idx

    def frames(self, frames) -> list[dict]:
        """Stack frames {line, name, filename, loc?} with filenames interned to indices."""
        out = []
        for fr in frames:
            fr = dict(fr)
            if isinstance(fr.get("filename"), str):
                fr["filename"] = self.intern(fr["filename"])
            out.append(fr)
        return out

    def write(self, key: str, metadata, payload, compile_id: CompileId | None,
              pathname: str, lineno: int, when: float, stack=None) -> None:
        """One record. `payload` is already encoded text (or None)."""
        with self._lock:
            if self.closed:
                return
            if self._file is not None and self._pid != os.getpid():
                if self.directory is None:
                    # a forked child must not interleave its own string table into the
                    # parent's file (a debug folder's trace.log): it writes nothing there
                    self._file, self.closed = None, True
                    return
                self._file = None                                # TRACE_DIR: its own file
            if self._file is None:                               # opened lazily
                try:
                    self._open(when)
                except OSError as e:      # an unwritable TRACE_DIR must not break compilation
                    self.closed = True
                    warnings.warn(f"tracetorch: cannot write the structured trace to "
                                  f"{self.path or self.directory}: {e.strerror or e}; "
                                  f"tracing is off for this process", RuntimeWarning,
                                  stacklevel=3)
                    return
            self._write_line(key, metadata, payload, compile_id, pathname, lineno, when, stack)

    def _write_line(self, key, metadata, payload, compile_id, pathname, lineno, when, stack):
        if isinstance(metadata, dict) and isinstance(metadata.get("stack"), list):
            metadata = {**metadata, "stack": self.frames(metadata["stack"])}
        envelope = {key: metadata}
        rank = _rank()
        if rank is not None:
            envelope["rank"] = rank
        if compile_id is not None:
            envelope["frame_id"] = compile_id.frame_id
            envelope["frame_compile_id"] = compile_id.frame_compile_id
            envelope["attempt"] = compile_id.attempt
        elif stack is not None:
            envelope["stack"] = self.frames(stack)
        if payload is not None:
            envelope["has_payload"] = md5(payload)
        self._raw(self._prefix(when, pathname, lineno), envelope, payload)

    def _glog_prefix(self, when: float, pathname: str, lineno: int) -> str:
        from tracetorch.logs.render import relative_path
        t = datetime.datetime.fromtimestamp(when)
        return (f"V{t:%m%d %H:%M:%S}.{t.microsecond:06d} {os.getpid()} "
                f"{relative_path(pathname)}:{lineno}]")

    def _raw(self, prefix: str, envelope: dict, payload: str | None) -> None:
        text = f"{prefix} {json.dumps(envelope, default=repr)}"
        if payload is not None:
            text += "".join(f"\n\t{line}" for line in payload.split("\n"))
        self._file.write(text + "\n")


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")      # never import torch just to write a trace
    return getattr(torch, "__version__", None) if torch is not None else None


def capture_stack(skip_prefixes: tuple[str, ...], limit: int = 30) -> list[dict]:
    """The Python stack of the current call (outermost first), without our logging frames."""
    frames = []
    for fs in traceback.extract_stack()[:-1]:
        if fs.filename.startswith(skip_prefixes):
            continue
        frames.append({"line": fs.lineno, "name": fs.name, "filename": fs.filename,
                       "loc": (fs.line or "").strip()})
    return frames[-limit:]
