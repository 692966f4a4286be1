"""Watching nn.Modules for mutation, so guards may treat the module tree as static.

Guards on a compiled module used to walk every attribute path (`L['self'].h[3].attn.c_attn.weight`)
on every call, through nn.Module.__getattr__ and ModuleList.__getitem__: most of the per-call cost.
Like TorchDynamo (torch/_dynamo/mutation_guard.py), we resolve those paths once, when the guards
are built, and watch the modules along them instead: the methods through which a module's
attributes, parameters, buffers and submodules change are patched (once per process) to call
`notify(module, name, change)`, which tells every listener that depends on that attribute of that
module (guards.py marks its cache entry stale, to be re-validated by the full path-walking guards
on the next call).

Caught: setattr/delattr on a module (so `.train()`/`.eval()`, assigning a Parameter, a submodule or
a `__class__`), register_parameter / register_buffer / add_module / register_module, `_apply`
(`.to()`, `.half()`, `.cuda()`: buffers are swapped inside the module's dicts), and the container
methods that write `_modules` directly (ModuleList/Sequential insert and del, ModuleDict del and
clear). Not caught, as in Dynamo: writes straight into `module.__dict__`, `_parameters`,
`_buffers` or `_modules` from user code. In-place changes to tensors (`p.data = ...`,
`requires_grad_()`, `resize_()`) do not go through a module at all: guards keep checking tensor
metadata on every call.
"""
from __future__ import annotations

import functools
import threading
import weakref

import torch

from tracetorch import logs

log = logs.get_logger(__name__)

ANY = "*"   # a change that may affect every attribute of the module (dicts swapped, _apply, ...)
ITEMS = "[items]"   # depends on the module's submodules/parameters as a container (len, [i])
# setting one of these replaces where every other attribute lives
_STRUCTURAL = frozenset({"__class__", "__dict__", "_parameters", "_buffers", "_modules"})


class _Watched:
    """The listeners of one module: listener -> attribute names it depends on (ANY: all)."""
    __slots__ = ("ref", "listeners")

    def __init__(self, module):
        self.ref = weakref.ref(module, functools.partial(_forget, id(module)))
        self.listeners: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


_lock = threading.RLock()
_watched: dict[int, _Watched] = {}


def _forget(key, ref):
    with _lock:
        w = _watched.get(key)
        if w is not None and w.ref is ref:
            del _watched[key]


def watch(module: torch.nn.Module, listener, names) -> None:
    """Call `listener.on_module_mutation(module, name, change)` when one of `names` (attribute
    names; ANY for every one) of `module` changes. Listeners are held weakly."""
    _ensure_patched()
    _ensure_class_patched(type(module))
    with _lock:
        w = _watched.get(id(module))
        if w is None or w.ref() is not module:
            w = _watched[id(module)] = _Watched(module)
        have = w.listeners.get(listener)
        if have is None:
            w.listeners[listener] = set(names)
        else:
            have.update(names)


def unwatch_all(listener, modules) -> None:
    """Drop `listener` from the watch lists of `modules`."""
    with _lock:
        for m in modules:
            w = _watched.get(id(m))
            if w is not None and w.ref() is m:
                w.listeners.pop(listener, None)


def notify(module, name: str, change: str, items: bool = False) -> None:
    """`module`'s attribute `name` changed (ANY: possibly all of them); `change` says how;
    `items`: a submodule or parameter changed, so did the module seen as a container."""
    w = _watched.get(id(module))
    if w is None or w.ref() is not module:
        return
    if name in _STRUCTURAL:
        name = ANY
    with _lock:
        hit = [lst for lst, names in w.listeners.items()
               if name == ANY or name in names or ANY in names or (items and ITEMS in names)]
    for listener in hit:
        listener.on_module_mutation(module, name, change)


# ---------------------------------------------------------------------------------------------
# the patches (installed on first watch, never removed; a few hundred ns per module setattr)
# ---------------------------------------------------------------------------------------------
_patched = [False]


def _ensure_patched() -> None:
    if _patched[0]:
        return
    with _lock:
        if _patched[0]:
            return
        M = torch.nn.Module
        _wrap_setattr(M)
        _wrap(M, "register_parameter",
              lambda self, name, *a, **k: (self, name, f"parameter {name!r} registered", True))
        _wrap(M, "register_buffer",
              lambda self, name, *a, **k: (self, name, f"buffer {name!r} registered", True))
        _wrap(M, "add_module",
              lambda self, name, *a, **k: (self, name, f"submodule {name!r} registered", True))
        _wrap(M, "register_module",
              lambda self, name, *a, **k: (self, name, f"submodule {name!r} registered", True))
        _wrap(M, "_apply", lambda self, *a, **k: (
            self, ANY, "parameters and buffers converted in place by _apply (.to(), .half(), .cuda(), ...)"))
        for cls in (torch.nn.ModuleList, torch.nn.Sequential):
            _wrap(cls, "insert", lambda self, *a, **k: (self, ANY, "submodule inserted"))
            _wrap(cls, "__delitem__", lambda self, *a, **k: (self, ANY, "submodule deleted"))
        _wrap(torch.nn.ModuleDict, "__delitem__",
              lambda self, key, *a, **k: (self, ANY, f"submodule {key!r} deleted"))
        _wrap(torch.nn.ModuleDict, "clear", lambda self, *a, **k: (self, ANY, "submodules cleared"))
        _patched[0] = True
        log.debug("module_mutation_watch_installed")


def _is_item(module, name, value=None) -> bool:
    d = module.__dict__
    return (isinstance(value, (torch.nn.Module, torch.Tensor))
            or any(name in d.get(k, ()) for k in ("_modules", "_parameters", "_buffers")))


def _wrap_setattr(cls) -> None:
    if "__setattr__" in cls.__dict__:
        _wrap(cls, "__setattr__", lambda self, name, value, *a, **k: (
            self, name, f"attribute {name!r} set", _is_item(self, name, value)), before=True)
    if "__delattr__" in cls.__dict__:
        _wrap(cls, "__delattr__", lambda self, name, *a, **k: (
            self, name, f"attribute {name!r} deleted", _is_item(self, name)), before=True)


def _ensure_class_patched(cls) -> None:
    """A Module subclass with its own __setattr__/__delattr__ may not call nn.Module's: wrap its
    own too (Dynamo does this per class). A duplicate notification is harmless."""
    for klass in cls.__mro__:
        if klass is torch.nn.Module:
            return
        if klass.__dict__.get("_tracetorch_mutation_patched") is not klass:
            with _lock:
                if klass.__dict__.get("_tracetorch_mutation_patched") is not klass:
                    _wrap_setattr(klass)
                    klass._tracetorch_mutation_patched = klass


def _wrap(cls, method: str, describe, before: bool = False) -> None:
    """Replace cls.method by a wrapper that notifies watchers after running it, or `before`
    (setattr/delattr: their own message comes first, ahead of the register_parameter /
    add_module they call; listeners only mark themselves stale, they never re-read at once)."""
    original = cls.__dict__[method]

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        if before and _watched:
            notify(*describe(self, *args, **kwargs))
        out = original(self, *args, **kwargs)
        if not before and _watched:
            notify(*describe(self, *args, **kwargs))
        return out

    wrapper.__tracetorch_mutation_wrapper__ = original
    setattr(cls, method, wrapper)
