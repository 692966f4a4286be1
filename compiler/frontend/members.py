"""Members found on a class (inspect.getattr_static): methods bound to the object, properties
run, static and class methods, plain class constants; and the guard that a pre-existing
object's class still holds the function read through it."""
from __future__ import annotations

import functools
import inspect
import types

from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported


def static_member(cls, name):
    try:
        return inspect.getattr_static(cls, name)
    except AttributeError:
        raise Unsupported(f"{cls.__name__} has no attribute {name}") from None


def function_member(tx, obj_var, cls, static):
    """A plain function, property, staticmethod or classmethod found on cls, or None."""
    if isinstance(static, types.FunctionType):
        return V.UserMethodVariable(static, obj_var)
    if type(static) is functools._lru_cache_wrapper and \
            isinstance(getattr(static, "__wrapped__", None), types.FunctionType):
        # a cached method (logger.warning_once): the wrapper bound to the object; its call is
        # traced through __wrapped__ (calls._call_cached_function), eager where it breaks;
        # its identity on the class is guarded by guard_class_function
        return V.PartialVariable(V.UserObjectVariable(static, None), [obj_var], {})
    if isinstance(static, property) and isinstance(static.fget, types.FunctionType):
        return dispatch.inline_call(tx, V.UserFunctionVariable(static.fget), [obj_var], {})
    if isinstance(static, staticmethod) and isinstance(static.__func__, types.FunctionType):
        return V.UserFunctionVariable(static.__func__)
    if isinstance(static, classmethod) and isinstance(static.__func__, types.FunctionType):
        return V.UserMethodVariable(static.__func__, V.ConstantVariable(cls))
    return None


def type_member(tx, obj_var, cls, name):
    static = static_member(cls, name)
    member = function_member(tx, obj_var, cls, static)
    if member is not None:
        return member
    if type(static) in (int, float, str, bool, type(None), tuple):
        return V.ConstantVariable(static)
    raise Unsupported(f"class attribute {name} of {cls.__name__}")


def guard_class_function(tx, obj_var, name, static):
    """A Python function found on the class of a pre-existing object (a module's method too) is
    read through the class each call: guard its identity, so replacing it (`Cls.method = f`,
    `Cls.__call__ = f`, or an instance attribute shadowing it) recompiles instead of running the
    old code. Under the stock attribute lookup the guard reads `obj.name.__func__`, which
    static_sources resolves once (the class attribute and the name's absence from the instance
    dict, fingerprinted); under a custom __getattribute__ it reads the class's attribute."""
    if not isinstance(static, (types.FunctionType, functools._lru_cache_wrapper)) \
            or not isinstance(obj_var, (V.UserObjectVariable, V.NNModuleVariable)) or obj_var.source is None:
        return
    src = obj_var.source.name()
    if type(obj_var.value).__getattribute__ is object.__getattribute__ and not name.startswith("__"):
        tx.output.add_guard(f"{src}.{name}.__func__", "ID_MATCH", static)
    else:
        tx.output.add_guard(f"type({src}).{name}", "ID_MATCH", static)
