"""Python builtins called in traced code (len, isinstance, range, zip, super, ...), and class
instantiation (`call_type`: cls(*args) for builtin types, namedtuples, exceptions, plain classes).

A builtin call goes through `call_builtin`, in this order:
  1. the handler registered for that very function object, `@dispatch.builtin(len)`, in the
     theme modules builtins_numbers.py (operator functions, abs, int/float of symbolic values),
     builtins_containers.py (len, range, list/dict/set/..., iter/next, map/zip/filter/
     enumerate, sum/min/max/sorted, any/all), builtins_objects.py (print, super, isinstance,
     type, callable, getattr/setattr/hasattr/delattr, object.__setattr__, ...) and
     stdlib_calls.py (functools.reduce). A handler either answers or returns NOT_HANDLED to
     pass the call on to the generic rules below (e.g. int(SymInt) is handled, int("3") is
     left to folding);
  2. the generic rules, tried in GENERIC_RULES order, each answering or NOT_HANDLED:
     a. exception classes: constructing an exception (exceptions.py);
     b. builtins pure on constants, all arguments constant: computed now (an exception they
        raise is raised in the traced code);
     c. functions of the math module: folded on constants, recorded on symbolic scalars;
     d. builtins pure on constants with some symbolic scalar argument (round(SymFloat, 2),
        str(SymInt)): the values are specialized (guarded) and the call retried from 1.
     Folding (b) comes before the math rule so a math function of constants is never
     recorded, and specialization (d) comes last so it happens only when nothing can trace
     the symbolic value;
  3. otherwise a graph break naming the builtin and its arguments.
"""
from __future__ import annotations

import abc
import contextlib
import functools
import inspect
import math
import sys
import types
import weakref

import torch
from tracetorch.compiler.frontend import (
    dispatch,
    exceptions,
    model_outputs,
    new_modules,
    stdlib_calls,
    symbolic,
)
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.dispatch import NOT_HANDLED
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.exceptions import reraise
from tracetorch.compiler.frontend.iterators import fold_result
from tracetorch.compiler.frontend.source import LocalSource

from tracetorch import logs

log = logs.get_logger(__name__)

# Builtins that are pure on constants: computed at trace time.
_PURE_ON_CONSTANTS = {abs, min, max, round, divmod, pow, int, float, bool, str, repr, sum,
                      sorted, any, all, chr, ord, hex, bin, oct, format, len}


def const_value(v):
    if not v.is_constant():
        raise Unsupported(f"set of non-constant {v!r}")
    return v.as_constant()


def consts(args):
    return all(a.is_constant() for a in args)


@dispatch.call_function.register(V.BuiltinVariable)
def _call_builtin_variable(tx, fn, args, kwargs):
    return call_builtin(tx, fn.fn, args, kwargs)


def call_builtin(tx, fn, args, kwargs):
    """fn(*args, **kwargs) for a builtin fn (the order is the module docstring's)."""
    handler = dispatch.BUILTINS.get(fn)
    if handler is not None:
        out = handler(tx, fn, args, kwargs)
        if out is not NOT_HANDLED:
            return out
    for rule in GENERIC_RULES:
        out = rule(tx, fn, args, kwargs)
        if out is not NOT_HANDLED:
            return out
    raise Unsupported(f"builtin {getattr(fn, '__name__', fn)}() on {list(args)!r}")


# ---- the generic rules (module docstring, step 2) --------------------------------------------
def _construct_exception(tx, fn, args, kwargs):
    if isinstance(fn, type) and issubclass(fn, BaseException):
        return exceptions.construct(tx, fn, args, kwargs)
    return NOT_HANDLED


def _fold_on_constants(tx, fn, args, kwargs):
    if fn in _PURE_ON_CONSTANTS and consts(args) and consts(kwargs.values()):
        try:
            return fold_result(fn(*[a.as_constant() for a in args],
                                  **{k: v.as_constant() for k, v in kwargs.items()}))
        except Exception as e:
            reraise(e, f"{fn.__name__}() raised {type(e).__name__}")
    return NOT_HANDLED


def _math_function(tx, fn, args, kwargs):
    if getattr(fn, "__module__", None) == "math" or fn in vars(math).values():
        if consts(args):
            return V.ConstantVariable(fn(*[a.as_constant() for a in args]))
        if all(a.is_constant() or isinstance(a, V.SymNodeVariable) for a in args):
            return symbolic.record(tx, fn, args)
    return NOT_HANDLED


def _specialize_symbolic(tx, fn, args, kwargs):
    if fn in _PURE_ON_CONSTANTS and any(isinstance(a, V.SymNodeVariable) for a in args) \
            and all(a.is_constant() or isinstance(a, V.SymNodeVariable) for a in args) \
            and consts(kwargs.values()):
        # e.g. round(SymFloat, 2), str(SymInt): Python needs the values (guarded), as Dynamo
        return call_builtin(tx, fn, [symbolic.specialize(tx, a) for a in args], kwargs)
    return NOT_HANDLED


GENERIC_RULES = (_construct_exception, _fold_on_constants, _math_function, _specialize_symbolic)


def make_super(tx, args):
    if len(args) == 2:
        cls = args[0].as_constant() if args[0].is_constant() else None
        if not isinstance(cls, type):
            raise Unsupported("super() with a non-class first argument")
        return V.SuperVariable(cls, args[1])
    if args:
        raise Unsupported("super() with one argument")
    # zero-argument form: the __class__ cell and the first argument of the calling function
    if "__class__" not in tx.cells and "__class__" in getattr(tx, "freevar_values", {}):
        tx.cells["__class__"] = dispatch.wrap(tx, tx.freevar_values["__class__"],
                                     LocalSource("__class__", is_cell=True))
    cell = tx.cells.get("__class__")
    cls = None
    if isinstance(cell, V.CellVariable):
        cls = cell.contents.as_constant() if cell.contents is not None and cell.contents.is_constant() else None
    elif cell is not None and cell.is_constant():
        cls = cell.as_constant()
    first = tx.code.co_varnames[0] if tx.code.co_argcount else None
    if first is not None and hasattr(tx, "_wrap_arg"):
        tx._wrap_arg(first)          # the root frame wraps its arguments lazily
    if not isinstance(cls, type) or first is None or first not in tx.locals:
        raise Unsupported("zero-argument super() outside a method")
    return V.SuperVariable(cls, tx.locals[first])



@dispatch.call_type.default
def call_type(tx, cls, args, kwargs):
    if cls in (int, float, bool, str, list, tuple, dict, range, enumerate, zip, reversed,
               slice, type, map, filter, set, frozenset):
        return call_builtin(tx, cls, args, kwargs)
    if cls is torch.Size:
        return V.SizeVariable(dispatch.unpack(tx, args[0]) if args else [])
    if cls in stdlib_calls.TYPES:
        return stdlib_calls.TYPES[cls](tx, args, kwargs)
    if cls in (torch.device, torch.dtype) and consts(args):
        return V.ConstantVariable(cls(*[a.as_constant() for a in args]))
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        defaults = getattr(cls, "_field_defaults", {}) or {}
        fields = list(args)
        for f in cls._fields[len(args):]:
            if f in kwargs:
                fields.append(kwargs[f])
            elif f in defaults and type(defaults[f]) in (int, float, bool, str, type(None)):
                fields.append(V.ConstantVariable(defaults[f]))
        if len(fields) != len(cls._fields) or set(kwargs) - set(cls._fields[len(args):]):
            raise Unsupported(f"namedtuple {cls.__name__} with missing or unknown fields")
        return V.NamedTupleVariable(fields, cls)
    if cls is weakref.ref and len(args) == 1 and not kwargs and _weakref_target_ok(args[0]):
        return V.WeakRefVariable(args[0])
    if cls is contextlib.nullcontext and not kwargs and (not args or is_none(args[0])):
        return V.GradModeVariable(None, contextlib.nullcontext)     # a no-op context
    if cls is functools.partial and args:
        return V.PartialVariable(args[0], args[1:], kwargs)
    np = sys.modules.get("numpy")
    if np is not None and issubclass(cls, np.generic) and consts(args) and consts(kwargs.values()) \
            and all(type(a.as_constant()) in (int, float, bool, str) or isinstance(a.as_constant(), np.generic)
                    for a in list(args) + list(kwargs.values())):
        # a numpy scalar of constants (np.float32(2.0)): an immutable value, folded now
        try:
            return V.ConstantVariable(cls(*[a.as_constant() for a in args],
                                          **{k: v.as_constant() for k, v in kwargs.items()}))
        except Exception as e:
            raise Unsupported(f"{cls.__name__}() raised {type(e).__name__}") from None
    if cls in _FOLDED_CLASSES and consts(args) and consts(kwargs.values()):
        # immutable descriptions of constants (torch.finfo(torch.float32)): built now
        try:
            value = cls(*[a.as_constant() for a in args],
                        **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:
            raise Unsupported(f"{cls.__name__}() raised {type(e).__name__}") from None
        log.debug("folded_constant_object", cls=cls.__qualname__)
        return V.ConstantVariable(value)
    if exceptions.exception_class(cls):
        return exceptions.construct(tx, cls, args, kwargs)
    if model_outputs.is_model_output_class(cls):
        return model_outputs.construct(tx, cls, args, kwargs)
    if new_modules.simple_module_class(cls):
        return new_modules.construct(tx, cls, args, kwargs)
    if new_modules.torch_module_class(cls):
        return new_modules.construct_torch(tx, cls, args, kwargs)
    if _plain_class(cls):
        obj = V.NewObjectVariable(cls)
        init = inspect.getattr_static(cls, "__init__", object.__init__)
        if isinstance(init, types.FunctionType):
            dispatch.inline_call(tx, V.UserFunctionVariable(init), [obj] + list(args), kwargs)
        elif args or kwargs:
            raise Unsupported(f"creating {cls.__qualname__} with arguments but no Python __init__")
        return obj
    raise Unsupported(f"creating an instance of {cls.__qualname__} (opaque object)")


# classes whose instances are immutable and depend only on constant arguments
_FOLDED_CLASSES = (torch.finfo, torch.iinfo)


def is_none(v):
    return isinstance(v, V.ConstantVariable) and v.value is None


def _weakref_target_ok(v):
    # only objects that exist before the graph runs (a source reaches them), so the referent
    # is the same object at runtime and stays alive as long as what holds it
    if isinstance(v, (V.NNModuleVariable, V.UserObjectVariable)):
        return v.source is not None
    if isinstance(v, V.TensorVariable):
        return v.source is not None and v.node.op == "placeholder"
    return False


def _plain_class(cls):
    """A class whose instances we can model as an attribute dict."""
    if not isinstance(cls, type) or cls.__module__ in ("builtins",) or issubclass(cls, torch.nn.Module):
        return False
    # abc.ABCMeta only adds isinstance/registration machinery (collections.abc.Sequence views)
    if type(cls) not in (type, abc.ABCMeta) or hasattr(cls, "__slots__") and cls.__slots__:
        return False
    for name, base_impl in (("__new__", object.__new__), ("__getattribute__", object.__getattribute__)):
        if getattr(cls, name) is not base_impl:
            return False
    # a Python __setattr__ (frozen dataclasses') is traced on each store (attributes.py)
    setter = inspect.getattr_static(cls, "__setattr__", object.__setattr__)
    if setter is not object.__setattr__ and not isinstance(setter, types.FunctionType):
        return False
    if hasattr(cls, "__getattr__") or issubclass(cls, BaseException) or issubclass(cls, torch.Tensor):
        return False
    return all(b.__module__ != "builtins" or b is object for b in cls.__mro__)


__all__ = ["call_builtin", "call_type", "consts", "const_value", "is_none", "make_super"]
