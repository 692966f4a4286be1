"""Extension points through which `debug` (or any plugin) attaches to the compiler.

The import direction is one way: `compiler` never imports `debug`. Instead `debug` declares a
`tracetorch.plugins` entry point (`debug = "tracetorch.debug.plugin:install"`); `load_plugins()` runs those
entry points once, and each plugin registers what it needs here:

- compiler wrappers: `register_compiler_wrapper(name, wrapper)`, where
  `wrapper(compile_fn, stage) -> compile_fn`. The frontend calls
  `wrap_compiler(user_backend, "frontend")` before compiling each captured graph, and our backend
  calls `wrap_compiler(inner_compile, "backend")` on the post-aot graph. The repro machinery
  (TRACE_REPRO_AFTER) lives in such a wrapper.
- explain listeners: `register_explain_listener(name, fn)`; `compiler.explain` calls
  `report_explain(report)` with its finished report so the debug folder can keep a copy.

With no plugin registered every call here is a cheap pass-through.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import threading
from typing import Any, Callable

from tracetorch import logs

log = logs.get_logger(__name__)

ENTRY_POINT_GROUP = "tracetorch.plugins"
# Used when tracetorch is run from a checkout (PYTHONPATH=.) without being pip-installed, so the
# entry point metadata does not exist: the module is imported by name only if it is importable.
_FALLBACK_PLUGINS = {"debug": "tracetorch.debug.plugin:install"}

STAGES = ("frontend", "backend")

# Config options (section.name) that only take effect through a plugin: when one is switched on
# and its plugin fails to load, that is an error, not a warning (the user asked for it).
_FEATURES_OF_PLUGIN = {"debug": (("debug.compile_debug", "TRACE_COMPILE_DEBUG=1"),
                                 ("repro.after", "TRACE_REPRO_AFTER"))}

_lock = threading.RLock()
_loaded = False
# Ordered name -> wrapper maps; registering an existing name replaces it (idempotent installs).
_compiler_wrappers: dict[str, Callable[[Callable, str], Callable]] = {}
_explain_listeners: dict[str, Callable[[Any], None]] = {}


def _run_install(name: str, target: str, load: Callable[[], Any]) -> None:
    try:
        install = load()
        install()
    except Exception as e:  # a broken plugin breaks compilation only if its feature was asked for
        error = f"{type(e).__name__}: {e}"
        log.warning("plugin_load_failed", plugin=name, target=target, error=error)
        wanted = _requested_features(name)
        if wanted:
            from tracetorch.compiler.errors import PluginLoadError
            raise PluginLoadError(
                f"{', '.join(wanted)} needs the tracetorch plugin '{name}' ({target}), which "
                f"failed to load: {error}. Reinstall tracetorch (pip install -e .) or unset "
                f"{' / '.join(w.split('=')[0] for w in wanted)}.") from e
        return
    log.debug("plugin_loaded", plugin=name, target=target)


def _requested_features(plugin: str) -> list[str]:
    """The switched-on options (as the user would spell them) that need `plugin`."""
    from tracetorch.compiler import config
    wanted = []
    for key, spelling in _FEATURES_OF_PLUGIN.get(plugin, ()):
        section, option = key.split(".")
        if getattr(getattr(config, section), option):
            wanted.append(spelling)
    return wanted


def _load_by_name(target: str) -> Callable[[], Any]:
    def load():
        module_name, _, attr = target.partition(":")
        module = importlib.import_module(module_name)
        return getattr(module, attr or "install")

    return load


def _missing(module_name: str) -> Callable[[], Any]:
    def load():
        raise ModuleNotFoundError(f"No module named {module_name!r}")
    return load


def _entry_points():
    try:
        return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # broken metadata of some unrelated distribution
        return ()


def load_plugins() -> None:
    """Run every `tracetorch.plugins` entry point, once per process (later calls are free)."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        _loaded = True  # set first: a plugin that compiles while installing must not recurse
        seen = set()
        for ep in _entry_points():
            if ep.name in seen:
                continue
            seen.add(ep.name)
            _run_install(ep.name, ep.value, ep.load)
        for name, target in _FALLBACK_PLUGINS.items():
            if name in seen:
                continue
            module_name = target.partition(":")[0]
            try:
                found = importlib.util.find_spec(module_name) is not None
            except (ImportError, ValueError):
                found = False
            if found:
                _run_install(name, target, _load_by_name(target))
            else:
                log.debug("plugin_not_found", plugin=name, target=target)
                if _requested_features(name):
                    _run_install(name, target, _missing(module_name))


def plugins_loaded() -> bool:
    return _loaded


def register_compiler_wrapper(name: str, wrapper: Callable[[Callable, str], Callable]) -> None:
    """`wrapper(compile_fn, stage) -> compile_fn`; applied by every `wrap_compiler` call."""
    with _lock:
        _compiler_wrappers[name] = wrapper


def unregister_compiler_wrapper(name: str) -> None:
    with _lock:
        _compiler_wrappers.pop(name, None)


def wrap_compiler(compile_fn: Callable, stage: str) -> Callable:
    """Return `compile_fn` wrapped by every registered wrapper for `stage` ("frontend"|"backend").

    compile_fn follows the backend contract `(gm, example_inputs) -> callable`.
    """
    if stage not in STAGES:
        raise ValueError(f"wrap_compiler: stage must be one of {STAGES}, got {stage!r}")
    load_plugins()
    if not _compiler_wrappers:
        return compile_fn
    with _lock:
        wrappers = list(_compiler_wrappers.items())
    for name, wrapper in wrappers:
        compile_fn = wrapper(compile_fn, stage)
    return compile_fn


def register_explain_listener(name: str, fn: Callable[[Any], None]) -> None:
    """`fn(report)` is called with every finished `compiler.explain` report."""
    with _lock:
        _explain_listeners[name] = fn


def unregister_explain_listener(name: str) -> None:
    with _lock:
        _explain_listeners.pop(name, None)


def report_explain(report: Any) -> None:
    """Called by `compiler.explain` with its report once it is complete."""
    load_plugins()
    for name, fn in list(_explain_listeners.items()):
        try:
            fn(report)
        except Exception as e:  # the report is already the user's; a listener failing must not hide it
            log.warning("explain_listener_failed", listener=name, error=f"{type(e).__name__}: {e}")


def _reset_for_tests() -> None:
    """Forget loaded plugins and registrations (tests only)."""
    global _loaded
    with _lock:
        _loaded = False
        _compiler_wrappers.clear()
        _explain_listeners.clear()
