"""tracetorch's logging and structured tracing (TRACE_LOGS, TRACE_DIR): one event stream.

    from tracetorch import logs
    log = logs.get_logger(__name__)
    log.debug("fused_nodes", first="buf0", second="buf1", reason="same iteration space")
    logs.artifact("guards", lambda: guards_text)          # payload built only if wanted
    logs.trace_record("dynamo_start", lambda: {"stack": frames})
    with logs.compile_context(0, 1): ...                   # compile id [0/1] on every line

Environment (read once, at import): TRACE_LOGS (TORCH_LOGS syntax; TRACE_LOGS=help lists the
names), TRACE_LOGS_FORMAT (glog | json | console), TRACE_LOGS_OUT (also write to a file),
TRACE_DIR (structured trace folder). `logs` imports nothing else of tracetorch.

Trace-only records (graph_break, guard_failure, recompile, fusion_decision, kernel,
perf_hint, ...) go to the structured trace and to sinks, never to the console: for the
console, emit the matching registered artifact (graph_breaks, recompiles, ...) as text.

Modules, in the order data flows through them:
    registry       every TRACE_LOGS name
    settings       TRACE_LOGS parsing
    events         the one event record
    compile_ids    which compilation an event belongs to
    bound          get_logger(): filtering bound loggers
    core           routing events to console, trace, sinks
    render         console text: glog, json, console
    trace_keys     artifact name -> TORCH_TRACE envelope key
    trace_writer   the structured trace writer
    trace_reader   the structured trace reader
    break_reasons  graph-break reasons: id, explanation, hints
    sanitize       text from a trace made safe for a terminal
    testing        capture(): the events a block of code emits, for tests and scripts
"""
from __future__ import annotations

import os
import sys
import warnings

from tracetorch.logs import registry
from tracetorch.logs.bound import get_logger
from tracetorch.logs.compile_ids import CompileId, compile_context, compile_id_scope, current_compile_id
from tracetorch.logs.core import (add_sink, artifact, close_trace, enabled, open_trace, open_trace_dir,
                       remove_sink, trace_record, tracing)
from tracetorch.logs.events import Event
from tracetorch.logs.settings import LogSettingsError, LogsHelp, help_text
from tracetorch.logs.trace_keys import envelope_key
from tracetorch.logs import testing
from tracetorch.logs import core as _core, settings as _settings

__all__ = [
    "get_logger", "enabled", "artifact", "trace_record", "compile_context", "compile_id_scope", "current_compile_id",
    "CompileId", "add_sink", "remove_sink", "Event", "set_logs", "open_trace", "open_trace_dir",
    "close_trace", "trace_dir_writer", "LogSettingsError", "LogsHelp", "help_text", "registry",
    "envelope_key", "configure_from_env", "tracing", "testing",
]

_TRACE_DIR_WRITER = None


def set_logs(*, all=None, frontend=None, dynamo=None, aot=None, backend=None, inductor=None,
             dynamic=None, cache=None, minifier=None, modules=None, **artifacts) -> None:
    """Like torch._logging.set_logs: component levels as ints (logging.DEBUG, ...), artifacts
    as booleans, `modules={"compiler.backend.scheduler": logging.DEBUG}`. Each call replaces
    the previous settings; set_logs() resets to the default (warnings only). Ignored, with a
    warning, when TRACE_LOGS is set in the environment."""
    if _core._state.from_env:
        warnings.warn("Using TRACE_LOGS environment variable for log settings, ignoring call "
                      "to set_logs", UserWarning, stacklevel=2)
        return
    kwargs = dict(all=all, frontend=frontend, dynamo=dynamo, aot=aot, backend=backend,
                  inductor=inductor, dynamic=dynamic, cache=cache, minifier=minifier,
                  modules=modules, **artifacts)
    _core._state.settings = _settings.from_kwargs(kwargs)
    _core.refresh()


def trace_dir_writer():
    """The TRACE_DIR writer, or None (its `.path` is the file once something was written)."""
    return _TRACE_DIR_WRITER


def configure_from_env(environ=None) -> None:
    """(Re)read TRACE_LOGS, TRACE_LOGS_FORMAT, TRACE_LOGS_OUT, TRACE_DIR. Raises
    LogSettingsError (LogsHelp for help) / ValueError on bad values."""
    global _TRACE_DIR_WRITER
    env = os.environ if environ is None else environ
    text = env.get("TRACE_LOGS")
    _core._state.settings = _settings.parse(text) if text else _settings.LogSettings()
    _core._state.from_env = bool(text and text.strip())
    _core.set_format((env.get("TRACE_LOGS_FORMAT") or "glog").strip().lower())
    _core.set_out(env.get("TRACE_LOGS_OUT") or None)
    if _TRACE_DIR_WRITER is not None:
        close_trace(_TRACE_DIR_WRITER)
        _TRACE_DIR_WRITER = None
    if env.get("TRACE_DIR"):
        _TRACE_DIR_WRITER = open_trace_dir(env["TRACE_DIR"])
    _core.refresh()


def _init_from_env() -> None:
    """At import: a mistake in the environment is a clean message and exit, not a traceback."""
    try:
        configure_from_env()
    except LogsHelp as h:
        sys.stderr.write(str(h) + "\n")
        raise SystemExit(0) from None
    except ValueError as e:
        sys.stderr.write(f"tracetorch: {e}\n")
        raise SystemExit(2) from None


_init_from_env()
