"""Attribute reads and writes on symbolic values (LOAD_ATTR / STORE_ATTR / getattr)."""
from __future__ import annotations

import enum
import inspect
import types

import torch
from tracetorch.compiler.frontend import dispatch, exceptions
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.builder import _wrap_foreign
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.members import function_member, guard_class_function, static_member, type_member
from tracetorch.compiler.frontend.source import AttrSource, GetItemSource, is_torch_object
from tracetorch.compiler.frontend.stdlib_calls import CLASS_POLYFILLS
from tracetorch.compiler.frontend.symbolic import tensor_shape

_TENSOR_CONST_ATTRS = {"dtype", "device", "requires_grad", "is_cuda", "layout", "is_leaf",
                       "is_sparse", "is_quantized", "is_meta", "is_nested", "is_mkldnn", "is_cpu",
                       "is_xpu", "is_mps"}




@dispatch.get_attr.default
def get_attr(tx, obj, name):
    se = tx.ctx.side_effects
    pending = se.pending_attr(obj, name)
    if isinstance(pending, V.DeletedVariable):       # `del obj.name` earlier in the trace
        return _after_delete(tx, obj, name)
    if pending is not None:
        return pending
    if isinstance(obj, V.TensorVariable):
        return _tensor_attr(tx, obj, name)
    if name == "__class__" and isinstance(obj, (V.NNModuleVariable, V.UserObjectVariable)):
        return V.ConstantVariable(type(obj.value))     # the type is fixed by its guard
    if isinstance(obj, V.NNModuleVariable):
        return _module_attr(tx, obj, name)
    if isinstance(obj, V.PythonModuleVariable):
        mod = obj.value
        if not hasattr(mod, name):
            raise Unsupported(f"module {mod.__name__} has no attribute {name}")
        value = getattr(mod, name)
        torch_mod = is_torch_object(mod) or mod.__name__ in ("math", "operator", "builtins")
        source = AttrSource(obj.source, name) if obj.source is not None else None
        if torch_mod:
            try:
                return _wrap_foreign(tx, value)
            except Unsupported:
                return dispatch.wrap(tx, value, source, guard=False)
        return dispatch.wrap(tx, value, source)
    if isinstance(obj, V.UserObjectVariable):
        return _object_attr(tx, obj, obj.value, name)
    if isinstance(obj, V.SuperVariable):
        return super_attr(tx, obj, name)
    if isinstance(obj, V.NewObjectVariable):
        data = _data_descriptor(obj.cls, name) if name != "__class__" else None
        if data is not None:            # a property (or other data descriptor) wins over attrs
            return type_member(tx, obj, obj.cls, name)
        if name in obj.attrs:
            return obj.attrs[name]
        if name == "__class__":
            return V.ConstantVariable(obj.cls)
        return type_member(tx, obj, obj.cls, name)
    if isinstance(obj, V.ExceptionVariable):
        return exceptions.get_attr(tx, obj, name)
    if isinstance(obj, V.NamedTupleVariable):
        fields = getattr(obj.tuple_cls, "_fields", None) or getattr(obj.tuple_cls, "__match_args__", ())
        if name in fields:
            return obj.items[list(fields).index(name)]
        static = inspect.getattr_static(obj.tuple_cls, name, None)
        if name == "_fields" or (static is not None and type(static) in (tuple, int, str, bool)):
            return V.ConstantVariable(getattr(obj.tuple_cls, name))
        if isinstance(static, (types.FunctionType, property)) and name not in ("_replace", "_asdict"):
            return type_member(tx, obj, obj.tuple_cls, name)
    if isinstance(obj, V.ConstantVariable) and isinstance(obj.value, type):
        return _type_attr(tx, obj, name)
    if isinstance(obj, V.ConstantVariable):
        value = obj.value
        attr = getattr(type(value), name, None)
        if callable(attr) and not isinstance(value, type):
            return V.MethodVariable(obj, name)
        try:
            return V.ConstantVariable(getattr(value, name))
        except AttributeError:
            raise Unsupported(f"{type(value).__name__} has no attribute {name}") from None
    if isinstance(obj, (V.ListVariable, V.DictVariable, V.TupleVariable, V.SymNodeVariable,
                        V.ObjectDictVariable)):
        return V.MethodVariable(obj, name)
    if isinstance(obj, (V.UserFunctionVariable,)) and name in _FUNCTION_CONST_ATTRS:
        # the function is fixed by its ID_MATCH guard (or taken as it is, without a source);
        # its code object is immutable
        return V.ConstantVariable(getattr(obj.fn, name))
    if isinstance(obj, V.UserMethodVariable) and name == "__self__":
        return obj.obj
    if isinstance(obj, V.UserMethodVariable) and name == "__func__":
        # the function the method was bound from: already fixed by the guards that chose it
        src = AttrSource(obj.source, "__func__") if obj.source is not None else None
        return V.UserFunctionVariable(obj.fn, src)
    if isinstance(obj, V.BuiltinVariable) and isinstance(obj.fn, type):
        poly = CLASS_POLYFILLS.get((obj.fn, name))
        if poly is not None:             # dict.fromkeys: a Python equivalent, inlined
            return V.UserFunctionVariable(poly)
        member = inspect.getattr_static(obj.fn, name, None)
        if obj.fn.__module__ == "builtins" and type(member).__hash__ is not None \
                and member in dispatch.BUILTINS:
            # object.__setattr__ / __delattr__ read through the builtin class: the modelled
            # builtin (as through a class held in a cell, _type_attr)
            return V.BuiltinVariable(member)
    if isinstance(obj, V.TorchFunctionVariable) and isinstance(obj.fn, torch._ops.OpOverloadPacket):
        # torch.ops.aten.add.Tensor: an overload of the packet, a fixed operator object
        try:
            return V.TorchFunctionVariable(getattr(obj.fn, name))
        except AttributeError:
            raise Unsupported(f"operator {obj.fn} has no overload {name}") from None
    raise Unsupported(f"attribute {name} of {obj!r}")


_DICT_READS = ("get", "__getitem__", "__contains__")
_FUNCTION_CONST_ATTRS = ("__name__", "__qualname__", "__module__", "__code__", "__doc__")


def super_attr(tx, sv, name):
    """A method/attribute found after sv.cls in the MRO of the object's class."""
    obj = sv.obj
    obj_cls = obj.cls if isinstance(obj, V.NewObjectVariable) else (
        type(obj.value) if isinstance(obj, (V.NNModuleVariable, V.UserObjectVariable)) else None)
    if isinstance(obj, V.NamedTupleVariable) and sv.cls in obj.tuple_cls.__mro__:
        # a namedtuple subclass calling up: tuple's own methods act on the plain tuple
        for klass in obj.tuple_cls.__mro__[obj.tuple_cls.__mro__.index(sv.cls) + 1:]:
            if name in klass.__dict__:
                member = klass.__dict__[name]
                if isinstance(member, types.FunctionType):
                    return V.UserMethodVariable(member, obj)
                if klass is tuple:
                    return V.MethodVariable(V.TupleVariable(list(obj.items)), name)
                break
    if obj_cls is None:
        raise Unsupported(f"super() on {obj!r}")
    mro = obj_cls.__mro__
    if sv.cls not in mro:
        raise Unsupported("super(): class not in the object's MRO")
    for klass in mro[mro.index(sv.cls) + 1:]:
        if name in klass.__dict__:
            member = klass.__dict__[name]
            if klass is torch.nn.Module and name == "__call__" and isinstance(obj, V.NNModuleVariable):
                # a subclass's __call__ override calling up: hooks checked, forward inlined
                return V.PartialVariable(V.BuiltinVariable(torch.nn.Module.__call__), [obj], {})
            if isinstance(member, types.FunctionType):
                return V.UserMethodVariable(member, obj)
            if isinstance(member, staticmethod) and isinstance(member.__func__, types.FunctionType):
                return V.UserFunctionVariable(member.__func__)
            if isinstance(member, classmethod) and isinstance(member.__func__, types.FunctionType):
                return V.UserMethodVariable(member.__func__, V.ConstantVariable(obj_cls))
            if klass is object and name == "__init__":
                return V.UserFunctionVariable(_object_init)
            if klass is object and name == "__getattribute__":
                return V.PartialVariable(V.BuiltinVariable(object.__getattribute__), [obj], {})
            if klass is object and name == "__setattr__" and isinstance(obj, V.UserObjectVariable):
                return V.PartialVariable(V.BuiltinVariable(object.__setattr__), [obj], {})
            if klass is object and name == "__delattr__" and \
                    isinstance(obj, (V.UserObjectVariable, V.NewObjectVariable)):
                return V.PartialVariable(V.BuiltinVariable(object.__delattr__), [obj], {})
            if klass is dict and name in _DICT_READS and isinstance(obj, V.UserObjectVariable):
                return V.PartialVariable(V.BuiltinVariable(member), [obj], {})
            raise Unsupported(f"super().{name} is a {type(member).__name__}")
    raise Unsupported(f"super() has no attribute {name}")


def plain_store(tx, obj, name, value):
    """object.__setattr__(obj, name, value) on a pre-existing object: the store itself,
    replayed after the graph, without the class's own __setattr__."""
    static = inspect.getattr_static(type(obj.value), name, None)
    if static is not None and hasattr(static, "__set__"):
        raise Unsupported(f"object.__setattr__ on descriptor {name}")
    tx.ctx.side_effects.store_attr(tx, obj, name, value)


def _object_init(*args, **kwargs):
    return None


def _type_attr(tx, cv, name):
    """Attributes of a class: static/class methods, plain functions, constants."""
    cls = cv.value
    try:
        static = inspect.getattr_static(cls, name)
    except AttributeError:
        raise Unsupported(f"class {cls.__name__} has no attribute {name}") from None
    if isinstance(static, staticmethod) and isinstance(static.__func__, types.FunctionType):
        return V.UserFunctionVariable(static.__func__)
    if isinstance(static, classmethod) and isinstance(static.__func__, types.FunctionType):
        return V.UserMethodVariable(static.__func__, cv)
    if isinstance(static, types.FunctionType):
        return V.UserFunctionVariable(static)
    value = getattr(cls, name)
    if isinstance(value, (int, float, str, bool, type(None), tuple, torch.dtype)) and type(value) in \
            (int, float, str, bool, type(None), tuple, torch.dtype):
        if cv.source is not None:
            tx.output.add_guard(AttrSource(cv.source, name), "CONSTANT_MATCH", value)
        return V.ConstantVariable(value)
    if is_torch_object(cls):
        return _wrap_foreign(tx, value)
    if isinstance(value, enum.Enum) and type(value) is cls:
        return V.ConstantVariable(value)        # a member of an Enum class: fixed
    if cls.__module__ == "builtins" and type(value).__hash__ is not None \
            and value in dispatch.BUILTINS:
        # object.__setattr__ read through a class held in a cell (a frozen dataclass's
        # __init__): the modelled builtin, as when read through the global name
        return V.BuiltinVariable(value)
    raise Unsupported(f"attribute {name} of class {cls.__name__}")


def _tensor_attr(tx, t, name):
    ex = t.example
    if name == "shape":
        return tensor_shape(tx, t)
    if name == "ndim":
        return V.ConstantVariable(ex.dim())
    if name in _TENSOR_CONST_ATTRS:
        return V.ConstantVariable(getattr(ex, name))
    if name in ("T", "mT", "H", "mH", "real", "imag"):
        return tx.output.call("call_function", getattr, (t, V.ConstantVariable(name)), {})
    if name in ("grad", "data", "grad_fn", "_version"):
        raise Unsupported(f"Tensor.{name} (autograd state outside the graph)")
    attr = getattr(torch.Tensor, name, None)
    if attr is not None and callable(attr):
        return V.MethodVariable(t, name)
    raise Unsupported(f"Tensor attribute {name}")


def _module_attr(tx, mv, name):
    m = mv.value
    src = AttrSource(mv.source, name)
    d = m.__dict__
    if name == "training":
        tx.output.add_guard(mv.source, "NN_MODULE_TRAINING", m.training)
        return V.ConstantVariable(m.training)
    if name in d.get("_parameters", {}):
        p = d["_parameters"][name]
        return V.ConstantVariable(None) if p is None else dispatch.wrap(tx, p, src)
    if name in d.get("_buffers", {}):
        b = d["_buffers"][name]
        return V.ConstantVariable(None) if b is None else dispatch.wrap(tx, b, src)
    if name in d.get("_modules", {}):
        sub = d["_modules"][name]
        return V.ConstantVariable(None) if sub is None else dispatch.wrap(tx, sub, src)
    if name in d:
        return dispatch.wrap(tx, d[name], src)
    return _class_attr(tx, mv, m, name, src)


def _object_attr(tx, ov, value, name):
    cls = type(value)
    custom = cls.__getattribute__
    if custom is not object.__getattribute__ and \
            getattr(custom, "__objclass__", None) not in _GENERIC_GETATTR_BASES + _GENERIC_GETATTR_TYPES:
        # a Python __getattribute__ (e.g. Hugging Face's PretrainedConfig mapping attribute
        # aliases) is inlined like any method; its super().__getattribute__ is the generic
        # lookup below. What it returns is guarded through the attribute's own source.
        if isinstance(custom, types.FunctionType):
            return dispatch.inline_call(tx, V.UserFunctionVariable(custom), [ov, V.ConstantVariable(name)], {})
        raise Unsupported(f"attribute {name} of {cls.__name__}, which customizes attribute access")
    return generic_object_attr(tx, ov, name)


def generic_object_attr(tx, ov, name):
    """object.__getattribute__(obj, name) for a pre-existing object: its instance dict, then
    its class; a Python __getattr__ when neither has the name."""
    value = ov.value
    cls = type(value)
    if not isinstance(ov, V.UserObjectVariable):
        return dispatch.get_attr(tx, ov, name)
    if name == "__dict__" and type(getattr(value, "__dict__", None)) is dict:
        return V.ObjectDictVariable(ov)
    static = inspect.getattr_static(cls, name, _MISSING)
    d = getattr(value, "__dict__", None)
    if d is not None and name in d and not (static is not _MISSING and hasattr(static, "__set__")):
        return dispatch.wrap(tx, d[name], AttrSource(ov.source, name))
    if static is _MISSING:
        fallback = getattr(cls, "__getattr__", None)
        if isinstance(fallback, types.FunctionType):
            return dispatch.inline_call(tx, V.UserFunctionVariable(fallback), [ov, V.ConstantVariable(name)], {})
        raise Unsupported(f"{cls.__name__} has no attribute {name}")
    return _class_attr(tx, ov, value, name, AttrSource(ov.source, name))


_MISSING = object()
# builtin bases whose __getattribute__ slot is the generic lookup (dict subclasses, ...)
_GENERIC_GETATTR_BASES = (object, dict, list, tuple, set, frozenset, int, float, str)
# C types whose attribute lookup slot is the generic one under another wrapper object
_GENERIC_GETATTR_TYPES = (types.SimpleNamespace,)










def _class_attr(tx, obj_var, value, name, src):
    cls = type(value)
    static = static_member(cls, name)
    guard_class_function(tx, obj_var, name, static)
    member = function_member(tx, obj_var, cls, static)
    if member is not None:
        return member
    if isinstance(static, types.MemberDescriptorType) and src is not None \
            and hasattr(value, name):
        # a __slots__ attribute (dataclasses.Field.name): read through its source, guarded
        return dispatch.wrap(tx, getattr(value, name), AttrSource(src, name))
    if hasattr(static, "__get__") and not isinstance(static, (int, float, str, bool, type(None), tuple)):
        if isinstance(value, torch.nn.Module) and callable(static) and is_torch_object(static):
            raise Unsupported(f"nn.Module builtin method {name}")
        raise Unsupported(f"descriptor {name} of {cls.__name__}")
    # a plain class attribute (constant, tuple, ...): guarded through its source
    return dispatch.wrap(tx, static, src)


def _data_descriptor(cls, name):
    """The data descriptor (property, slot, ...) `name` of cls, which takes precedence over
    the instance dict on reads and writes; else None."""
    static = inspect.getattr_static(cls, name, None)
    t = type(static)
    if static is not None and (hasattr(t, "__set__") or hasattr(t, "__delete__")):
        return static
    return None


def new_object_store(tx, obj, name, value):
    """object.__setattr__(obj, name, value) on an object made in the frame."""
    data = _data_descriptor(obj.cls, name)
    if isinstance(data, property) and isinstance(data.fset, types.FunctionType):
        dispatch.inline_call(tx, V.UserFunctionVariable(data.fset), [obj, value], {})
        return
    if data is not None:
        raise Unsupported(f"assignment to descriptor {name} of {obj.cls.__name__}")
    obj.attrs[name] = value        # a new object: no side effect to replay
    tx.ctx.side_effects.touched.append(obj)


@dispatch.store_attr.default
def store_attr(tx, obj, name, value):
    if isinstance(obj, V.NewObjectVariable):
        setter = inspect.getattr_static(obj.cls, "__setattr__", object.__setattr__)
        if isinstance(setter, types.FunctionType):
            # the class's own __setattr__ (a frozen dataclass's raises FrozenInstanceError):
            # traced; it stores through object.__setattr__ (new_object_store)
            dispatch.inline_call(tx, V.UserFunctionVariable(setter),
                                 [obj, V.ConstantVariable(name), value], {})
            return
        new_object_store(tx, obj, name, value)
        return
    if isinstance(obj, V.TensorVariable):
        raise Unsupported(f"setting Tensor.{name}")
    if isinstance(obj, V.NNModuleVariable):
        d = obj.value.__dict__
        if name in d.get("_parameters", {}) or name in d.get("_modules", {}) or name == "training":
            raise Unsupported(f"assigning {name} of a module (parameter/submodule/training)")
        if name in d.get("_buffers", {}):
            raise Unsupported(f"assigning buffer {name} of a module")
    elif not isinstance(obj, V.UserObjectVariable):
        raise Unsupported(f"attribute assignment on {obj!r}")
    if isinstance(obj, V.UserObjectVariable):
        cls = type(obj.value)
        # empty __slots__ (abc.ABC, mixins) leave the instance __dict__: a plain assignment
        slotted = not hasattr(obj.value, "__dict__") or any(
            getattr(k, "__slots__", ()) for k in cls.__mro__)
        custom = inspect.getattr_static(cls, "__setattr__")
        if isinstance(custom, types.FunctionType) and not slotted:
            # a Python __setattr__ (a config's alias mapping) is traced; its
            # super().__setattr__ / object.__setattr__ comes back as a plain store
            guard_class_function(tx, obj, "__setattr__", custom)
            dispatch.inline_call(tx, V.UserFunctionVariable(custom), [obj, V.ConstantVariable(name), value], {})
            return
        if cls.__setattr__ is not object.__setattr__ or slotted:
            raise Unsupported(f"attribute assignment on {cls.__name__} (custom __setattr__/slots)")
        static = inspect.getattr_static(cls, name, None)
        if static is not None and hasattr(static, "__set__"):
            raise Unsupported(f"assignment to descriptor {name}")
    tx.ctx.side_effects.store_attr(tx, obj, name, value)


# ---- `del obj.name` (DELETE_ATTR, delattr) ------------------------------------------------------
def _after_delete(tx, obj, name):
    """A read of an instance attribute deleted earlier in the trace: the class's attribute,
    else AttributeError (as CPython's lookup after the instance dict lost the name)."""
    cls = type(obj.value)
    if inspect.getattr_static(cls, name, _MISSING) is _MISSING:
        exceptions.raise_new(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")
    return type_member(tx, obj, cls, name)


_MISSING = object()


def _class_delattr(tx, obj, cls, name):
    """A Python __delattr__ of the object's class (a frozen dataclass's raises
    FrozenInstanceError): traced, True; else False (object.__delattr__ applies)."""
    custom = inspect.getattr_static(cls, "__delattr__", object.__delattr__)
    if not isinstance(custom, types.FunctionType):
        if custom is not object.__delattr__:
            raise Unsupported(f"del on {cls.__name__} (a C __delattr__)")
        return False
    if isinstance(obj, V.UserObjectVariable):
        guard_class_function(tx, obj, "__delattr__", custom)
    dispatch.inline_call(tx, V.UserFunctionVariable(custom), [obj, V.ConstantVariable(name)], {})
    return True


@dispatch.delete_attr.register(V.NewObjectVariable)
def _delete_new_object_attr(tx, obj, name):
    if isinstance(obj, V.NewModuleVariable):
        return dispatch.NOT_HANDLED
    if not _class_delattr(tx, obj, obj.cls, name):
        plain_delete(tx, obj, name)
    return None


@dispatch.delete_attr.register(V.UserObjectVariable)
def _delete_object_attr(tx, obj, name):
    if obj.source is None:
        return dispatch.NOT_HANDLED
    if not _class_delattr(tx, obj, type(obj.value), name):
        plain_delete(tx, obj, name)
    return None


def plain_delete(tx, obj, name):
    """object.__delattr__(obj, name): made in the frame, the attribute leaves obj.attrs; a
    pre-existing object's deletion is a side effect replayed after the graph, decided now on
    the instance dict (its key's presence guarded) and on deletions/stores earlier in the trace."""
    if isinstance(obj, V.NewObjectVariable):
        cls = obj.cls
        if _data_descriptor(cls, name) is not None:
            raise Unsupported(f"deleting descriptor {name} of {cls.__name__}")
        if name not in obj.attrs:
            exceptions.raise_new(AttributeError, name)
        del obj.attrs[name]
        tx.ctx.side_effects.touched.append(obj)
        return
    value, cls = obj.value, type(obj.value)
    if not hasattr(value, "__dict__") or any(getattr(k, "__slots__", ()) for k in cls.__mro__):
        raise Unsupported(f"del on {cls.__name__} (slots)")
    if _data_descriptor(cls, name) is not None:
        raise Unsupported(f"deleting descriptor {name} of {cls.__name__}")
    se = tx.ctx.side_effects
    pending = se.pending_attr(obj, name)
    if pending is None:
        # only the key's presence is guarded (its value is not read)
        present = name in value.__dict__
        expr = f"{name!r} {'in' if present else 'not in'} {AttrSource(obj.source, '__dict__').name()}"
        tx.output.add_guard(expr, "SYMBOLIC", expr)
    else:
        present = not isinstance(pending, V.DeletedVariable)
    if not present:
        exceptions.raise_new(AttributeError, name)
    se.delete_attr(tx, obj, name)


def object_dict_lookup(tx, dv, key):
    """(found, Variable) for obj.__dict__[key], guarding the key's presence or absence."""
    return mapping_lookup(tx, dv.obj.value.__dict__, AttrSource(dv.obj.source, "__dict__"), key)


def mapping_lookup(tx, d, src, key):
    """(found, Variable) for the real dict d (read from src) at a constant key: only that
    key is guarded (its value, or its absence), not the whole dict."""
    if not key.is_constant() or type(key.as_constant()) not in (str, int):
        raise Unsupported(f"lookup in a dict with {key!r}")
    k = key.as_constant()
    if k in d:
        return True, dispatch.wrap(tx, d[k], GetItemSource(src, k))
    expr = f"{k!r} not in {src.name()}"
    tx.output.add_guard(expr, "SYMBOLIC", expr)
    return False, V.ConstantVariable(None)


def dict_subclass_read(tx, fn, obj, args):
    """dict.get / dict.__getitem__ / dict.__contains__ on a pre-existing dict subclass
    instance (super().get(key) in a subclass that overrides get)."""
    d = obj.value
    if not isinstance(obj, V.UserObjectVariable) or not isinstance(d, dict) or not args:
        raise Unsupported(f"{fn.__name__} on {obj!r}")
    cls = type(d)
    if cls.__getitem__ is not dict.__getitem__ or cls.__contains__ is not dict.__contains__:
        raise Unsupported(f"dict subclass {cls.__name__} overrides item access")
    found, value = mapping_lookup(tx, d, obj.source, args[0])
    if fn is dict.__contains__:
        return V.ConstantVariable(found)
    if fn is dict.get:
        return value if found else (args[1] if len(args) > 1 else V.ConstantVariable(None))
    if not found:
        raise Unsupported("KeyError from a dict lookup")
    return value
