"""Python builtins (len, isinstance, range, zip, ...) and methods of symbolic values
(tensor methods, list/dict/tuple/str methods)."""
from __future__ import annotations

import abc
import contextlib
import functools
import inspect
import math
import operator
import sys
import types
import weakref

import torch
from tracetorch.compiler.frontend import (
    dispatch,
    exceptions,
    iterators,
    model_outputs,
    new_modules,
    numpy_calls,
    stdlib_calls,
    symbolic,
)
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.attributes import dict_subclass_read, generic_object_attr, plain_store
from tracetorch.compiler.frontend.data_ops import make_slice
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.exceptions import as_string, raise_new, reraise
from tracetorch.compiler.frontend.inline import call_module_forward
from tracetorch.compiler.frontend.iterators import fold_result, make_lazy
from tracetorch.compiler.frontend.source import LenSource, LocalSource
from tracetorch.compiler.frontend.symbolic import python_type

from tracetorch import logs

log = logs.get_logger(__name__)

_OPERATOR_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                    operator.truediv: "/", operator.floordiv: "//", operator.mod: "%",
                    operator.pow: "**", operator.matmul: "@", operator.and_: "&",
                    operator.or_: "|", operator.xor: "^", operator.iadd: "+=",
                    operator.imul: "*=", operator.isub: "-="}
_OPERATOR_COMPARE = {operator.lt: "<", operator.le: "<=", operator.eq: "==", operator.ne: "!=",
                     operator.gt: ">", operator.ge: ">=", operator.is_: "is",
                     operator.is_not: "is not"}
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
    if fn is print:
        raise Unsupported("print() (a side effect outside the graph)")
    if fn in _OPERATOR_BINARY and len(args) == 2:
        return dispatch.binary_op(tx, _OPERATOR_BINARY[fn], args[0], args[1])
    if fn in _OPERATOR_COMPARE and len(args) == 2:
        return dispatch.compare_op(tx, _OPERATOR_COMPARE[fn], args[0], args[1])
    if fn is operator.getitem:
        return dispatch.get_item(tx, args[0], args[1])
    if fn is operator.neg:
        return dispatch.unary_op(tx, "neg", args[0])
    if fn is operator.not_ or fn is operator.truth:
        t = dispatch.truthiness(tx, args[0])
        return V.ConstantVariable(not t if fn is operator.not_ else t)
    if fn is len:
        return _len(tx, args[0])
    if fn is super:
        return make_super(tx, args)
    if fn is isinstance:
        return V.ConstantVariable(_isinstance(args[0], args[1].as_constant()))
    if fn is issubclass and consts(args):
        return V.ConstantVariable(issubclass(*[a.as_constant() for a in args]))
    if fn is type and len(args) == 1:
        return V.ConstantVariable(python_type(args[0]))
    if fn is callable and len(args) == 1:
        return V.ConstantVariable(_callable(args[0]))
    if fn is range:
        args = [symbolic.specialize(tx, a) for a in args]
        if consts(args):
            return V.ConstantVariable(range(*[a.as_constant() for a in args]))
        raise Unsupported("range() with a symbolic bound")
    if fn in _LAZY_BUILTINS:
        return _LAZY_BUILTINS[fn](tx, args, kwargs)
    if isinstance(fn, type) and issubclass(fn, BaseException):
        return exceptions.construct(tx, fn, args, kwargs)
    if fn in (str, repr) and len(args) == 1 and isinstance(args[0], V.ExceptionVariable):
        text = as_string(args[0]) if fn is str else None
        if text is None:
            raise Unsupported(f"{fn.__name__}() of an exception")
        return V.ConstantVariable(text)
    if fn in stdlib_calls.BUILTINS:
        return stdlib_calls.BUILTINS[fn](tx, args, kwargs)
    if fn is reversed:
        return V.IteratorVariable(list(reversed(dispatch.unpack(tx, args[0]))))
    if fn is iter:
        return dispatch.get_iter(tx, args[0])
    if fn is next:
        if not iterators.is_iterator(args[0]):
            raise Unsupported(f"next() of {args[0]!r}")
        item = iterators.iter_next(tx, args[0])
        if item is not None:
            return item
        if len(args) > 1:
            return args[1]
        raise_new(StopIteration)
    if fn is list:
        return V.ListVariable(dispatch.unpack(tx, args[0]) if args else [])
    if fn is tuple:
        return V.TupleVariable(dispatch.unpack(tx, args[0]) if args else [])
    if fn is set:
        return V.SetVariable(const_value(i) for i in (dispatch.unpack(tx, args[0]) if args else []))
    if fn is frozenset:
        return V.ConstantVariable(frozenset(const_value(i) for i in (dispatch.unpack(tx, args[0]) if args else [])))
    if fn is dict:
        items = {}
        if args:
            src = args[0]
            if isinstance(src, V.DictVariable):
                items.update(src.items)
            else:
                for pair in dispatch.unpack(tx, src):
                    k, v = dispatch.unpack(tx, pair)
                    items[k.as_constant()] = v
        items.update(kwargs)
        return V.DictVariable(items)
    if fn is getattr:
        name = args[1].as_constant()
        if len(args) == 3:
            if not _hasattr(tx, args[0], name):
                return args[2]
        return dispatch.get_attr(tx, args[0], name)
    if fn is object.__setattr__ and len(args) == 3 and not kwargs and args[1].is_constant() \
            and isinstance(args[0], V.UserObjectVariable):
        plain_store(tx, args[0], args[1].as_constant(), args[2])
        return V.ConstantVariable(None)
    if fn is object.__getattribute__ and len(args) == 2 and not kwargs and args[1].is_constant():
        return generic_object_attr(tx, args[0], args[1].as_constant())
    if fn in (dict.get, dict.__getitem__, dict.__contains__) and args and not kwargs:
        return dict_subclass_read(tx, fn, args[0], args[1:])
    if fn is torch.nn.Module.__call__ and args and isinstance(args[0], V.NNModuleVariable):
        return call_module_forward(tx, args[0], args[1:], kwargs)
    if fn is hasattr:
        return V.ConstantVariable(_hasattr(tx, args[0], args[1].as_constant()))
    if fn is delattr and len(args) == 2 and args[1].is_constant() \
            and getattr(type(args[0]), "var_delattr", None) is not None:
        args[0].var_delattr(tx, args[1].as_constant())
        return V.ConstantVariable(None)
    if fn is setattr:
        dispatch.store_attr(tx, args[0], args[1].as_constant(), args[2])
        return V.ConstantVariable(None)
    if fn is slice:
        return make_slice(list(args))
    if fn is sum and not kwargs:
        items = dispatch.unpack(tx, args[0])
        total = args[1] if len(args) > 1 else V.ConstantVariable(0)
        for item in items:
            total = dispatch.binary_op(tx, "+", total, item)
        return total
    if fn in (min, max, sorted) and kwargs and set(kwargs) <= {"key", "default", "reverse"}:
        return _ordered_with_key(tx, fn, args, kwargs)
    if fn in (min, max) and not kwargs:
        items = dispatch.unpack(tx, args[0]) if len(args) == 1 else list(args)
        if consts(items) and items:
            return V.ConstantVariable(fn(a.as_constant() for a in items))
        if all(isinstance(a, V.SymNodeVariable) or a.is_constant() for a in items) and len(items) == 2:
            return symbolic.record(tx, torch.sym_max if fn is max else torch.sym_min, items)
        raise Unsupported(f"{fn.__name__}() over tensors (Python comparison of data)")
    if fn is abs and len(args) == 1 and isinstance(args[0], V.NDArrayVariable):
        return numpy_calls.operator_call(tx, "abs", [args[0]])
    if fn is abs and symbolic.graph_value(args[0]):
        return symbolic.record(tx, operator.abs, args)
    if fn in (int, float) and len(args) == 1 and isinstance(args[0], V.SymNodeVariable):
        # torch.sym_int / sym_float: int(SymFloat) would guard on the value (symbolic.specialize);
        # sym_int truncates symbolically, as Dynamo records it (plain int/float at runtime)
        if fn is int and args[0].python_type() is float:
            return symbolic.record(tx, torch.sym_int, args)
        if fn is float and args[0].python_type() is int:
            return symbolic.record(tx, torch.sym_float, args)
        if args[0].python_type() is fn:
            return args[0]
        return symbolic.record(tx, fn, args)
    if fn is sorted and len(args) == 1 and set(kwargs) <= {"reverse"}:
        items = dispatch.unpack(tx, args[0])
        if consts(items):
            rev = bool(kwargs["reverse"].as_constant()) if "reverse" in kwargs else False
            try:
                return V.ListVariable([V.ConstantVariable(v) for v in
                                       sorted((i.as_constant() for i in items), reverse=rev)])
            except TypeError:
                raise Unsupported("sorted() of values that do not compare") from None
    if fn in (any, all) and len(args) == 1:
        items = dispatch.unpack(tx, args[0])
        truths = [dispatch.truthiness(tx, i) for i in items]
        return V.ConstantVariable(fn(truths))
    if fn in _PURE_ON_CONSTANTS and consts(args) and consts(kwargs.values()):
        try:
            return fold_result(fn(*[a.as_constant() for a in args],
                                  **{k: v.as_constant() for k, v in kwargs.items()}))
        except Exception as e:
            reraise(e, f"{fn.__name__}() raised {type(e).__name__}")
    if getattr(fn, "__module__", None) == "math" or fn in vars(math).values():
        if consts(args):
            return V.ConstantVariable(fn(*[a.as_constant() for a in args]))
        if all(a.is_constant() or isinstance(a, V.SymNodeVariable) for a in args):
            return symbolic.record(tx, fn, args)
    if fn in _PURE_ON_CONSTANTS and any(isinstance(a, V.SymNodeVariable) for a in args) \
            and all(a.is_constant() or isinstance(a, V.SymNodeVariable) for a in args) \
            and consts(kwargs.values()):
        # e.g. round(SymFloat, 2), str(SymInt): Python needs the values (guarded), as Dynamo
        return call_builtin(tx, fn, [symbolic.specialize(tx, a) for a in args], kwargs)
    raise Unsupported(f"builtin {getattr(fn, '__name__', fn)}() on {list(args)!r}")


def _ordered_with_key(tx, fn, args, kwargs):
    """min/max/sorted with key= / default= / reverse=: the key function is called (traced) on
    each item in order, as CPython does; the keys must be constants to be compared now."""
    items = dispatch.unpack(tx, args[0]) if len(args) == 1 else list(args)
    key = kwargs.get("key")
    if key is not None and _is_none(key):
        key = None
    keys = [dispatch.call_function(tx, key, [i], {}) if key is not None else i for i in items]
    if not consts(keys):
        raise Unsupported(f"{fn.__name__}() with keys that are not constants")
    values = [k.as_constant() for k in keys]
    if fn is sorted:
        if "default" in kwargs:
            raise Unsupported("sorted() takes no default")
        rev = bool(kwargs["reverse"].as_constant()) if "reverse" in kwargs else False
        try:
            order = sorted(range(len(items)), key=values.__getitem__, reverse=rev)
        except TypeError:
            raise Unsupported("sorted() of keys that do not compare") from None
        return V.ListVariable([items[i] for i in order])
    if "reverse" in kwargs:
        raise Unsupported(f"{fn.__name__}() takes no reverse")
    if not items:
        if "default" in kwargs:
            return kwargs["default"]
        raise Unsupported(f"{fn.__name__}() of an empty sequence raises ValueError")
    try:
        pick = fn(range(len(items)), key=values.__getitem__)
    except TypeError:
        raise Unsupported(f"{fn.__name__}() of keys that do not compare") from None
    return items[pick]


def _lazy_map(tx, args, kwargs):
    if len(args) < 2 or kwargs:
        raise Unsupported("map() needs a function and at least one iterable")
    return make_lazy(tx, "map", args[0], args[1:])


def _lazy_zip(tx, args, kwargs):
    if set(kwargs) - {"strict"}:
        raise Unsupported(f"zip() with keywords {sorted(kwargs)}")
    strict = bool(kwargs["strict"].as_constant()) if "strict" in kwargs else False
    return make_lazy(tx, "zip", None, args, strict=strict)


def _lazy_filter(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        raise Unsupported("filter() takes a function (or None) and one iterable")
    fn = None if _is_none(args[0]) else args[0]
    return make_lazy(tx, "filter", fn, args[1:])


def _lazy_enumerate(tx, args, kwargs):
    start = args[1] if len(args) > 1 else kwargs.get("start", V.ConstantVariable(0))
    start = symbolic.specialize(tx, start)
    if not start.is_constant():
        raise Unsupported("enumerate() with a non-constant start")
    return make_lazy(tx, "enumerate", None, args[:1], start=start.as_constant())


# builtins whose result is a lazy iterator (iterators.py)
_LAZY_BUILTINS = {map: _lazy_map, zip: _lazy_zip, filter: _lazy_filter, enumerate: _lazy_enumerate}


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


def _callable(v):
    """callable(v): does v's type define __call__ (the type is guarded where v has a source)."""
    if v.is_constant():
        return callable(v.as_constant())
    if isinstance(v, (V.UserFunctionVariable, V.NestedFunctionVariable, V.UserMethodVariable,
                      V.MethodVariable, V.BuiltinVariable, V.TorchFunctionVariable,
                      V.PartialVariable, V.WeakRefVariable)):
        return True
    return any("__call__" in vars(k) for k in python_type(v).__mro__)


def _len(tx, v):
    hook = getattr(type(v), "var_len", None)
    if hook is not None:
        return hook(v, tx)
    if isinstance(v, (V.BaseListVariable,)):
        return V.ConstantVariable(len(v.items))
    if isinstance(v, (V.DictVariable, V.ModelOutputVariable)):
        return V.ConstantVariable(len(v.items))
    if isinstance(v, V.SetVariable):
        return V.ConstantVariable(len(v.values))
    if isinstance(v, V.DictViewVariable):
        return V.ConstantVariable(len(v.dict.items))
    if isinstance(v, V.TensorVariable):
        if v.example.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        n = v.example.shape[0]
        if isinstance(n, int):
            return V.ConstantVariable(n)
        return symbolic.record(tx, torch.ops.aten.sym_size.int, (v, V.ConstantVariable(0)))
    if isinstance(v, V.NNModuleVariable) and hasattr(v.value, "__len__"):
        return V.ConstantVariable(len(v.value))
    if isinstance(v, V.NDArrayVariable) and not v.scalar:
        return _len(tx, v.tensor)         # an array's len() is its first dim, as a tensor's
    if isinstance(v, V.RuntimeStrVariable):
        return tx.output.add_scalar_input(len(v.value), LenSource(v.source))
    if v.is_constant():
        return V.ConstantVariable(len(v.as_constant()))
    if isinstance(v, V.NewObjectVariable) and \
            isinstance(inspect.getattr_static(v.cls, "__len__", None), types.FunctionType):
        # an object made in the frame with a Python __len__: traced
        return dispatch.call_function(tx, dispatch.get_attr(tx, v, "__len__"), [], {})
    raise Unsupported(f"len() of {v!r}")




def _isinstance(v, classes):
    return isinstance_type(python_type(v), classes)


def isinstance_type(t, classes):
    return issubclass(t, classes)


def _hasattr(tx, v, name):
    hook = getattr(type(v), "var_hasattr", None)
    if hook is not None:
        return hook(v, tx, name)
    if isinstance(v, V.TensorVariable):
        if hasattr(torch.Tensor, name) or name in ("shape", "dtype", "device"):
            return True
        real = tx.output.real_input(v)
        if real is None:
            return False        # a tensor the graph computes has no instance attributes
        found = hasattr(real, name)
        expr = f"{'' if found else 'not '}hasattr({v.source.name()}, {name!r})"
        tx.output.add_guard(expr, "SYMBOLIC", expr)
        return found
    if isinstance(v, (V.NNModuleVariable, V.UserObjectVariable, V.PythonModuleVariable)):
        found = hasattr(v.value, name)
        if v.source is not None:     # the object may gain or lose the attribute later
            expr = f"{'' if found else 'not '}hasattr({v.source.name()}, {name!r})"
            tx.output.add_guard(expr, "SYMBOLIC", expr)
        return found
    if v.is_constant():
        return hasattr(v.as_constant(), name)
    if isinstance(v, V.ModelOutputVariable):
        return model_outputs.has_attr(v, name)
    if isinstance(v, (V.BaseListVariable, V.DictVariable, V.SetVariable, V.DictViewVariable,
                      V.LazyIteratorVariable, V.ListIteratorVariable, V.IteratorVariable)):
        return hasattr(v.python_type(), name)
    if isinstance(v, V.NewObjectVariable) and not isinstance(v, V.NewModuleVariable):
        # made in the frame from a plain class (no __getattr__): its attributes are known
        return name in v.attrs or hasattr(v.cls, name)
    raise Unsupported(f"hasattr on {v!r}")


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
    if cls is contextlib.nullcontext and not kwargs and (not args or _is_none(args[0])):
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


def _is_none(v):
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
    for name, base_impl in (("__new__", object.__new__), ("__setattr__", object.__setattr__),
                            ("__getattribute__", object.__getattribute__)):
        if getattr(cls, name) is not base_impl:
            return False
    if hasattr(cls, "__getattr__") or issubclass(cls, BaseException) or issubclass(cls, torch.Tensor):
        return False
    return all(b.__module__ != "builtins" or b is object for b in cls.__mro__)


__all__ = ["call_builtin", "call_type", "python_type"]
