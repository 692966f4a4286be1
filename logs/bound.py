"""`logs.get_logger(__name__)`: structlog filtering bound loggers whose level can change.

structlog's filtering bound loggers turn every method below the minimum level into a bare
`return None` at class level, so a disabled `log.debug(...)` costs one method call. The level
is fixed per class, so when TRACE_LOGS / set_logs / sinks change we swap each live logger's
class to the filtering class of its new minimum level (the lowest level any consumer wants).
The wrapped "logger" is a Router that sends the finished event to the console and sinks,
each with its own level.
"""
from __future__ import annotations

import logging
import sys
import time
import weakref

import structlog

from tracetorch.logs import core, registry
from tracetorch.logs.compile_ids import current_compile_id
from tracetorch.logs.events import Event

_NAME_TO_LEVEL = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                  "warn": logging.WARNING, "error": logging.ERROR, "exception": logging.ERROR,
                  "critical": logging.CRITICAL, "fatal": logging.CRITICAL, "msg": logging.INFO}

_SKIP = (core._LOGS_DIR, structlog.__file__.rsplit("/", 1)[0] + "/")


class Router:
    """The end of a logger's structlog chain: hands the event to whoever wants its level."""

    def __init__(self, module: str):
        self.module = module
        self.component = registry.component_for_module(module)

    def _route(self, method: str, event_dict: dict) -> None:
        level = _NAME_TO_LEVEL.get(method, logging.INFO)
        name = str(event_dict.pop("event", ""))
        exc_info = event_dict.pop("exc_info", None)
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(_SKIP):
            frame = frame.f_back
        if method == "exception" or exc_info:
            import traceback
            event_dict["exception"] = traceback.format_exc().rstrip()
        event = Event(name, current_compile_id(), event_dict, None, time.time(),
                      frame.f_code.co_filename if frame else "", frame.f_lineno if frame else 0,
                      level, "log", self.module, self.component)
        if level >= core._state.settings.module_level(self.module):
            core.console_write(event)
        core.deliver(event, lambda s: level >= (s.level if s.level is not None
                                                else core._state.settings.module_level(self.module)))

    def __getattr__(self, method: str):
        if method not in _NAME_TO_LEVEL:
            raise AttributeError(method)
        return lambda **event_dict: self._route(method, event_dict)


def _filtering_class(level: int) -> type:
    """The class for the highest standard level not above `level` (set_logs takes any int)."""
    return _CLASSES[max(lv for lv in _CLASSES if lv <= max(level, logging.NOTSET))]


def _make_classes() -> dict[int, type]:
    classes = {}
    for level in (logging.NOTSET, logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR,
                  logging.CRITICAL):
        base = structlog.make_filtering_bound_logger(level)     # public API, cached classes
        classes[level] = type(f"TraceLogger{base.__name__.removeprefix('BoundLogger')}", (base,), {
            "bind": _bind, "new": _new, "unbind": _unbind, "try_unbind": _try_unbind,
            "__hash__": object.__hash__})     # structlog defines __eq__; WeakSet needs a hash
    return classes


def _track(logger):
    _LIVE.add(logger)
    return logger


def _bind(self, **new_values):
    return _track(super(type(self), self).bind(**new_values))


def _new(self, **new_values):
    return _track(super(type(self), self).new(**new_values))


def _unbind(self, *keys):
    return _track(super(type(self), self).unbind(*keys))


def _try_unbind(self, *keys):
    return _track(super(type(self), self).try_unbind(*keys))


_CLASSES = _make_classes()
_LIVE: "weakref.WeakSet" = weakref.WeakSet()
_BY_NAME: dict[str, object] = {}


def effective_level(module: str) -> int:
    level = core._state.settings.module_level(module)
    sink_level = core.sink_min_level()
    return level if sink_level is None else min(level, sink_level)


def get_logger(name: str = "compiler"):
    """The bound logger of the component owning module `name` (pass __name__)."""
    name = registry.own_module_name(name)
    logger = _BY_NAME.get(name)
    if logger is None:
        cls = _filtering_class(effective_level(name))
        logger = _BY_NAME[name] = _track(cls(Router(name), [], {}))
    return logger


def refresh_levels() -> None:
    for logger in list(_LIVE):
        logger.__class__ = _filtering_class(effective_level(logger._logger.module))


core._state.refresh_hooks.append(refresh_levels)
