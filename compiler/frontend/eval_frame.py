"""The runtime around capture: the compiled wrapper, cache lookup, recompiles, the limit.

`compiled_function(fn, options)` returns a plain Python function with `fn`'s behaviour. Each call
walks the cache entries newest first and runs the first whose guard function accepts the
arguments (the hot path: a list walk and one generated guard call per entry). On a miss,
`_miss` explains why every entry failed (`recompiles`), applies automatic dynamic shapes, and
captures anew through `capture_frame`, passing itself as `make_compiled_callable` so resume
functions and callees are compiled lazily, on their first call, by this same machinery with
their own frame ids.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import time
import traceback
import types
import weakref
from typing import Callable

import torch
from tracetorch.compiler import hooks
from tracetorch.compiler.errors import BackendCompilerFailed, CompilerError, RecompileLimitError
from tracetorch.compiler.frontend import dynamic
from tracetorch.compiler.frontend.cache import CacheEntry, FrameCache, next_compile_id
from tracetorch.compiler.frontend.capture import capture_frame
from tracetorch.compiler.frontend.dynamic import DynamicDims
from tracetorch.compiler.frontend.guards import Guard, GuardSet, ambient_state, describe, frame_locals, render_guards

from tracetorch import logs

log = logs.get_logger(__name__)

_OUR_DIRS = (__file__.rsplit("/", 3)[0] + "/compiler/", logs.__file__.rsplit("/", 1)[0] + "/")


@dataclasses.dataclass(eq=False)
class CompileOptions:
    """What one `compiler.compile(...)` call asked for; shared by its resume functions/callees."""
    backend: Callable
    backend_name: str
    fullgraph: bool = False
    dynamic: bool | None = None
    config_overrides: dict | None = None
    listeners: list = dataclasses.field(default_factory=list)   # explain: on_compile(info)
    wrappers: "weakref.WeakKeyDictionary" = dataclasses.field(
        default_factory=weakref.WeakKeyDictionary)
    by_code: dict = dataclasses.field(default_factory=dict)      # (code, globals id) -> wrapper
    dynamic_state: dict = dataclasses.field(default_factory=dict)  # code -> DynamicDims

    def dynamic_dims_for(self, code):
        dims = self.dynamic_state.get(code)
        if dims is None:
            dims = self.dynamic_state[code] = DynamicDims(self.dynamic)
        return dims


def _capture_frame(*args, **kwargs):
    """Indirection so tests can stand in for capture before/without it."""
    return capture_frame(*args, **kwargs)


capture_impl = _capture_frame


_SUSPENDING = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
               | inspect.CO_ITERABLE_COROUTINE)


def compiled_function(fn, options: CompileOptions, nested: bool = False):
    """fn compiled lazily on call; bound methods keep their self; non-Python callables pass.

    nested: fn is a resume function or callee handed over by capture (make_compiled_callable).
    """
    if isinstance(fn, types.MethodType):
        return types.MethodType(compiled_function(fn.__func__, options, nested), fn.__self__)
    if not isinstance(fn, types.FunctionType):
        return fn
    inner = getattr(fn, "_tracetorch_cache", None)
    if inner is not None:          # already a compiled wrapper
        if inner.options is options:
            return fn
        fn = inner.fn              # compile the original under these options
    if fn.__code__.co_flags & _SUSPENDING:
        # Generators and coroutines suspend mid-frame; like Dynamo, run them as they are.
        log.debug("skip_frame", function=fn.__qualname__, reason="generator or coroutine function")
        return fn
    wrapper = options.wrappers.get(fn)
    if wrapper is not None:
        return wrapper
    # Function objects that differ only in identity (same code and globals, no closure, no
    # defaults: e.g. the resume function each capture creates for the same offset) share one
    # wrapper and cache, so their entries and recompiles count per code object, as in Dynamo.
    shareable = fn.__closure__ is None and not fn.__defaults__ and not fn.__kwdefaults__
    key = (fn.__code__, id(fn.__globals__))
    if shareable and key in options.by_code:
        options.wrappers[fn] = options.by_code[key]
        return options.by_code[key]

    cache = FrameCache(fn, options)
    cache.nested = nested
    fast = cache.fast
    miss = functools.partial(_miss, cache)

    def compiled(*args, **kwargs):
        for check, run in fast:
            if check(*args, **kwargs):
                return run(*args, **kwargs)
        return miss(args, kwargs)

    functools.update_wrapper(compiled, fn)
    compiled._tracetorch_cache = cache
    options.wrappers[fn] = compiled
    if shareable:
        options.by_code[key] = compiled
    return compiled


def _config_value(section: str, option: str, default):
    try:
        from tracetorch.compiler import config
        return getattr(getattr(config, section), option)
    except (ImportError, AttributeError):
        return default


# ---------------------------------------------------------------------------------------------
# cache miss
# ---------------------------------------------------------------------------------------------
def _miss(cache: FrameCache, args: tuple, kwargs: dict):
    fn = cache.fn
    if cache.run_eagerly or cache.compiling:
        return fn(*args, **kwargs)
    try:
        env = frame_locals(fn, args, kwargs, strict=True)
    except TypeError:
        return fn(*args, **kwargs)     # wrong arguments: let Python raise its own TypeError
    for e in list(cache.entries):
        # an entry whose fast check just found a module changed is stale now: its walking
        # check decides (and rebuilds the fast check when the guards still hold)
        if e.guard_set.stale and e.guard_set.check(*args, **kwargs):
            return e.run(*args, **kwargs)
    reasons: list[tuple[logs.CompileId, list[str]]] = []
    if cache.entries:
        verbose = logs.enabled("recompiles_verbose")    # then every failing guard, else the first
        reasons = [(e.compile_id, e.guard_set.failures(args, kwargs, first_only=not verbose))
                   for e in cache.entries]
        with _config_overrides(cache.options.config_overrides):   # options= counts here too
            limit = _config_value("frontend", "cache_size_limit", 8)
        if len(cache.entries) >= limit:
            return _limit_hit(cache, limit, reasons, args, kwargs)
    cid = next_compile_id(cache.code)
    with logs.compile_context(cid.frame_id, cid.frame_compile_id):   # [0/1] on the reasons too
        if reasons:
            _log_recompile(cache, reasons, logs.enabled("recompiles_verbose"))
            cache.dynamic.update(cache.entries, env, fn.__globals__, cache.name)
        entry = _compile(cache, args, kwargs, env, cid, reasons)
    return entry.run(*args, **kwargs)


def _reason_lines(reasons, verbose: bool) -> list[str]:
    lines = []
    for cid, rs in reasons:
        if not rs:
            rs = ["(no guard explains the miss: the fast check failed)"]
        if verbose:
            lines.append(f"guard {cid} failures:")
            lines += [f"    - {r}" + (f"  # guard from {r.location}" if getattr(r, "location", None) else "")
                      for r in rs]
        else:
            lines.append(f"- {cid}: {rs[0]}")
    return lines


def _log_recompile(cache: FrameCache, reasons, verbose: bool) -> None:
    header = f"Recompiling function {cache.name} in {cache.location}"
    logs.artifact("recompiles", lambda: "\n    ".join(
        [header, "triggered by the following guard failure(s):", *_reason_lines(reasons, False)]))
    logs.artifact("recompiles_verbose", lambda: "\n    ".join(
        [header, "triggered by the following guard failure(s):", *_reason_lines(reasons, True)]))
    logs.artifact("recompile", lambda: {
        "function": cache.name, "location": cache.location, "cache_size": len(cache.entries),
        "reasons": [{"compile_id": str(cid), "failures": [str(r) for r in rs],
                     "guard_locations": [getattr(r, "location", None) for r in rs]}
                    for cid, rs in reasons]})
    for cid, rs in reasons:
        for r in rs:
            logs.artifact("guard_failure", lambda cid=cid, r=r: {
                "function": cache.name, "cache_entry": str(cid), "reason": str(r),
                "guard_location": getattr(r, "location", None)})
    for listener in cache.options.listeners:
        listener.on_recompile(cache, reasons)


def _limit_hit(cache: FrameCache, limit: int, reasons, args, kwargs):
    last = reasons[0] if reasons else None
    last_text = f"{last[0]}: {last[1][0]}" if last and last[1] else "unknown"
    message = (f"tracetorch hit config.frontend.cache_size_limit ({limit})\n"
               f"   function: '{cache.name}' ({cache.location})\n"
               f"   last reason: {last_text}\n"
               f"To log all recompilation reasons, use TRACE_LOGS=\"recompiles\".\n"
               f"The function now runs eagerly (uncompiled) whenever no cache entry matches.")
    if cache.options.fullgraph:
        raise RecompileLimitError(message + "\nfullgraph=True forbids the eager fallback.")
    log.warning("cache_size_limit_hit", function=cache.name, location=cache.location,
                limit=limit, last_reason=last_text,
                hint='To log all recompilation reasons, use TRACE_LOGS="recompiles". '
                     "The function now runs eagerly whenever no cache entry matches.")
    cache.run_eagerly = True
    return cache.fn(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# one capture
# ---------------------------------------------------------------------------------------------
_plugins_loaded = [False]


def _load_plugins_once():
    if _plugins_loaded[0]:
        return
    _plugins_loaded[0] = True
    hooks.load_plugins()


def _user_stack() -> list[dict]:
    frames = []
    for fs in traceback.extract_stack()[:-2]:
        if fs.filename.startswith(_OUR_DIRS):
            continue
        frames.append({"line": fs.lineno, "name": fs.name, "filename": fs.filename,
                       "loc": (fs.line or "").strip()})
    return frames[-30:]


class _Timer:
    def __init__(self):
        self.backend_s = 0.0
        self.graphs = 0


def _frontend_backend(options: CompileOptions, timer: _Timer):
    """The user's backend, timed, wrapped by plugins (repro), with failures named."""
    inner = options.backend

    def timed(gm, example_inputs):
        t0 = time.perf_counter()
        try:
            return inner(gm, example_inputs)
        finally:
            timer.backend_s += time.perf_counter() - t0
            timer.graphs += 1

    timed.__wrapped__ = inner      # repro scripts find the user's backend through this
    wrapped = hooks.wrap_compiler(timed, "frontend")

    def backend(gm, example_inputs):
        try:
            return wrapped(gm, example_inputs)
        except CompilerError:
            raise
        except Exception as e:
            raise BackendCompilerFailed(options.backend_name, e) from e

    return backend


def _global_state_guards(guards: list[Guard]) -> list[Guard]:
    """Grad mode and default dtype are always guarded (Dynamo's ___check_global_state)."""
    kinds = {g.kind for g in guards}
    extra = []
    if "GRAD_MODE" not in kinds:
        extra.append(Guard("", "GRAD_MODE", torch.is_grad_enabled(), None))
    if "DEFAULT_DTYPE" not in kinds:
        extra.append(Guard("", "DEFAULT_DTYPE", torch.get_default_dtype(), None))
    if "AMBIENT" not in kinds:    # autocast, deterministic algorithms, inference mode
        extra.append(Guard("", "AMBIENT", ambient_state(), None))
    return extra + list(guards)


def _compile(cache: FrameCache, args, kwargs, env, cid, reasons) -> CacheEntry:
    options, fn = cache.options, cache.fn
    _load_plugins_once()
    start = time.time()
    t0 = time.perf_counter()
    logs.trace_record("dynamo_start", lambda: {"stack": _user_stack()})
    dims = cache.dynamic.for_capture(env)
    timer = _Timer()
    backend = _frontend_backend(options, timer)
    make = functools.partial(compiled_function, options=options, nested=True)
    cache.compiling = True
    fail = None
    try:
        with _config_overrides(options.config_overrides):
            result = capture_impl(fn, args, kwargs, compile_id=cid, backend=backend,
                                  fullgraph=options.fullgraph, dynamic_dims=dims,
                                  make_compiled_callable=make)
    except BaseException as e:
        fail = e
        if isinstance(e, CompilerError) or not isinstance(e, Exception) or not _suppress(options):
            raise
    finally:
        cache.compiling = False
        if fail is not None:
            _metrics(cache, cid, start, t0, timer, None, None, reasons, fail)
    if fail is not None:
        # frontend.suppress_errors: an internal capture failure costs speed, never the program
        log.warning("capture_failed_running_eagerly", function=cache.name, location=cache.location,
                    error=f"{type(fail).__name__}: {fail}")
        cache.run_eagerly = True
        return _EagerEntry(fn)
    graphs = list(getattr(result, "graphs", []) or [])
    breaks = list(getattr(result, "graph_breaks", []) or [])
    if not graphs and not breaks and not cache.entries and cache.nested \
            and not getattr(result.fn, "_tracetorch_routes_calls", False):
        # A resume function or callee with nothing to compile (no tensor operation, no break):
        # as Dynamo does, skip its code object from now on instead of guarding a no-op entry.
        # Running the original is exactly what the transformed code would do (unless it is
        # the frame rewritten to compile its callees: frontend/eager_calls.py).
        cache.run_eagerly = True
        cache.skipped = True
        log.debug("skip_frame", function=cache.name, location=cache.location,
                  reason="no tensor operations in the frame")
        _metrics(cache, cid, start, t0, timer, None, None, reasons, None)
        return _EagerEntry(fn)
    guards = _global_state_guards(result.guards)
    guard_set = GuardSet(guards, fn)
    entry = CacheEntry(cid, guard_set, result.fn, graphs, breaks)
    cache.add(entry)
    _log_guards(cache, guard_set)
    _metrics(cache, cid, start, t0, timer, entry, guard_set, reasons, None)
    for listener in options.listeners:
        listener.on_compile(cache, entry)
    return entry


def _suppress(options) -> bool:
    with _config_overrides(options.config_overrides):
        return bool(_config_value("frontend", "suppress_errors", False))


class _EagerEntry:
    def __init__(self, fn):
        self.run = fn


@contextlib.contextmanager
def _config_overrides(overrides):
    if not overrides:
        yield
        return
    from tracetorch.compiler import config
    with config.patch(**overrides):
        yield


def _log_guards(cache: FrameCache, gs: GuardSet) -> None:
    logs.artifact("guards", gs.render)
    logs.artifact("verbose_guards", lambda: gs.render() + "\n\nCompiled guard function:\n" + gs.source)
    logs.trace_record("dynamo_guards", None, lambda: [
        {"code": _describe(g), "kind": g.kind, "source": g.source, "user_location": g.user_location}
        for g in gs.guards])
    symbolic = [g for g in gs.guards if g.kind == "SYMBOLIC"]
    if symbolic:
        for g in symbolic:
            dynamic.log.info("symbolic_guard", function=cache.name, guard=_describe(g),
                             user_location=g.user_location)


def _describe(g: Guard) -> str:
    return describe(g)


def _metrics(cache, cid, start, t0, timer, entry, guard_set, reasons, fail) -> None:
    total = time.perf_counter() - t0
    graphs = entry.graphs if entry else []
    ops = sum(sum(1 for n in g.graph.nodes if n.op.startswith("call_")) for g in graphs)
    m = {
        "frame_key": str(cid.frame_id), "co_name": cache.name,
        "co_filename": cache.code.co_filename, "co_firstlineno": cache.code.co_firstlineno,
        "cache_size": len(cache.entries), "accumulated_cache_size": len(cache.entries),
        "guard_count": len(guard_set.guards) if guard_set else None,
        "shape_env_guard_count": sum(g.kind == "SYMBOLIC" for g in guard_set.guards) if guard_set else None,
        "graph_op_count": ops, "graph_node_count": sum(len(g.graph.nodes) for g in graphs),
        "graph_input_count": sum(sum(1 for n in g.graph.nodes if n.op == "placeholder") for g in graphs),
        "graph_count": len(graphs), "graph_break_count": len(entry.graph_breaks) if entry else 0,
        "start_time": start, "entire_frame_compile_time_s": round(total, 6),
        "backend_compile_time_s": round(timer.backend_s, 6),
        "frontend_time_s": round(total - timer.backend_s, 6),
        "fail_type": type(fail).__name__ if fail else None,
        "fail_reason": str(fail).split("\n")[0] if fail else None,
        "fail_user_frame_filename": getattr(fail, "filename", None),
        "fail_user_frame_lineno": getattr(fail, "lineno", None),
        "recompile_reason": "; ".join(f"{c}: {r[0]}" for c, r in reasons if r) or None,
        "has_guarded_code": entry is not None,
        "dynamo_config": None,
    }
    logs.artifact("compile_metrics", lambda: m)     # the trace carries it as compilation_metrics
    log.debug("frame_compiled" if fail is None else "frame_compile_failed", function=cache.name,
              compile_id=str(cid), graphs=m["graph_count"], graph_breaks=m["graph_break_count"],
              guards=m["guard_count"], time_s=m["entire_frame_compile_time_s"])


__all__ = ["CompileOptions", "compiled_function", "render_guards"]
