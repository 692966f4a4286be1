"""Turning an Event into console text: glog (the TORCH_LOGS look), json, console (structlog).

Only called for enabled events, so nothing here needs to be cheap.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import sys
from functools import lru_cache

from tracetorch.logs.events import Event

_LETTER = {logging.DEBUG: "V", logging.INFO: "I", logging.WARNING: "W",
           logging.ERROR: "E", logging.CRITICAL: "C"}
FORMATS = ("glog", "json", "console")


@lru_cache(maxsize=4096)
def relative_path(pathname: str) -> str:
    """`compiler/frontend/guards.py` rather than an absolute path: relative to the longest
    sys.path entry that contains the file (what TORCH_LOGS's make_module_path_relative does)."""
    if not pathname:
        return "<unknown>"
    abspath = os.path.abspath(pathname)
    best = None
    for entry in sys.path:
        base = os.path.abspath(entry or os.getcwd())
        if abspath.startswith(base + os.sep) and (best is None or len(base) > len(best)):
            best = base
    return os.path.relpath(abspath, best) if best else pathname


def rank_prefix() -> str:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return f"[rank{dist.get_rank()}]:"
    except Exception:     # a half-initialised process group must not break logging
        pass
    return ""


def _value(v) -> str:
    text = v if isinstance(v, str) else repr(v)
    return repr(v) if isinstance(v, str) and (not v or any(c.isspace() for c in v)) else text


def payload_text(payload) -> str:
    if payload is None:
        return ""
    if isinstance(payload, str):
        return payload
    return json.dumps(payload, indent=2, default=repr)


def message(event: Event) -> str:
    """The text after the prefix: `event k=v ...` for logs; fields then payload for artifacts."""
    kv = " ".join(f"{k}={_value(v)}" for k, v in event.fields.items() if k != "exception")
    if event.kind == "log":
        text = f"{event.name} {kv}" if kv else event.name
        exc = event.fields.get("exception")
        return f"{text}\n{exc}" if isinstance(exc, str) else text     # a traceback: own lines
    body = payload_text(event.payload)
    if kv:
        return f"{kv}\n{body}" if body else kv
    return body


def glog(event: Event) -> str:
    """`V1122 07:56:31.119000 4639 compiler/frontend/guards.py:88] [2/1] [__recompiles] msg`,
    with the same prefix on every line of a multi-line message."""
    t = datetime.datetime.fromtimestamp(event.time)
    prefix = (f"{rank_prefix()}{_LETTER.get(event.level, 'V')}{t:%m%d %H:%M:%S}.{t.microsecond:06d} "
              f"{os.getpid()} {relative_path(event.pathname)}:{event.lineno}]")
    if event.compile_id is not None:
        prefix += f" [{event.compile_id}]"
    if event.kind == "artifact":
        prefix += f" [__{event.name}]"
    return "\n".join(f"{prefix} {line}" for line in message(event).split("\n"))


def as_dict(event: Event) -> dict:
    d = {
        "time": datetime.datetime.fromtimestamp(event.time).isoformat(timespec="microseconds"),
        "level": logging.getLevelName(event.level).lower(),
        "pid": os.getpid(),
        "file": relative_path(event.pathname),
        "line": event.lineno,
        "compile_id": str(event.compile_id) if event.compile_id is not None else None,
        "logger": event.logger,
        "kind": event.kind,
        "event": event.name,
    }
    for k, v in event.fields.items():
        d.setdefault(k, v)
    if event.payload is not None:
        d["payload"] = event.payload
    return d


def json_line(event: Event) -> str:
    return json.dumps(as_dict(event), default=repr)


_console_renderers: dict[bool, object] = {}


def console(event: Event, colors: bool = False) -> str:
    import structlog    # structlog's pretty renderer; imported only when this format is chosen
    renderer = _console_renderers.get(colors)
    if renderer is None:
        renderer = _console_renderers[colors] = structlog.dev.ConsoleRenderer(colors=colors)
    d = as_dict(event)
    for key in ("pid", "kind"):
        d.pop(key)
    d["at"] = f"{d.pop('file')}:{d.pop('line')}"
    if d["compile_id"] is None:
        d.pop("compile_id")
    payload = d.pop("payload", None)
    d["timestamp"] = d.pop("time")
    if event.kind == "artifact":
        d["event"] = f"[__{event.name}]"
    text = renderer(None, d["level"], d)
    if payload is not None:
        text += "\n" + payload_text(payload)
    return text


def render(event: Event, fmt: str, colors: bool = False) -> str:
    if fmt == "json":
        return json_line(event)
    if fmt == "console":
        return console(event, colors)
    return glog(event)
