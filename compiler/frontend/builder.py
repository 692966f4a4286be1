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
    out = tx.output

    def g(kind, expected):
        if guard and source is not None:
            out.add_guard(source, kind, expected)

    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise Unsupported(f"tensor subclass {type(value).__name__}")
        if source is None:
            raise Unsupported("a tensor with no source (created outside the traced code)")
        return out.add_input(value, source)
    if any(value is c for c in _GRAD_CTORS):
        g("ID_MATCH", value)
        return V.TorchFunctionVariable(value, source)
    if numpy_calls.is_ndarray(value) and source is not None and guard:
        g("TYPE_MATCH", type(value))
        return numpy_calls.wrap_ndarray(tx, value, source)
    if isinstance(value, torch.nn.Module):
        if source is None:
            raise Unsupported("an nn.Module with no source")
        g("ID_MATCH", value)
        return V.NNModuleVariable(value, source)
    if isinstance(value, enum.Enum):
        g("ID_MATCH", value)
        return V.ConstantVariable(value, source)
    if out.dynamic_scalars and guard and source is not None and dynamic_scalar_value(value) \
            and source.name() in out.dynamic_scalars:
        return out.add_scalar_input(value, source)     # automatic dynamic (frontend/dynamic.py)
    if out.dynamic_scalars and guard and source is not None and type(value) is str \
            and source.name() in out.dynamic_scalars:
        g("TYPE_MATCH", str)          # a str left unspecialized after its value changed
        return V.RuntimeStrVariable(value, source)
    if isinstance(value, _CONSTANT_TYPES) and type(value) in _CONSTANT_TYPES:
        g("CONSTANT_MATCH", value)
        return V.ConstantVariable(value, source)
    if isinstance(value, torch.Size):
        g("TYPE_MATCH", torch.Size)
        items = [wrap(tx, v, GetItemSource(source, i) if source else None, guard)
                 for i, v in enumerate(value)]
        return V.SizeVariable(items, source)
    if type(value) is list and source is not None and guard:
        g("TYPE_MATCH", list)

        def materialize(value=value, source=source):
            out.add_guard(source, "LENGTH_CHECK", len(value))
            return [wrap(tx, v, GetItemSource(source, i)) for i, v in enumerate(value)]
        return V.LazyListVariable(materialize, source, tx.ctx.side_effects.materialized)
    if type(value) in (tuple, list):
        g("TYPE_MATCH", type(value))
        g("LENGTH_CHECK", len(value))
        items = [wrap(tx, v, GetItemSource(source, i) if source else None, guard)
                 for i, v in enumerate(value)]
        cls = V.TupleVariable if type(value) is tuple else V.ListVariable
        return cls(items, source)
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        g("TYPE_MATCH", type(value))
        items = [wrap(tx, v, GetItemSource(source, i) if source else None, guard)
                 for i, v in enumerate(value)]
        return V.NamedTupleVariable(items, type(value), source)
    if type(value) in (set, frozenset) and all(type(v) in _CONSTANT_TYPES for v in value):
        # a copy: the guard must compare with the contents seen now, not the live set
        g("CONSTANT_MATCH", set(value) if type(value) is set else value)
        if type(value) is frozenset:
            return V.ConstantVariable(value, source)
        return V.SetVariable(value, source)
    if type(value) in (dict, collections.OrderedDict):
        keys = list(value.keys())
        plain = all(isinstance(k, (str, int)) and type(k) in (str, int) for k in keys)
        if not plain and not all(_identity_key(k) for k in keys):
            raise Unsupported("dict with keys that are not str/int, types or typing forms")
        g("TYPE_MATCH", type(value))
        if guard and source is not None:
            out.add_guard(f"list({source.name()}.keys())", "CONSTANT_MATCH", keys)
        items = {k: wrap(tx, v, (GetItemSource(source, k) if plain else DictValueSource(source, i))
                         if source else None, guard)
                 for i, (k, v) in enumerate(value.items())}
        return V.DictVariable(items, source, dict_cls=type(value))
    if isinstance(value, types.ModuleType):
        g("ID_MATCH", value)
        return V.PythonModuleVariable(value, source)
    if isinstance(value, type):
        g("ID_MATCH", value)
        return V.ConstantVariable(value, source)
    if numpy_calls.is_numpy_callable(value):
        g("ID_MATCH", value)
        return V.NumpyFunctionVariable(value, source)
    if callable(value) and _is_builtin(value):
        g("ID_MATCH", value)
        return V.BuiltinVariable(value, source)
    if callable(value) and is_torch_object(value) and not isinstance(value, types.FunctionType):
        g("ID_MATCH", value)
        return V.TorchFunctionVariable(value, source)
    if isinstance(value, types.FunctionType):
        if value.__closure__ and not value.__dict__ and source is not None and guard \
                and not is_torch_object(value):
            # a closure: guarded by its code and globals, its cells and defaults by their
            # contents when read (inline.py), so re-creating it each call does not recompile
            g("TYPE_MATCH", types.FunctionType)
            out.add_guard(f"{source.name()}.__code__", "ID_MATCH", value.__code__)
            out.add_guard(f"{source.name()}.__globals__", "ID_MATCH", value.__globals__)
            var = V.UserFunctionVariable(value, source)
            var.by_code = True
            return var
        g("ID_MATCH", value)
        if is_torch_object(value) and _is_torch_op_fn(value):
            return V.TorchFunctionVariable(value, source)
        return V.UserFunctionVariable(value, source)
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        self_var = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None, guard)
        return V.UserMethodVariable(value.__func__, self_var, source)
    if isinstance(value, types.BuiltinMethodType) and source is not None and guard \
            and type(getattr(value, "__self__", None)) in (list, dict, collections.OrderedDict):
        # a bound method of a list/dict passed in (e.g. `_LOG.append` on the stack across a
        # graph break): the method of the wrapped container, so a call is traced (an append
        # stays a side effect, with no length guard) instead of being an opaque call
        g("TYPE_MATCH", type(value))
        out.add_guard(f"{source.name()}.__name__", "CONSTANT_MATCH", value.__name__)
        self_var = wrap(tx, value.__self__, AttrSource(source, "__self__"))
        return V.MethodVariable(self_var, value.__name__)
    if source is None:
        raise Unsupported(f"object of type {type(value).__name__} with no source")
    if guard and model_outputs.is_model_output_class(type(value)):
        return model_outputs.wrap_existing(tx, value, source)     # encoder_outputs passed in
    g("TYPE_MATCH", type(value))
    return V.UserObjectVariable(value, source)


_GRAD_CTORS = {torch.no_grad, torch.enable_grad, torch.set_grad_enabled}


def _is_builtin(value):
    try:
        return value in _BUILTIN_FNS or value in BUILTINS or (getattr(value, "__module__", None) in ("_operator", "operator", "math")
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
