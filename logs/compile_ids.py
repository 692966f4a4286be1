"""Compile ids: which compilation an event belongs to, carried by a contextvar.

`[frame_id/frame_compile_id]` as in TORCH_LOGS, with `_attempt` when the frontend restarted
the analysis of the same frame (attempt > 0). A contextvar (not a global) so that threads
and nested compiles each see their own id.
"""
from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Iterator, NamedTuple


class CompileId(NamedTuple):
    frame_id: int
    frame_compile_id: int
    attempt: int = 0

    def __str__(self) -> str:
        base = f"{self.frame_id}/{self.frame_compile_id}"
        return f"{base}_{self.attempt}" if self.attempt else base

    @property
    def folder_name(self) -> str:
        """Name of this compile id's debug-folder subdirectory: `0_1` or `0_1_2`."""
        return str(self).replace("/", "_")

    @classmethod
    def parse(cls, text: str) -> "CompileId":
        """Inverse of str(): '0/1' -> CompileId(0, 1, 0); '0/1_2' -> CompileId(0, 1, 2)."""
        frame, _, rest = text.strip().strip("[]").partition("/")
        fcid, _, attempt = rest.partition("_")
        try:
            return cls(int(frame), int(fcid), int(attempt or 0))
        except ValueError:
            raise ValueError(f"not a compile id: {text!r} (expected 'frame/compile' or "
                             f"'frame/compile_attempt', e.g. '0/1' or '0/1_2')") from None


_current: contextvars.ContextVar[CompileId | None] = contextvars.ContextVar(
    "tracetorch_compile_id", default=None)

# (frame_id, frame_compile_id) -> how many times a compile of that id started (attempt 0).
# Frame ids restart when the frontend's caches are reset, so the same id can name two
# compiles in one process; state kept per compile (its graph breaks) is keyed with this too.
_starts: dict[tuple[int, int], int] = {}


def compile_serial(cid: CompileId) -> int:
    """Which compile of this id is the latest one (0 if none was entered here)."""
    return _starts.get((cid.frame_id, cid.frame_compile_id), 0)


def current_compile_id() -> CompileId | None:
    """Ours, else (when our backend runs under torch.compile) the id Dynamo is compiling, so
    that the trace and the console lines of our backend carry `[frame/compile]` there too."""
    cid = _current.get()
    if cid is None and "torch._guards" in sys.modules:
        cid = dynamo_compile_id()
    return cid


def dynamo_compile_id() -> CompileId | None:
    """The compile id of Dynamo's current compilation (torch._guards.CompileContext), or None.
    Read only; never imports torch."""
    guards = sys.modules.get("torch._guards")
    ctx = getattr(guards, "CompileContext", None)
    if ctx is None:
        return None
    try:
        trace_id = ctx.current_trace_id()
        if trace_id is not None and trace_id.compile_id is not None:
            c = trace_id.compile_id
            if c.frame_id is not None and c.frame_compile_id is not None:
                return CompileId(int(c.frame_id), int(c.frame_compile_id), int(trace_id.attempt or 0))
        c = ctx.current_compile_id()
        if c is not None and c.frame_id is not None and c.frame_compile_id is not None:
            return CompileId(int(c.frame_id), int(c.frame_compile_id), 0)
    except Exception:      # another torch version's layout: no id rather than a broken log call
        return None
    return None


@contextlib.contextmanager
def compile_id_scope(cid: "CompileId | None") -> Iterator[None]:
    """Events inside the block carry `cid` without counting a compile start: what a graph's
    compiled code decides at run time (a CUDA graph recorded, refused, turned off) is logged
    under the id of the compile that made it."""
    if cid is None:
        yield
        return
    token = _current.set(cid)
    try:
        yield
    finally:
        _current.reset(token)


@contextlib.contextmanager
def compile_context(frame_id: int, frame_compile_id: int, attempt: int = 0) -> Iterator[CompileId]:
    """Every event inside the block carries this compile id."""
    cid = CompileId(frame_id, frame_compile_id, attempt)
    if attempt == 0:
        key = (frame_id, frame_compile_id)
        _starts[key] = _starts.get(key, 0) + 1
    token = _current.set(cid)
    try:
        yield cid
    finally:
        _current.reset(token)
