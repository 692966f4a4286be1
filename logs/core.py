"""Routing: who wants which event (console, trace files, sinks), and the cheap checks.

All decisions about *whether* something is logged are precomputed into one module global,
`_ON` (a frozenset of wanted artifact names, or an object that contains everything while a
trace or a debug sink wants all), whenever the settings change, so that a disabled
`artifact()` call is one function call plus one C-level set lookup and never builds its payload.
"""
from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

from tracetorch.logs import registry
from tracetorch.logs.compile_ids import compile_serial, current_compile_id
from tracetorch.logs.events import Event
from tracetorch.logs.render import FORMATS, render
from tracetorch.logs.settings import LogSettings
from tracetorch.logs.trace_writer import TraceWriter, capture_stack, encode_payload

class _Everything:
    """Stands in for _ON while some consumer (a trace, a debug sink) wants every name. The
    per-instruction ones (registry.CHATTY) are left out while only traces want everything:
    they must be named (TRACE_LOGS, or a sink asking for them or for "all")."""

    def __init__(self, named=frozenset()):
        self.named = named            # chatty names asked for by the console or a sink

    def __contains__(self, name) -> bool:
        return name not in registry.CHATTY or name in self.named


_ON = frozenset()                     # artifact names some consumer wants, or an _Everything

_LOGS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(eq=False)
class SinkEntry:
    fn: object
    level: int | None                 # None: follow the console settings
    artifacts: object                 # None (console's), "all", or a set of names

    def wants_artifact(self, name: str) -> bool:
        if self.artifacts == "all":
            return True
        if isinstance(self.artifacts, (set, frozenset)) and name in self.artifacts:
            return True
        return name in _state.console_artifacts


@dataclass
class _State:
    settings: LogSettings = field(default_factory=LogSettings)
    console_artifacts: frozenset = frozenset()
    fmt: str = "glog"
    out_path: str | None = None
    out_file: object = None
    traces: list = field(default_factory=list)          # TraceWriter
    sinks: list = field(default_factory=list)           # SinkEntry
    from_env: bool = False                              # TRACE_LOGS was set: set_logs is ignored
    foreign_handlers: list = field(default_factory=list)
    refresh_hooks: list = field(default_factory=list)
    trace_chatty: frozenset = frozenset()               # per-instruction artifacts named somewhere
    # compile id -> the graph breaks of that compile so far: its compilation_metrics record
    # carries them as restart_reasons (what tlparse reads for "Success with restart")
    breaks: dict = field(default_factory=dict)


_state = _State()


# -- the cheap checks --------------------------------------------------------------------------
def enabled(name: str) -> bool:
    """True if any consumer (console, trace, sink) wants the artifact/record `name`."""
    return name in _ON


def artifact(name: str, payload_fn=None, /, **fields) -> None:
    """Emit artifact/trace-only record `name`; `payload_fn()` is called only if someone wants it."""
    if name in _ON:
        _emit_artifact(name, payload_fn, fields, sys._getframe(1))


def tracing() -> bool:
    """True while some structured trace (TRACE_DIR, a debug folder's trace.log) is open."""
    return bool(_state.traces)


def trace_record(key: str, metadata_fn, payload_fn=None) -> None:
    """A raw structured-trace record with a PyTorch envelope key; no-op without a trace."""
    if _state.traces:
        _emit_trace_record(key, metadata_fn, payload_fn, sys._getframe(1))


# -- emission (only reached when enabled) --------------------------------------------------------
def _build(name: str, fn):
    """Call a payload/metadata builder; a broken builder must not break compilation, so its
    error becomes the payload (and a warning) instead of propagating into the compiler."""
    if fn is None:
        return None
    try:
        return fn()
    except Exception as exc:
        warnings.warn(f"logs: building the payload of {name!r} raised {type(exc).__name__}: "
                      f"{exc}", RuntimeWarning, stacklevel=4)
        return f"<payload of {name} could not be built: {type(exc).__name__}: {exc}>"


def _restart_reason(d: dict) -> str:
    """A graph break as tlparse lists restarts: reason, place, registry id, explanation, hints."""
    text = str(d.get("reason", ""))
    if d.get("filename"):
        text += f" ({d.get('filename')}:{d.get('lineno')})"
    if d.get("reason_id"):
        text += f"\n  [{d['reason_id']}] Explanation: {d.get('explanation', '')}"
    for h in d.get("hints") or []:
        text += f"\n  Hint: {h}"
    return text


def _note_restarts(name, payload, cid) -> None:
    """graph_break records are remembered per compile id; the compile's metrics get them as
    `restart_reasons` (a list, empty when nothing broke: tlparse reads a missing field as a
    restart). The emitter's own value wins. Kept only while the metrics record is wanted, and
    keyed by which compile of that id this is: a compile that ended without its metrics record
    (failed, or ran eagerly) must not lend its breaks to a later compile of the same id."""
    if cid is None or not isinstance(payload, dict):
        return
    key = (cid.frame_id, cid.frame_compile_id, compile_serial(cid))
    if name == "graph_break":
        if "compile_metrics" not in _ON:
            return
        if key not in _state.breaks and len(_state.breaks) >= 64:
            _state.breaks.clear()         # compiles that never reported: nothing reads them
        _state.breaks.setdefault(key, []).append(_restart_reason(payload))
    elif name == "compile_metrics":
        found = _state.breaks.pop(key, [])
        if not isinstance(payload.get("restart_reasons"), list):
            payload["restart_reasons"] = found


def _emit_artifact(name, payload_fn, fields, frame) -> None:
    payload = _build(name, payload_fn)
    if name in ("graph_break", "compile_metrics"):
        _note_restarts(name, payload, current_compile_id())
    art = registry.ARTIFACTS.get(name)
    event = Event(name, current_compile_id(), fields, payload, time.time(),
                  frame.f_code.co_filename, frame.f_lineno, logging.DEBUG, "artifact",
                  art.component if art else "trace", art.component if art else "")
    if name in _state.console_artifacts:
        console_write(event)
    if _state.traces and (name not in registry.CHATTY or name in _state.trace_chatty):
        from tracetorch.logs.trace_keys import envelope_for
        key, metadata, body = envelope_for(name, payload, fields)
        text = encode_payload(body)
        stack = capture_stack((_LOGS_DIR,)) if event.compile_id is None else None
        for writer in list(_state.traces):
            writer.write(key, metadata, text, event.compile_id, event.pathname, event.lineno,
                         event.time, stack)
    deliver(event, lambda s: s.wants_artifact(name))


def _emit_trace_record(key, metadata_fn, payload_fn, frame) -> None:
    metadata = _build(key, metadata_fn) if metadata_fn is not None else {}
    if not isinstance(metadata, dict):
        metadata = {"value": metadata}     # the envelope value must be an object
    payload = encode_payload(_build(key, payload_fn))
    cid = current_compile_id()
    stack = capture_stack((_LOGS_DIR,)) if cid is None else None
    for writer in list(_state.traces):
        writer.write(key, metadata, payload, cid, frame.f_code.co_filename, frame.f_lineno,
                     time.time(), stack)


def deliver(event: Event, wants) -> None:
    for sink in list(_state.sinks):
        if wants(sink):
            try:
                sink.fn(event)
            except Exception as exc:     # a broken sink must not break compilation
                warnings.warn(f"logs: sink {sink.fn!r} raised {type(exc).__name__}: {exc}",
                              RuntimeWarning, stacklevel=2)


def console_write(event: Event) -> None:
    stream = sys.stderr
    text = render(event, _state.fmt, colors=_state.fmt == "console" and _isatty(stream))
    stream.write(text + "\n")
    if _state.out_file is not None:
        plain = render(event, _state.fmt) if _state.fmt == "console" else text
        _state.out_file.write(plain + "\n")
        _state.out_file.flush()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except Exception:
        return False


# -- configuration -------------------------------------------------------------------------------
def sink_min_level() -> int | None:
    levels = [s.level for s in _state.sinks if s.level is not None]
    return min(levels) if levels else None


def refresh() -> None:
    """Recompute the cheap-check globals and every logger's level after any change."""
    global _ON
    console = frozenset(_state.settings.enabled_artifacts())
    _state.console_artifacts = console
    on = set(console)
    for s in _state.sinks:
        if isinstance(s.artifacts, (set, frozenset)):
            on |= s.artifacts
    everything = bool(_state.traces) or any(s.artifacts == "all" for s in _state.sinks)
    _state.trace_chatty = frozenset(on & registry.CHATTY)    # named: these go to traces too
    if any(s.artifacts == "all" for s in _state.sinks):
        on |= registry.CHATTY
    _ON = _Everything(frozenset(on)) if everything else frozenset(on)
    _apply_foreign(_state.settings)
    for hook in list(_state.refresh_hooks):
        hook()


def set_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"TRACE_LOGS_FORMAT={fmt!r} is not a format; use one of "
                         f"{', '.join(FORMATS)} (glog is the default TORCH_LOGS look)")
    _state.fmt = fmt


def set_out(path: str | None) -> None:
    if _state.out_file is not None:
        _state.out_file.close()
        _state.out_file = None
    _state.out_path = path
    if path:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            _state.out_file = open(path, "a", encoding="utf-8")
        except OSError as e:
            raise ValueError(f"TRACE_LOGS_OUT={path!r}: cannot open the file for writing: "
                             f"{e.strerror or e}") from None


class _ForeignHandler(logging.Handler):
    """Prints another library's stdlib records (named in TRACE_LOGS) in our console format."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            event = Event(record.getMessage(), current_compile_id(), {}, None, record.created,
                          record.pathname, record.lineno, record.levelno, "log", record.name)
            console_write(event)
        except Exception:
            self.handleError(record)


def _apply_foreign(settings: LogSettings) -> None:
    for logger, handler, old_level in _state.foreign_handlers:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    _state.foreign_handlers = []
    for name, level in settings.foreign.items():
        logger = logging.getLogger(name)
        handler = _ForeignHandler(level)
        _state.foreign_handlers.append((logger, handler, logger.level))
        logger.setLevel(level)
        logger.addHandler(handler)


# -- sinks and traces ------------------------------------------------------------------------------
def add_sink(sink, *, level: int | None = None, artifacts="all"):
    """Call `sink(event)` for every event it wants.

    artifacts: "all" (the default) gets every artifact and trace-only record (graph_break,
      kernel, ...), so their payloads are built while the sink is registered; an iterable of
      names gets those plus what the console shows; None only what the console shows.
    level: None (the default) gets log records (log.debug/info/...) at the console's levels
      (TRACE_LOGS / set_logs); an int gets every component's records at that level or above
      (logging.DEBUG for a debug.log).
    Returns `sink`, for remove_sink."""
    if artifacts is not None and artifacts != "all":
        artifacts = frozenset(artifacts)
    _state.sinks.append(SinkEntry(sink, level, artifacts))
    refresh()
    return sink


def remove_sink(sink) -> None:
    _state.sinks = [s for s in _state.sinks if s.fn != sink]   # ==: bound methods are new objects
    refresh()


def open_trace(path: str) -> TraceWriter:
    """Also write the structured trace to the file `path` (e.g. a debug folder's trace.log)."""
    writer = TraceWriter(path)
    _state.traces.append(writer)
    refresh()
    return writer


def open_trace_dir(directory: str) -> TraceWriter:
    """Write `trace_<pid>.log` into `directory` (what TRACE_DIR does)."""
    writer = TraceWriter(directory=directory)
    _state.traces.append(writer)
    refresh()
    return writer


def close_trace(writer: TraceWriter) -> None:
    writer.close()
    _state.traces = [w for w in _state.traces if w is not writer]
    refresh()
