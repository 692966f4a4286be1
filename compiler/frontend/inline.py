"""Inlining calls to user functions, methods, closures, lambdas and nn.Module.forward.

The callee's bytecode is evaluated by a child Tracer that shares the caller's graph, guards
and side effects, with the arguments bound to its parameters. A graph break inside the
callee is not taken there: the Unsupported travels out (collecting the user stack) and the
root tracer breaks at its own CALL instruction, running the callee as a compiled function of
its own (capture.py).
"""
from __future__ import annotations

import inspect
import types

import torch
from tracetorch.compiler.frontend import dispatch, generators, model_outputs
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.builder import _CONSTANT_TYPES, _wrap_foreign
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.instructions import MAX_INLINE_DEPTH, ReturnValue, Tracer
from tracetorch.compiler.frontend.source import AttrSource, DefaultSource, GetItemSource, GlobalSource

from tracetorch import logs

log = logs.get_logger(__name__)


@dispatch.call_function.register(V.NNModuleVariable)
def call_module(tx, mv, args, kwargs):
    m = mv.value
    if (m._forward_hooks or m._forward_pre_hooks or getattr(m, "_backward_hooks", None)
            or torch.nn.modules.module._global_forward_hooks
            or torch.nn.modules.module._global_forward_pre_hooks):
        raise Unsupported(f"nn.Module {type(m).__name__} with hooks")
    call = type(m).__call__
    if call is not torch.nn.Module.__call__:
        if not isinstance(call, types.FunctionType):
            raise Unsupported(f"nn.Module {type(m).__name__} overrides __call__")
        # a Python __call__ (e.g. transformers' GradientCheckpointingLayer) is inlined; its
        # super().__call__ comes back to call_module_forward
        return inline_call(tx, V.UserFunctionVariable(call), [mv] + list(args), kwargs)
    return call_module_forward(tx, mv, args, kwargs)


def call_module_forward(tx, mv, args, kwargs):
    """nn.Module.__call__(m, *args, **kwargs) without hooks: forward inlined."""
    m = mv.value
    # hooks registered later must not be skipped by the compiled code
    src = mv.source.name()
    for hooks in ("_forward_hooks", "_forward_pre_hooks"):
        tx.output.add_guard(f"{src}.{hooks}", "LENGTH_CHECK", 0)
    forward = inspect.getattr_static(type(m), "forward", None)
    if "forward" in m.__dict__ or not isinstance(forward, types.FunctionType):
        raise Unsupported(f"nn.Module {type(m).__name__} with a non-Python forward")
    # sourced as L[...].forward.__func__ so that what the forward reaches (closure cells of a
    # decorator's wrapper, its module's globals) is guarded through that path
    fwd_source = AttrSource(AttrSource(mv.source, "forward"), "__func__")
    return inline_call(tx, V.UserFunctionVariable(forward, fwd_source), [mv] + list(args), kwargs,
                       callee=mv)


@dispatch.inline_call.default
def inline_call(tx, fn, args, kwargs, callee=None):
    if tx.depth >= MAX_INLINE_DEPTH:
        raise Unsupported("inlining too deep (recursion?)")
    if isinstance(fn, V.UserFunctionVariable):
        if model_outputs.is_init_of_new_output(fn.fn, args):
            return model_outputs.bind_generated_init(tx, args[0], args[1:], kwargs)
        if getattr(fn.fn, "_dynamo_marked_constant", False):
            return _constant_result(tx, fn.fn, args, kwargs)
        code = fn.fn.__code__
        f_globals = fn.fn.__globals__
        name = fn.fn.__qualname__
    else:
        code = fn.code
        f_globals = fn.globals
        name = fn.qualname
    if _is_stdlib(code.co_filename):
        raise Unsupported(f"call to {getattr(fn, 'fn', None) and fn.fn.__module__ + '.' or ''}{name} "
                          "(Python standard library code is not traced)")
    # generator functions and generator expressions: a lazy generator object (generators.py)
    generator = bool(code.co_flags & inspect.CO_GENERATOR)
    if generator and isinstance(callee, V.UserMethodVariable) \
            and isinstance(callee.obj, V.NNModuleVariable) \
            and generators.module_tree_method(getattr(fn, "fn", None)) \
            and generators.consumed_immediately(tx):
        return generators.call_module_tree(tx, callee.obj, fn.fn.__name__, args[1:], kwargs)
    if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        raise Unsupported(f"call to coroutine function {name}")
    symbolic_locals = bind_args(tx, fn, code, args, kwargs)
    cells = {}    # cellvars are made by the callee's own MAKE_CELL instructions
    for i, name_ in enumerate(code.co_freevars):
        cells[name_] = _free_var(tx, fn, i, name_)
    child = Tracer(tx.ctx, code, f_globals, symbolic_locals, cells, parent=tx, fn_name=name)
    child.callee = callee if callee is not None else fn
    if f_globals is not tx.ctx.root_globals:
        child.globals_source = _globals_source(fn, callee, f_globals) \
            or _module_globals_source(tx, f_globals)
    if generator:
        return generators.make_generator(tx, child, fn, args, kwargs, name)
    try:
        child.run()
    except ReturnValue as r:
        return r.value
    except Unsupported as e:
        e.user_stack.insert(0, child.user_frame())
        raise
    raise Unsupported("inlined function ended without return")


def _constant_result(tx, fn, args, kwargs):
    """A function marked as torch._dynamo.assume_constant_result does (the attribute
    `_dynamo_marked_constant`): called now on constant arguments, its result taken as a
    constant of the graph (no guard: the mark promises it does not change)."""
    if not all(a.is_constant() for a in list(args) + list(kwargs.values())):
        raise Unsupported(f"constant-result function {fn.__qualname__} on non-constant arguments")
    value = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    if value is not None and type(value) not in (bool, int, float, str):
        raise Unsupported(f"constant-result function {fn.__qualname__} returned a "
                          f"{type(value).__name__}")
    log.debug("assume_constant_result", function=fn.__qualname__, value=repr(value))
    return V.ConstantVariable(value)


_STDLIB = None


def _is_stdlib(filename: str) -> bool:
    global _STDLIB
    if _STDLIB is None:
        import os
        import sysconfig
        paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
        _STDLIB = tuple(os.path.realpath(p) + os.sep for p in paths)
    if filename.startswith("<frozen "):      # os, _collections_abc, ... (frozen modules)
        return True
    return filename.startswith(_STDLIB) and "site-packages" not in filename


def _globals_source(fn, callee, f_globals):
    """A source for the callee's module globals, so that reading them installs guards.
    torch's own modules are taken as fixed (no guards), like Dynamo does."""
    module = f_globals.get("__name__", "") or ""
    if module == "torch" or module.startswith("torch."):
        return None
    if isinstance(fn, V.UserFunctionVariable) and fn.source is not None:
        return AttrSource(fn.source, "__globals__")
    if isinstance(callee, V.NNModuleVariable):
        return AttrSource(AttrSource(callee.source, "forward"), "__globals__")
    if isinstance(callee, V.UserMethodVariable) and getattr(callee.obj, "source", None) is not None \
            and not callee.fn.__name__.startswith("__"):
        return AttrSource(AttrSource(callee.obj.source, callee.fn.__name__), "__globals__")
    return None


def _module_globals_source(tx, f_globals):
    """The globals of an imported module, for a callee no sourced value leads to (a method of
    an object made in the frame): as Dynamo does, the module is installed in the root frame's
    globals under a mangled name, so guards and generated code reach its globals as
    G['__import_pkg_dot_mod'].__dict__['NAME']."""
    import sys
    module_name = f_globals.get("__name__")
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    if module_name == "torch" or str(module_name).startswith("torch."):
        return None             # torch's own modules are taken as fixed (_globals_source)
    if module is None or getattr(module, "__dict__", None) is not f_globals:
        return None
    alias = "__import_" + module_name.replace(".", "_dot_")
    root = tx.ctx.root_globals
    if root.get(alias) is not module:
        root[alias] = module
        log.debug("install_module_global", alias=alias, module=module_name)
    return AttrSource(GlobalSource(alias), "__dict__")


def _free_var(tx, fn, i, name):
    if isinstance(fn, V.NestedFunctionVariable):
        cell = fn.closure[i]
        if not isinstance(cell, V.CellVariable):
            raise Unsupported(f"closure cell {name}")
        return cell
    real = fn.fn.__closure__[i]
    try:
        value = real.cell_contents
    except ValueError:
        raise Unsupported(f"closure variable {name!r} is empty") from None
    if fn.source is None:
        return _wrap_foreign(tx, value)
    src = AttrSource(GetItemSource(AttrSource(fn.source, "__closure__"), i), "cell_contents")
    return dispatch.wrap(tx, value, src)


def bind_args(tx, fn, code, args, kwargs) -> dict:
    """Bind Variables to the callee's parameters, like CPython does (defaults included)."""
    nargs = code.co_argcount
    nkw = code.co_kwonlyargcount
    names = code.co_varnames
    pos_names = names[:nargs]
    kw_names = names[nargs:nargs + nkw]
    i = nargs + nkw
    varargs = names[i] if code.co_flags & inspect.CO_VARARGS else None
    if varargs:
        i += 1
    varkw = names[i] if code.co_flags & inspect.CO_VARKEYWORDS else None
    defaults, kwdefaults = _defaults(tx, fn)
    out = {}
    for name, value in zip(pos_names, args):
        out[name] = value
    extra = list(args[nargs:])
    if extra:
        if not varargs:
            raise Unsupported(f"too many positional arguments for {code.co_name}")
    if varargs:
        out[varargs] = V.TupleVariable(extra)
    rest = {}
    for k, v in kwargs.items():
        if k in pos_names[code.co_posonlyargcount:] or k in kw_names:
            if k in out:
                raise Unsupported(f"multiple values for argument {k!r}")
            out[k] = v
        elif varkw:
            rest[k] = v
        else:
            raise Unsupported(f"unexpected keyword argument {k!r} for {code.co_name}")
    if varkw:
        out[varkw] = V.DictVariable(rest)
    first_default = nargs - len(defaults)
    for j, name in enumerate(pos_names):
        if name not in out:
            if j >= first_default:
                out[name] = defaults[j - first_default]
            else:
                raise Unsupported(f"missing argument {name!r} for {code.co_name}")
    for name in kw_names:
        if name not in out:
            if name in kwdefaults:
                out[name] = kwdefaults[name]
            else:
                raise Unsupported(f"missing keyword argument {name!r} for {code.co_name}")
    return out


def _defaults(tx, fn):
    if isinstance(fn, V.NestedFunctionVariable):
        if fn.defaults is None:
            d = []
        elif isinstance(fn.defaults, V.ConstantVariable):
            d = [V.ConstantVariable(v) for v in fn.defaults.value]
        else:
            d = list(fn.defaults.items)
        kd = dict(fn.kwdefaults.items) if fn.kwdefaults is not None else {}
        return d, kd
    real = fn.fn
    d, kd = [], {}
    for j, value in enumerate(real.__defaults__ or ()):
        if fn.source is not None:
            d.append(dispatch.wrap(tx, value, DefaultSource(fn.source, j)))
        else:
            d.append(_const_default(tx, value))
    for k, value in (real.__kwdefaults__ or {}).items():
        if fn.source is not None:
            kd[k] = dispatch.wrap(tx, value, DefaultSource(fn.source, 0, kw=k))
        else:
            kd[k] = _const_default(tx, value)
    return d, kd


def _const_default(tx, value):
    if type(value) in _CONSTANT_TYPES:
        return V.ConstantVariable(value)
    if type(value) is tuple and all(type(v) in _CONSTANT_TYPES for v in value):
        return V.TupleVariable([V.ConstantVariable(v) for v in value])
    return _wrap_foreign(tx, value)
