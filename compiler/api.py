"""The public entry points: compile, explain, reset (DESIGN section 2)."""
from __future__ import annotations

import functools
import types

import torch

from tracetorch import logs
from tracetorch.compiler.backends import backend_name, lookup_backend
from tracetorch.compiler.errors import InvalidUsageError
from tracetorch.compiler.frontend import cache as _cache
from tracetorch.compiler.frontend.eval_frame import CompileOptions, compiled_function

log = logs.get_logger(__name__)

_builtin_compile = compile


# mode= names a set of config overrides, as torch.compile's modes do
MODES = {"default": {}, "reduce-overhead": {"backend.cudagraphs": True}}


def compile(fn_or_module=None, backend="default", fullgraph=False, dynamic=None, options=None,
            mode=None):
    """Compile a function or nn.Module; also usable as `@compile` and `@compile(fullgraph=True)`.
    mode="reduce-overhead" replays each compiled graph as a CUDA graph (backend.cudagraphs)."""
    if mode is not None:
        if mode not in MODES:
            raise InvalidUsageError(f"mode= must be one of {', '.join(map(repr, MODES))} or None, "
                                    f"got {mode!r}")
        options = {**MODES[mode], **(options or {})}
    opts = _make_options(backend, fullgraph, dynamic, options)
    if fn_or_module is None:
        return functools.partial(_compile_with, opts=opts, backend=backend)
    return _compile_with(fn_or_module, opts=opts, backend=backend)


def _make_options(backend, fullgraph, dynamic, options) -> CompileOptions:
    if not isinstance(fullgraph, bool):
        raise InvalidUsageError(f"fullgraph= must be True or False, got {fullgraph!r}")
    if dynamic not in (None, True, False):
        raise InvalidUsageError(f"dynamic= must be None (automatic), True or False, got {dynamic!r}")
    if options is not None:
        if not isinstance(options, dict):
            raise InvalidUsageError(
                "options= must be a dict of config overrides, e.g. "
                "{'frontend.cache_size_limit': 2}; got " + type(options).__name__)
        from tracetorch.compiler import config
        with config.patch(**options):   # validates names and values now, at the call site
            pass
    return CompileOptions(backend=lookup_backend(backend), backend_name=backend_name(backend),
                          fullgraph=fullgraph, dynamic=dynamic,
                          config_overrides=dict(options) if options else None)


def _compile_with(target, *, opts: CompileOptions, backend):
    if isinstance(target, torch.nn.Module):
        if isinstance(target, CompiledModule):      # recompiling: start from the original
            target = target._orig_mod
        return CompiledModule(target, opts)
    if _is_optimizer_step(target):
        step = _compile_optimizer_step(target, backend, opts.config_overrides)
        if step is not None:
            return step
    if isinstance(target, (types.FunctionType, types.MethodType)):
        out = compiled_function(target, opts)
        log.debug("compile_requested", function=getattr(target, "__qualname__", repr(target)),
                  backend=opts.backend_name, fullgraph=opts.fullgraph, dynamic=opts.dynamic)
        return out
    if isinstance(target, functools.partial):
        return functools.partial(_compile_with(target.func, opts=opts, backend=backend),
                                 *target.args, **target.keywords)
    if isinstance(target, type) or not callable(target):
        raise InvalidUsageError(
            f"compiler.compile expects a function, a method or a torch.nn.Module instance, "
            f"got {type(target).__name__}: {_short(target)}. "
            + ("Pass an instance of the class, not the class itself." if isinstance(target, type)
               else "It is not callable."))
    call = getattr(type(target), "__call__", None)
    if isinstance(call, types.FunctionType):
        # A callable object written in Python: compile its __call__ with the object as self.
        return types.MethodType(compiled_function(call, opts), target)

    # A C function (torch.sin, ...): compile a Python frame that calls it.
    def call_builtin(*args, **kwargs):
        return target(*args, **kwargs)

    functools.update_wrapper(call_builtin, target, assigned=("__name__", "__doc__"), updated=())
    return compiled_function(call_builtin, opts)


class CompiledModule(torch.nn.Module):
    """What compile(module) returns (like PyTorch's OptimizedModule).

    Calling it runs the module's forward compiled, with the module as `self` (so guards see
    L['self'] and its training flag, parameters and submodules); the module's own forward
    pre/post hooks run eagerly around it. Attributes, train()/eval(),
    parameters() and state_dict() reach the original module; state_dict keys carry no prefix,
    so a state dict moves freely between the compiled and the original module.
    """

    def __init__(self, mod: torch.nn.Module, opts: CompileOptions):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compile_options"] = opts
        forward = mod.__dict__.get("forward")          # an instance-level forward wins
        if forward is not None:
            self.__dict__["_compiled_forward"] = compiled_function(forward, opts)
        else:
            self.__dict__["_compiled_forward"] = types.MethodType(
                compiled_function(type(mod).forward, opts), mod)

    def forward(self, *args, **kwargs):
        mod = self._modules["_orig_mod"]
        if mod._forward_pre_hooks or mod._forward_hooks:
            return self._forward_with_hooks(mod, args, kwargs)
        return self._compiled_forward(*args, **kwargs)

    def _forward_with_hooks(self, mod, args, kwargs):
        """The module's own forward hooks run eagerly around the compiled forward, in the order
        and with the argument rules of nn.Module.__call__."""
        for hid, hook in list(mod._forward_pre_hooks.items()):
            if hid in mod._forward_pre_hooks_with_kwargs:
                res = hook(mod, args, kwargs)
                if res is not None:
                    args, kwargs = res
            else:
                res = hook(mod, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        out = self._compiled_forward(*args, **kwargs)
        for hid, hook in list(mod._forward_hooks.items()):
            if hid in mod._forward_hooks_with_kwargs:
                res = hook(mod, args, kwargs, out)
            else:
                res = hook(mod, args, out)
            if res is not None:
                out = res
        return out

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    # container modules (Sequential, ModuleList, ...): dunders skip __getattr__
    def __getitem__(self, idx):
        return self._orig_mod[idx]

    def __len__(self):
        return len(self._orig_mod)

    def __iter__(self):
        return iter(self._orig_mod)

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        return self._orig_mod.named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        return self._orig_mod.named_buffers(*args, **kwargs)

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"


def _is_optimizer_step(target) -> bool:
    return (isinstance(target, types.MethodType)
            and isinstance(target.__self__, torch.optim.Optimizer)
            and getattr(target.__func__, "__name__", "") == "step")


def _compile_optimizer_step(step, backend, options=None):
    try:
        from tracetorch.compiler.optim import compile_optimizer_step
    except ImportError as e:
        log.debug("optimizer_step_generic_path", reason=f"compiler.optim unavailable: {e}")
        return None
    log.debug("optimizer_step_dispatch", optimizer=type(step.__self__).__name__)
    return compile_optimizer_step(step, backend=backend, options=options)


def _short(v, n=80):
    r = repr(v)
    return r if len(r) <= n else r[:n - 3] + "..."


def explain(fn, *extra_args, **extra_kwargs):
    """`explain(fn)(*args, **kwargs)` -> ExplainReport (graphs, breaks with file:line, guards...)."""
    from tracetorch.compiler.frontend.explain import explain as _explain
    return _explain(fn, *extra_args, **extra_kwargs)


def reset() -> None:
    """Forget every cache entry, compile id and dynamic-shape decision."""
    _cache.reset()
