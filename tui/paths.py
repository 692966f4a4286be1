"""What PATH means on the command line: a debug run folder, a trace file, a folder of traces
(ours or PyTorch's), a trace_debug base folder, or nothing (the newest run under ./trace_debug)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracetorch.logs.trace_reader import Trace, TraceError, find_trace_files, read_trace

DEFAULT_BASE = Path("trace_debug")


class PathError(Exception):
    """PATH cannot be opened; the message says why, for the user."""


@dataclass
class Opened:
    trace: Trace
    debug_dir: Path | None  # the debug run folder (repro/, <cid>/source.py), when there is one
    shown: str  # what to call it in the title


def display_path(p: Path) -> str:
    """`p` as the user would type it from here: relative to the working directory when it lies
    under it (shorter, and the same on every machine), else absolute."""
    try:
        return str(Path(p).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)


def newest_run(base: Path) -> Path | None:
    latest = base / "latest"
    if latest.is_dir():
        return latest.resolve()
    runs = sorted((p for p in base.glob("run_*") if p.is_dir()), key=lambda p: p.name)
    return runs[-1] if runs else None


def is_debug_run(folder: Path) -> bool:
    return (folder / "trace.log").is_file()


def open_path(arg: str | None) -> Opened:
    if arg is None:
        run = newest_run(DEFAULT_BASE)
        if run is None:
            raise PathError(f"no trace given, and no runs under ./{DEFAULT_BASE}. Pass a trace "
                            "file or folder, or run your program with TRACE_COMPILE_DEBUG=1 "
                            "(or try: tracetui --demo).")
        return _open(run)
    p = Path(arg).expanduser()
    if not p.exists():
        raise PathError(f"{arg}: no such file or folder")
    if p.is_dir() and not is_debug_run(p) and not find_trace_files(p):
        run = newest_run(p)  # a trace_debug base folder
        if run is not None:
            return _open(run)
    return _open(p)


def _open(p: Path) -> Opened:
    debug_dir = None
    target = p
    if p.is_dir() and is_debug_run(p):
        debug_dir, target = p, p / "trace.log"
    elif p.is_file() and p.name == "trace.log" and ((p.parent / "config.yaml").exists()
                                                     or (p.parent / "repro").is_dir()):
        debug_dir = p.parent
    try:
        trace = read_trace(target)
    except TraceError as e:
        raise PathError(str(e)) from None
    except (OSError, ValueError) as e:
        raise PathError(f"{p}: cannot read it ({e})") from None
    _check_looks_like_trace(trace, p)
    return Opened(trace, debug_dir, str(p))


def _check_looks_like_trace(trace: Trace, p: Path) -> None:
    """A non-empty file none of whose first records parse is not a trace (e.g. a binary file)."""
    sample = trace.peek(50)  # not the whole index: a big trace opens before it is read
    if not sample:
        if trace.size > 0:
            raise PathError(f"{p}: not a trace (no glog-prefixed records found)")
        return  # an empty trace: a process that never compiled; opens with "no compiles"
    if all(ev.error for ev in sample):
        raise PathError(f"{p}: not a trace (line {sample[0].lineno}: {sample[0].error})")
