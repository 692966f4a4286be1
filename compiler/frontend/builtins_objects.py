"""Builtins about objects and types: print (a break), super, isinstance/issubclass/type/callable,
getattr/setattr/hasattr/delattr (hasattr is a table by the operand's kind, dispatch.has_attr),
object.__setattr__/__getattribute__, dict's unbound read methods, nn.Module.__call__, and
str()/repr() of an exception. Registered into dispatch.BUILTINS; NOT_HANDLED leaves a call to
builtin_calls' generic rules."""
from __future__ import annotations

import inspect
import types

import torch
from tracetorch.compiler.frontend import dispatch, model_outputs
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.attributes import (
    dict_subclass_read,
    generic_object_attr,
    new_object_store,
    plain_delete,
    plain_store,
)
from tracetorch.compiler.frontend.builtin_calls import consts, make_super
from tracetorch.compiler.frontend.dispatch import NOT_HANDLED
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.exceptions import as_string
from tracetorch.compiler.frontend.inline import call_module_forward
from tracetorch.compiler.frontend.members import guard_class_function
from tracetorch.compiler.frontend.symbolic import python_type


@dispatch.builtin(print)
def _print(tx, fn, args, kwargs):
    raise Unsupported("print() (a side effect outside the graph)")


@dispatch.builtin(hash)
def _hash(tx, fn, args, kwargs):
    """hash(): a class's own Python __hash__ (a dataclass's hashes its fields' tuple) traced;
    constants hashed now (a str's hash is fixed for the process, as the compiled code is)."""
    if len(args) != 1 or kwargs:
        return NOT_HANDLED
    v = args[0]
    if v.is_constant():
        try:
            return V.ConstantVariable(hash(v.as_constant()))
        except TypeError:
            return NOT_HANDLED
    if isinstance(v, (V.NewObjectVariable, V.UserObjectVariable)) and not isinstance(v, V.NewModuleVariable):
        method = inspect.getattr_static(python_type(v), "__hash__", None)
        if isinstance(method, types.FunctionType):
            return dispatch.call_function(tx, V.UserFunctionVariable(method), [v], {})
    return NOT_HANDLED


# objects held as constants whose identity is the point (a class, a function, a module): their
# id() is the same on every call for as long as the guards that produced them hold
_IDENTITY_CONSTANTS = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType,
                       types.MethodType)


@dispatch.builtin(id)
def _id(tx, fn, args, kwargs):
    """id() of an object that existed before the call, reached through a source: an ID_MATCH
    guard keeps it the very same object, so its id is a constant of the compiled code (as in
    Dynamo). Objects made while tracing (and tensors) have no id yet: a graph break."""
    if len(args) != 1 or kwargs:
        return NOT_HANDLED
    v = args[0]
    if isinstance(v, (V.NNModuleVariable, V.UserObjectVariable)) and v.source is not None:
        tx.output.add_guard(v.source, "ID_MATCH", v.value)
        return V.ConstantVariable(id(v.value))
    if v.is_constant() and isinstance(v.as_constant(), _IDENTITY_CONSTANTS):
        return V.ConstantVariable(id(v.as_constant()))
    return NOT_HANDLED


@dispatch.builtin(super)
def _super(tx, fn, args, kwargs):
    return make_super(tx, args)


# ---- types ----------------------------------------------------------------------------------
def isinstance_type(t, classes):
    return issubclass(t, classes)


@dispatch.builtin(isinstance)
def _isinstance(tx, fn, args, kwargs):
    return V.ConstantVariable(isinstance_type(python_type(args[0]), args[1].as_constant()))


@dispatch.builtin(issubclass)
def _issubclass(tx, fn, args, kwargs):
    if not consts(args):
        return NOT_HANDLED
    return V.ConstantVariable(issubclass(*[a.as_constant() for a in args]))


@dispatch.builtin(type)
def _type(tx, fn, args, kwargs):
    if len(args) != 1:
        return NOT_HANDLED
    return V.ConstantVariable(python_type(args[0]))


@dispatch.builtin(callable)
def _callable_builtin(tx, fn, args, kwargs):
    if len(args) != 1:
        return NOT_HANDLED
    return V.ConstantVariable(_callable(args[0]))


def _callable(v):
    """callable(v): does v's type define __call__ (the type is guarded where v has a source)."""
    if v.is_constant():
        return callable(v.as_constant())
    if isinstance(v, (V.UserFunctionVariable, V.NestedFunctionVariable, V.UserMethodVariable,
                      V.MethodVariable, V.BuiltinVariable, V.TorchFunctionVariable,
                      V.PartialVariable, V.WeakRefVariable)):
        return True
    return any("__call__" in vars(k) for k in python_type(v).__mro__)


@dispatch.builtin(str, repr)
def _str_of_exception(tx, fn, args, kwargs):
    if len(args) != 1 or not isinstance(args[0], V.ExceptionVariable):
        return NOT_HANDLED         # str()/repr() of constants: folded by the generic rules
    text = as_string(args[0]) if fn is str else None
    if text is None:
        raise Unsupported(f"{fn.__name__}() of an exception")
    return V.ConstantVariable(text)


# ---- attributes -----------------------------------------------------------------------------
@dispatch.builtin(getattr)
def _getattr(tx, fn, args, kwargs):
    name = args[1].as_constant()
    if len(args) == 3 and not dispatch.has_attr(tx, args[0], name):
        return args[2]
    return dispatch.get_attr(tx, args[0], name)


@dispatch.builtin(setattr)
def _setattr(tx, fn, args, kwargs):
    dispatch.store_attr(tx, args[0], args[1].as_constant(), args[2])
    return V.ConstantVariable(None)


@dispatch.builtin(hasattr)
def _hasattr_builtin(tx, fn, args, kwargs):
    return V.ConstantVariable(dispatch.has_attr(tx, args[0], args[1].as_constant()))


@dispatch.builtin(delattr)
def _delattr(tx, fn, args, kwargs):
    if len(args) != 2 or not args[1].is_constant():
        return NOT_HANDLED
    if dispatch.delete_attr(tx, args[0], args[1].as_constant()) is NOT_HANDLED:
        return NOT_HANDLED
    return V.ConstantVariable(None)


@dispatch.delete_attr.default
def _delete_attr(tx, obj, name):
    return NOT_HANDLED             # only kinds that register delete_attr support delattr()


@dispatch.builtin(object.__setattr__)
def _object_setattr(tx, fn, args, kwargs):
    if len(args) == 3 and not kwargs and args[1].is_constant() \
            and isinstance(args[0], V.UserObjectVariable):
        plain_store(tx, args[0], args[1].as_constant(), args[2])
        return V.ConstantVariable(None)
    if len(args) == 3 and not kwargs and args[1].is_constant() \
            and type(args[0]) is V.NewObjectVariable:
        # made in the frame (a frozen dataclass's __init__ stores through object.__setattr__)
        new_object_store(tx, args[0], args[1].as_constant(), args[2])
        return V.ConstantVariable(None)
    return NOT_HANDLED


@dispatch.builtin(object.__delattr__)
def _object_delattr(tx, fn, args, kwargs):
    # the deletion itself, without the class's __delattr__ (which is what calls this)
    if len(args) == 2 and not kwargs and args[1].is_constant() \
            and isinstance(args[0], (V.UserObjectVariable, V.NewObjectVariable)) \
            and not isinstance(args[0], V.NewModuleVariable) \
            and (args[0].source is not None or isinstance(args[0], V.NewObjectVariable)):
        plain_delete(tx, args[0], args[1].as_constant())
        return V.ConstantVariable(None)
    return NOT_HANDLED


@dispatch.compare_op.first
def _not_equal_through_eq(tx, symbol, a, b):
    """a != b between objects whose class defines __eq__ in Python but inherits object.__ne__
    (dataclasses): object.__ne__ inverts __eq__ unless it is NotImplemented, then the reflected
    operand is asked, then identity decides (as CPython's rich comparison does)."""
    if symbol != "!=" or not any(isinstance(x, (V.NewObjectVariable, V.UserObjectVariable))
                                 for x in (a, b)):
        return NOT_HANDLED
    for x, y in ((a, b), (b, a)):
        if not isinstance(x, (V.NewObjectVariable, V.UserObjectVariable)):
            if x.is_constant() or isinstance(x, (V.TensorVariable, V.SymNodeVariable)):
                return NOT_HANDLED           # the other operand's own rules decide
            continue
        cls = python_type(x)
        if inspect.getattr_static(cls, "__ne__", None) is not object.__ne__:
            return NOT_HANDLED                # a __ne__ of its own: the generic rules inline it
        eq = inspect.getattr_static(cls, "__eq__", None)
        if eq is object.__eq__:
            continue                          # identity only: NotImplemented unless `is`
        if not isinstance(eq, types.FunctionType):
            return NOT_HANDLED
        guard_class_function(tx, x, "__eq__", eq)
        out = dispatch.inline_call(tx, V.UserFunctionVariable(eq), [x, y], {})
        if out.is_constant() and out.as_constant() is NotImplemented:
            continue
        return V.ConstantVariable(not dispatch.truthiness(tx, out))
    return NOT_HANDLED                        # identity: the generic rules decide `is`


@dispatch.builtin(object.__getattribute__)
def _object_getattribute(tx, fn, args, kwargs):
    if len(args) == 2 and not kwargs and args[1].is_constant():
        return generic_object_attr(tx, args[0], args[1].as_constant())
    return NOT_HANDLED


@dispatch.builtin(dict.get, dict.__getitem__, dict.__contains__)
def _dict_read(tx, fn, args, kwargs):
    if args and not kwargs:
        return dict_subclass_read(tx, fn, args[0], args[1:])
    return NOT_HANDLED


@dispatch.builtin(torch.nn.Module.__call__)
def _module_call(tx, fn, args, kwargs):
    if args and isinstance(args[0], V.NNModuleVariable):
        return call_module_forward(tx, args[0], args[1:], kwargs)
    return NOT_HANDLED


# ---- hasattr(): by the operand's kind ---------------------------------------------------------
@dispatch.has_attr.default
def _has_attr(tx, v, name):
    if v.is_constant():
        return hasattr(v.as_constant(), name)
    raise Unsupported(f"hasattr on {v!r}")


@dispatch.has_attr.register(V.TensorVariable)
def _has_attr_tensor(tx, v, name):
    if hasattr(torch.Tensor, name) or name in ("shape", "dtype", "device"):
        return True
    real = tx.output.real_input(v)
    if real is None:
        return False        # a tensor the graph computes has no instance attributes
    found = hasattr(real, name)
    tx.output.add_guard(v.source, "HASATTR", (name, found))
    return found


@dispatch.has_attr.register(V.NNModuleVariable, V.UserObjectVariable, V.PythonModuleVariable)
def _has_attr_real(tx, v, name):
    pending = tx.ctx.side_effects.pending_attr(v, name)
    if pending is not None:        # stored or deleted earlier in the trace (replayed later)
        return not isinstance(pending, V.DeletedVariable) or hasattr(type(v.value), name)
    found = hasattr(v.value, name)
    if v.source is not None:     # the object may gain or lose the attribute later
        tx.output.add_guard(v.source, "HASATTR", (name, found))
    return found


@dispatch.has_attr.register(V.ModelOutputVariable)
def _has_attr_model_output(tx, v, name):
    if v.is_constant():
        return hasattr(v.as_constant(), name)
    return model_outputs.has_attr(v, name)


@dispatch.has_attr.register(V.BaseListVariable, V.DictVariable, V.SetVariable,
                            V.DictViewVariable, V.LazyIteratorVariable, V.ListIteratorVariable,
                            V.IteratorVariable)
def _has_attr_container(tx, v, name):
    if v.is_constant():          # a tuple of constants: the real value answers
        return hasattr(v.as_constant(), name)
    return hasattr(v.python_type(), name)


@dispatch.has_attr.register(V.NewObjectVariable)
def _has_attr_new_object(tx, v, name):
    if v.is_constant():
        return hasattr(v.as_constant(), name)
    if isinstance(v, V.NewModuleVariable):
        raise Unsupported(f"hasattr on {v!r}")
    # made in the frame from a plain class (no __getattr__): its attributes are known
    return name in v.attrs or hasattr(v.cls, name)
