"""The one event record every consumer (console, trace, sinks) receives."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from tracetorch.logs.compile_ids import CompileId


@dataclass(slots=True)
class Event:
    name: str                          # artifact / trace record name, or a log call's event name
    compile_id: CompileId | None
    fields: dict[str, Any]
    payload: Any = None                # str (text), dict/list (json) or None
    time: float = 0.0                  # time.time()
    pathname: str = ""                 # file of the emitting call
    lineno: int = 0
    level: int = logging.DEBUG         # artifacts are DEBUG, as in TORCH_LOGS
    kind: str = "artifact"             # "artifact" (logs.artifact) or "log" (log.debug/info/...)
    logger: str = ""                   # emitting module (__name__) for logs, component for artifacts
    component: str = ""                # frontend, aot, backend, dynamic, cache, minifier
    extra: dict[str, Any] = field(default_factory=dict)   # reserved for consumers
