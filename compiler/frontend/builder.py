"""Wrapping real values read from the frame into symbolic values, installing their guards.

Every value that enters the trace from outside (argument, global, closure cell, attribute of
a module or object) goes through `wrap`, which picks its Variable kind and records the guard
that makes the capture valid for it: TENSOR_MATCH for tensors, CONSTANT_MATCH for scalars,
ID_MATCH for modules / functions / classes, TYPE_MATCH + LENGTH_CHECK for containers.
"""
from __future__ import annotations

import builtins
import collections
import enum
import types

import torch
from tracetorch.compiler.frontend import dispatch, model_outputs, numpy_calls
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.dynamic import dynamic_scalar_value
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.source import (
    AttrSource,
    DictValueSource,
    GetItemSource,
    GlobalSource,
    is_torch_object,
)
from tracetorch.compiler.frontend.stdlib_calls import BUILTINS

_CONSTANT_TYPES = (bool, int, float, str, complex, type(None), bytes, torch.dtype,
                   torch.device, range, slice, type(Ellipsis), torch.memory_format, torch.layout)
_BUILTIN_FNS = {v for v in vars(builtins).values() if callable(v)}


@dispatch.wrap.default
def wrap(tx, value, source, guard: bool = True):
    """The Variable for `value` read from `source`, with its guards. Mutable objects (lists,
    dicts, modules, other objects) are wrapped once per capture, whatever path reaches them,
    so that a mutation traced through one path is seen through every other."""
    var = _wrap(tx, value, source, guard)
    if isinstance(var, (V.ListVariable, V.DictVariable, V.NNModuleVariable, V.UserObjectVariable)):
        memo = tx.ctx.wrap_memo
        known = memo.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        memo[id(value)] = (value, var)
    return var


def _wrap(tx, value, source, guard: bool = True):
    """The Variable kind for value: the first of _FIRST_RULES that applies, else the wrapper
    of its exact type (_BY_TYPE), else the first of _RULES that applies, else a plain object.
    A wrapper may return NOT_HANDLED to let the later rules decide."""
    for applies, wrapper in _FIRST_RULES:
        if applies(tx, value, source, guard):
            return wrapper(tx, value, source, guard)
    wrapper = _BY_TYPE.get(type(value))
    if wrapper is not None:
        out = wrapper(tx, value, source, guard)
        if out is not dispatch.NOT_HANDLED:
            return out
    for applies, wrapper in _RULES:
        if applies(tx, value, source, guard):
            return wrapper(tx, value, source, guard)
    return _wrap_object(tx, value, source, guard)


def _guard(tx, source, guard, kind, expected):
    if guard and source is not None:
        tx.output.add_guard(source, kind, expected)


def _items(tx, value, source, guard):
    return [wrap(tx, v, GetItemSource(source, i) if source else None, guard)
            for i, v in enumerate(value)]


# ---- rules before the exact-type table: kinds decided by isinstance, identity or the capture's
# state (a dynamic int is a graph input, not the CONSTANT_MATCH its type would give) ----------
def _wrap_tensor(tx, value, source, guard):
    if type(value) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported(f"tensor subclass {type(value).__name__}")
    if source is None:
        raise Unsupported("a tensor with no source (created outside the traced code)")
    return tx.output.add_input(value, source)


def _wrap_grad_ctor(tx, value, source, guard):
    _guard(tx, source, guard, "ID_MATCH", value)
    return V.TorchFunctionVariable(value, source)


def _wrap_ndarray(tx, value, source, guard):
    _guard(tx, source, guard, "TYPE_MATCH", type(value))
    return numpy_calls.wrap_ndarray(tx, value, source)


def _wrap_module(tx, value, source, guard):
    if source is None:
        raise Unsupported("an nn.Module with no source")
    _guard(tx, source, guard, "ID_MATCH", value)
    return V.NNModuleVariable(value, source)


def _wrap_by_identity(tx, value, source, guard):
    _guard(tx, source, guard, "ID_MATCH", value)
    return V.ConstantVariable(value, source)


def _dynamic(tx, source, guard):
    out = tx.output
    return out.dynamic_scalars and guard and source is not None \
        and source.name() in out.dynamic_scalars


def _wrap_dynamic_scalar(tx, value, source, guard):
    return tx.output.add_scalar_input(value, source)     # automatic dynamic (frontend/dynamic.py)


def _wrap_runtime_str(tx, value, source, guard):
    _guard(tx, source, guard, "TYPE_MATCH", str)   # a str left unspecialized after it changed
    return V.RuntimeStrVariable(value, source)


_FIRST_RULES = (
    (lambda tx, value, source, guard: isinstance(value, torch.Tensor), _wrap_tensor),
    (lambda tx, value, source, guard: any(value is c for c in _GRAD_CTORS), _wrap_grad_ctor),
    (lambda tx, value, source, guard: numpy_calls.is_ndarray(value) and source is not None
     and guard, _wrap_ndarray),
    (lambda tx, value, source, guard: isinstance(value, torch.nn.Module), _wrap_module),
    (lambda tx, value, source, guard: isinstance(value, enum.Enum), _wrap_by_identity),
    (lambda tx, value, source, guard: _dynamic(tx, source, guard)
     and dynamic_scalar_value(value), _wrap_dynamic_scalar),
    (lambda tx, value, source, guard: _dynamic(tx, source, guard) and type(value) is str,
     _wrap_runtime_str),
)


# ---- by exact type --------------------------------------------------------------------------
def _wrap_constant(tx, value, source, guard):
    _guard(tx, source, guard, "CONSTANT_MATCH", value)
    return V.ConstantVariable(value, source)


def _wrap_list(tx, value, source, guard):
    if source is not None and guard:
        _guard(tx, source, guard, "TYPE_MATCH", list)

        def materialize(value=value, source=source):
            tx.output.add_guard(source, "LENGTH_CHECK", len(value))
            return [wrap(tx, v, GetItemSource(source, i)) for i, v in enumerate(value)]
        return V.LazyListVariable(materialize, source, tx.ctx.side_effects.materialized)
    return _wrap_sequence(tx, value, source, guard)


def _wrap_sequence(tx, value, source, guard):
    _guard(tx, source, guard, "TYPE_MATCH", type(value))
    _guard(tx, source, guard, "LENGTH_CHECK", len(value))
    cls = V.TupleVariable if type(value) is tuple else V.ListVariable
    return cls(_items(tx, value, source, guard), source)


def _wrap_set(tx, value, source, guard):
    if not all(type(v) in _CONSTANT_TYPES for v in value):
        return dispatch.NOT_HANDLED
    # a copy: the guard must compare with the contents seen now, not the live set
    _guard(tx, source, guard, "CONSTANT_MATCH", set(value) if type(value) is set else value)
    if type(value) is frozenset:
        return V.ConstantVariable(value, source)
    return V.SetVariable(value, source)


def _wrap_dict(tx, value, source, guard):
    keys = list(value.keys())
    plain = all(isinstance(k, (str, int)) and type(k) in (str, int) for k in keys)
    if not plain and not all(_identity_key(k) for k in keys):
        raise Unsupported("dict with keys that are not str/int, types or typing forms")
    _guard(tx, source, guard, "TYPE_MATCH", type(value))
    if guard and source is not None:
        tx.output.add_guard(f"list({source.name()}.keys())", "CONSTANT_MATCH", keys)
    items = {k: wrap(tx, v, (GetItemSource(source, k) if plain else DictValueSource(source, i))
                     if source else None, guard)
             for i, (k, v) in enumerate(value.items())}
    return V.DictVariable(items, source, dict_cls=type(value))


_BY_TYPE = {
    **{t: _wrap_constant for t in _CONSTANT_TYPES},
    list: _wrap_list,
    tuple: _wrap_sequence,
    set: _wrap_set,
    frozenset: _wrap_set,
    dict: _wrap_dict,
    collections.OrderedDict: _wrap_dict,
    collections.Counter: _wrap_dict,
}


# ---- rules after the exact-type table, in order ---------------------------------------------
def _wrap_size(tx, value, source, guard):
    _guard(tx, source, guard, "TYPE_MATCH", torch.Size)
    return V.SizeVariable(_items(tx, value, source, guard), source)


def _wrap_namedtuple(tx, value, source, guard):
    _guard(tx, source, guard, "TYPE_MATCH", type(value))
    return V.NamedTupleVariable(_items(tx, value, source, guard), type(value), source)


def _id_guarded(kind):
    """A wrapper for values held as themselves (modules, library functions): guarded by id."""
    def wrap(tx, value, source, guard):
        _guard(tx, source, guard, "ID_MATCH", value)
        return kind(value, source)
    return wrap


_wrap_python_module = _id_guarded(V.PythonModuleVariable)
_wrap_numpy_function = _id_guarded(V.NumpyFunctionVariable)
_wrap_builtin = _id_guarded(V.BuiltinVariable)
_wrap_torch_callable = _id_guarded(V.TorchFunctionVariable)


def _wrap_function(tx, value, source, guard):
    if value.__closure__ and not value.__dict__ and source is not None and guard \
            and not is_torch_object(value):
        # a closure: guarded by its code and globals, its cells and defaults by their
        # contents when read (inline.py), so re-creating it each call does not recompile
        _guard(tx, source, guard, "TYPE_MATCH", types.FunctionType)
        tx.output.add_guard(f"{source.name()}.__code__", "ID_MATCH", value.__code__)
        tx.output.add_guard(f"{source.name()}.__globals__", "ID_MATCH", value.__globals__)
        var = V.UserFunctionVariable(value, source)
        var.by_code = True
        return var
    _guard(tx, source, guard, "ID_MATCH", value)
    if is_torch_object(value) and _is_torch_op_fn(value):
        return V.TorchFunctionVariable(value, source)
    return V.UserFunctionVariable(value, source)


def _wrap_method(tx, value, source, guard):
    self_var = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None, guard)
    return V.UserMethodVariable(value.__func__, self_var, source)


def _wrap_container_method(tx, value, source, guard):
    # a bound method of a list/dict passed in (e.g. `_LOG.append` on the stack across a
    # graph break): the method of the wrapped container, so a call is traced (an append
    # stays a side effect, with no length guard) instead of being an opaque call
    _guard(tx, source, guard, "TYPE_MATCH", type(value))
    tx.output.add_guard(f"{source.name()}.__name__", "CONSTANT_MATCH", value.__name__)
    self_var = wrap(tx, value.__self__, AttrSource(source, "__self__"))
    return V.MethodVariable(self_var, value.__name__)


_RULES = (
    (lambda tx, value, source, guard: isinstance(value, torch.Size), _wrap_size),
    (lambda tx, value, source, guard: isinstance(value, tuple) and hasattr(type(value), "_fields"),
     _wrap_namedtuple),
    (lambda tx, value, source, guard: isinstance(value, types.ModuleType), _wrap_python_module),
    (lambda tx, value, source, guard: isinstance(value, type), _wrap_by_identity),
    (lambda tx, value, source, guard: numpy_calls.is_numpy_callable(value), _wrap_numpy_function),
    (lambda tx, value, source, guard: callable(value) and _is_builtin(value), _wrap_builtin),
    (lambda tx, value, source, guard: callable(value) and is_torch_object(value)
     and not isinstance(value, types.FunctionType), _wrap_torch_callable),
    (lambda tx, value, source, guard: isinstance(value, types.FunctionType), _wrap_function),
    (lambda tx, value, source, guard: isinstance(value, types.MethodType)
     and isinstance(value.__func__, types.FunctionType), _wrap_method),
    (lambda tx, value, source, guard: isinstance(value, types.BuiltinMethodType)
     and source is not None and guard
     and type(getattr(value, "__self__", None)) in (list, dict, collections.OrderedDict),
     _wrap_container_method),
)


def _wrap_object(tx, value, source, guard):
    """Anything else: an object read through its source, guarded on its type."""
    if source is None:
        raise Unsupported(f"object of type {type(value).__name__} with no source")
    if guard and model_outputs.is_model_output_class(type(value)):
        return model_outputs.wrap_existing(tx, value, source)     # encoder_outputs passed in
    _guard(tx, source, guard, "TYPE_MATCH", type(value))
    return V.UserObjectVariable(value, source)


_GRAD_CTORS = {torch.no_grad, torch.enable_grad, torch.set_grad_enabled}


def _is_builtin(value):
    try:
        return value in _BUILTIN_FNS or value in BUILTINS or (
            getattr(value, "__module__", None) in ("_operator", "operator", "math")
            and isinstance(value, types.BuiltinFunctionType))
    except TypeError:
        return False


def _is_torch_op_fn(fn):
    """Python functions of torch that are plain tensor ops we may record as graph calls
    (torch.nn.functional.*, torch.functional.*); other torch Python functions are inlined."""
    mod = fn.__module__ or ""
    return mod in ("torch.nn.functional", "torch.functional", "torch._tensor")


def _identity_key(k):
    """A dict key compared by identity and fixed for the process: str/int/None, classes,
    typing's special forms (typing.Union, typing.Literal)."""
    return type(k) in (str, int, bool, type(None)) or isinstance(k, type) \
        or getattr(type(k), "__module__", None) == "typing"


def wrap_global(tx, name):
    """LOAD_GLOBAL: a global of the traced function's module (or a builtin)."""
    se = tx.ctx.side_effects
    if se.has_global(tx.f_globals, name):
        return se.load_global(tx.f_globals, name)
    key = (id(tx.f_globals), name)
    cache = tx.ctx.global_cache
    if key in cache:
        return cache[key]
    if name in tx.f_globals:
        value = tx.f_globals[name]
        if tx.f_globals is tx.ctx.root_globals:
            source = GlobalSource(name)
        elif getattr(tx, "globals_source", None) is not None:
            # a user function of another module, reached through a sourced value: its
            # globals are guarded like ours (L['self'].helper.__globals__['EPS'])
            source = GetItemSource(tx.globals_source, name)
        else:
            if not _safe_foreign(value):
                raise Unsupported(f"global {name!r} of another module (inlined function from "
                                  f"{tx.f_globals.get('__name__')})")
            source = None
        var = wrap(tx, value, source) if source is not None else _wrap_foreign(tx, value)
    elif hasattr(builtins, name):
        var = V.BuiltinVariable(getattr(builtins, name)) if callable(getattr(builtins, name)) \
            else V.ConstantVariable(getattr(builtins, name))
    else:
        raise Unsupported(f"name {name!r} is not defined")
    cache[key] = var
    return var


def _safe_foreign(value):
    return (isinstance(value, (types.ModuleType, type)) or callable(value)
            or type(value) in _CONSTANT_TYPES)


def _wrap_foreign(tx, value):
    """A global of another module, reached through an inlined function: modules, classes,
    functions and constants are taken as they are now (guarded through the function's id)."""
    if any(value is c for c in _GRAD_CTORS):
        return V.TorchFunctionVariable(value)
    if isinstance(value, types.ModuleType):
        return V.PythonModuleVariable(value)
    if type(value) in _CONSTANT_TYPES or isinstance(value, type):
        return V.ConstantVariable(value)
    if any(value is c for c in _GRAD_CTORS):
        return V.TorchFunctionVariable(value)
    if numpy_calls.is_numpy_callable(value):
        return V.NumpyFunctionVariable(value)
    if _is_builtin(value):
        return V.BuiltinVariable(value)
    if is_torch_object(value) and not isinstance(value, types.FunctionType):
        return V.TorchFunctionVariable(value)
    if isinstance(value, types.FunctionType):
        if is_torch_object(value) and _is_torch_op_fn(value):
            return V.TorchFunctionVariable(value)
        return V.UserFunctionVariable(value)
    raise Unsupported(f"global of type {type(value).__name__} from another module")
