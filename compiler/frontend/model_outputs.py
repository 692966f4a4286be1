"""Hugging Face `ModelOutput`s created in traced code (BaseModelOutput, CausalLMOutputWithPast...).

A ModelOutput is a dataclass that subclasses OrderedDict: its `__post_init__` puts every
non-None field into the dict, `__setitem__` / `__setattr__` keep the two views in step, and
`obj[i]` / `to_tuple()` index the non-None values. Tracing that machinery line by line (the
generated dataclass __init__ calling a custom __setattr__ that calls `dataclasses.fields`...)
buys nothing, so, as Dynamo does, it is modelled directly (V.ModelOutputVariable) and rebuilt
after the graph by calling the class with its non-None fields, which runs the real
__init__/__post_init__. Only classes that keep ModelOutput's own protocol methods are modelled;
anything else stays an opaque object creation (a graph break).
"""
from __future__ import annotations

import dataclasses

from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.members import type_member
from tracetorch.compiler.frontend.source import AttrSource

from tracetorch import logs

log = logs.get_logger(__name__)

_PROTOCOL = ("__post_init__", "__getitem__", "__setitem__", "__setattr__", "to_tuple",
             "__init__", "__delitem__", "keys", "values", "items", "__iter__", "__len__",
             "__contains__", "get")


def _model_output_base(cls):
    for base in getattr(cls, "__mro__", ()):
        if base.__name__ == "ModelOutput" and base.__module__ == "transformers.utils.generic":
            return base
    return None


def is_model_output_class(cls) -> bool:
    base = _model_output_base(cls)
    if base is None or cls is base or not dataclasses.is_dataclass(cls):
        return False
    for name in _PROTOCOL:
        own = _defined_in(cls, name)
        if own is not None and own is not base and own.__module__ != "collections" \
                and own is not dict and own is not object:
            if not (name == "__init__" and _dataclass_init(cls, own)) \
                    and not (name in _OVERRIDABLE and _python_override(own, name)):
                return False
    return True


# protocol methods a subclass may override with Python code (CLIPOutput.to_tuple): the
# override is inlined on the modelled output instead of ModelOutput's own behaviour
_OVERRIDABLE = ("to_tuple",)


def _python_override(owner, name):
    import types
    return isinstance(owner.__dict__.get(name), types.FunctionType)


def _override(cls, name):
    """The subclass's Python override of a protocol method, else None."""
    if name not in _OVERRIDABLE:
        return None
    owner = _defined_in(cls, name)
    base = _model_output_base(cls)
    if owner is None or owner is base or not _python_override(owner, name):
        return None
    return owner.__dict__[name]


def is_generated_init(fn) -> bool:
    """Is fn an __init__ that @dataclass generated (exec'd source, no file)?"""
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_filename == "<string>" and code.co_name == "__init__"


def _wrapped_generated_init(init) -> bool:
    """A Python wrapper (functools.wraps: __wrapped__) around a generated dataclass __init__,
    e.g. one a metaclass installs to rename keyword arguments: the wrapper is traced and its
    call of the generated __init__ binds the fields (bind_generated_init)."""
    for _ in range(4):
        init = getattr(init, "__wrapped__", None)
        if init is None:
            return False
        if is_generated_init(init):
            return True
    return False


def _defined_in(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass
    return None


def _dataclass_init(cls, owner):
    """Is owner's __init__ the one @dataclass generated (not a hand-written one)?"""
    init = owner.__dict__["__init__"]
    return dataclasses.is_dataclass(owner) and (is_generated_init(init)
                                                or _wrapped_generated_init(init))


def construct(tx, cls, args, kwargs):
    """cls(*args, **kwargs): the dataclass __init__ binding, then ModelOutput.__post_init__.
    A wrapped __init__ is inlined with a ModelOutput under construction as self; its call of
    the generated __init__ comes back here (bind_generated_init)."""
    init = cls.__init__
    if is_generated_init(init):
        attrs, items = _bind(cls, args, kwargs)
        return V.ModelOutputVariable(cls, attrs, items)
    log.debug("model_output_wrapped_init", cls=cls.__qualname__,
              wrapper=getattr(init, "__qualname__", repr(init)))
    mo = V.ModelOutputVariable(cls, {}, {})
    mo.initializing = True
    dispatch.inline_call(tx, V.UserFunctionVariable(init), [mo] + list(args), kwargs)
    if mo.initializing:
        raise Unsupported(f"{cls.__name__}.__init__ wrapper did not call the dataclass __init__")
    return mo


def is_init_of_new_output(fn, args) -> bool:
    """A call of a generated dataclass __init__ on a ModelOutput being constructed."""
    return bool(args) and isinstance(args[0], V.ModelOutputVariable) \
        and getattr(args[0], "initializing", False) and is_generated_init(fn)


def bind_generated_init(tx, mo, args, kwargs):
    mo.attrs, mo.items = _bind(mo.cls, args, kwargs)
    mo.initializing = False
    return V.ConstantVariable(None)


def _bind(cls, args, kwargs):
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if len(args) > len(fields):
        raise Unsupported(f"too many arguments for {cls.__name__}")
    attrs = {}
    for f, a in zip(fields, args):
        attrs[f.name] = a
    for k, v in kwargs.items():
        if k in attrs or k not in [f.name for f in fields]:
            raise Unsupported(f"argument {k!r} of {cls.__name__}")
        attrs[k] = v
    for f in fields:
        if f.name not in attrs:
            if f.default is dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                raise Unsupported(f"{cls.__name__}: field {f.name} without a plain default")
            attrs[f.name] = V.ConstantVariable(f.default)
    if not fields:
        raise Unsupported(f"{cls.__name__} has no fields")
    first, others = attrs[fields[0].name], [attrs[f.name] for f in fields[1:]]
    if all(_is_none(o) for o in others) and not isinstance(first, V.TensorVariable) \
            and not _is_none(first):
        # __post_init__ would try to read the first field as an iterator of (key, value)
        raise Unsupported(f"{cls.__name__} built from a single non-tensor field")
    items = {name: v for name, v in attrs.items() if not _is_none(v)}
    return attrs, items


def _is_none(v):
    return isinstance(v, V.ConstantVariable) and v.value is None


def wrap_existing(tx, value, source):
    """A ModelOutput that existed before the call (encoder_outputs passed to forward, an
    output carried across a graph break): modelled like one built in the frame, its fields
    read through its source; the key list is guarded; it is never mutated here (a mutation
    is a graph break) and is reloaded from its source where it escapes."""
    out = tx.output
    out.add_guard(source, "TYPE_MATCH", type(value))
    keys = list(value.keys())
    out.add_guard(f"list({source.name()}.keys())", "CONSTANT_MATCH", keys)
    attrs = {f.name: dispatch.wrap(tx, getattr(value, f.name), AttrSource(source, f.name))
             for f in dataclasses.fields(type(value))}
    if any(k not in attrs for k in keys):
        raise Unsupported(f"a {type(value).__name__} with items that are not fields")
    mo = V.ModelOutputVariable(type(value), attrs, {k: attrs[k] for k in keys})
    mo.source = source
    log.debug("model_output_existing", cls=type(value).__qualname__, source=source.name())
    return mo


@dispatch.get_attr.register(V.ModelOutputVariable)
def get_attr(tx, mo, name):
    if name in mo.attrs:
        return mo.attrs[name]
    if name == "__class__":
        return V.ConstantVariable(mo.cls)
    override = _override(mo.cls, name)
    if override is not None:
        return V.UserMethodVariable(override, mo)
    if name in ("keys", "values", "items", "to_tuple", "get", "__getitem__", "__contains__"):
        return V.MethodVariable(mo, name)
    return type_member(tx, mo, mo.cls, name)


def has_attr(mo, name) -> bool:
    return name in mo.attrs or hasattr(mo.cls, name)


@dispatch.get_item.register(V.ModelOutputVariable)
def get_item(tx, mo, key):
    if not key.is_constant():
        raise Unsupported(f"{mo.cls.__name__}[{key!r}]")
    k = key.as_constant()
    if isinstance(k, str):
        if k not in mo.items:
            raise Unsupported(f"KeyError {k!r} from {mo.cls.__name__}")
        return mo.items[k]
    values = list(mo.items.values())
    try:
        picked = values[k]
    except (IndexError, TypeError):
        raise Unsupported(f"{mo.cls.__name__}[{k!r}] out of range") from None
    return V.TupleVariable(picked) if isinstance(k, slice) else picked


def _not_existing(mo):
    if mo.source is not None:
        raise Unsupported(f"mutating a {mo.cls.__name__} that existed before the call")


@dispatch.store_item.register(V.ModelOutputVariable)
def set_item(tx, mo, key, value):
    _not_existing(mo)
    if not key.is_constant() or not isinstance(key.as_constant(), str):
        raise Unsupported(f"{mo.cls.__name__}[{key!r}] = ...")
    k = key.as_constant()
    mo.items[k] = value
    mo.attrs[k] = value
    tx.ctx.side_effects.touched.append(mo)


@dispatch.store_attr.register(V.ModelOutputVariable)
def set_attr(tx, mo, name, value):
    _not_existing(mo)
    fields = {f.name for f in dataclasses.fields(mo.cls)}
    if name in fields and not _is_none(value):
        mo.items[name] = value
    mo.attrs[name] = value
    tx.ctx.side_effects.touched.append(mo)


@dispatch.call_method.register(V.ModelOutputVariable)
def call_method(tx, mo, name, args, kwargs):
    override = _override(mo.cls, name)
    if override is not None:
        return dispatch.inline_call(tx, V.UserFunctionVariable(override), [mo] + list(args), kwargs)
    if kwargs:
        raise Unsupported(f"{mo.cls.__name__}.{name} with keyword arguments")
    if name == "keys" and not args:
        return V.ListVariable([V.ConstantVariable(k) for k in mo.items])
    if name == "values" and not args:
        return V.ListVariable(list(mo.items.values()))
    if name == "items" and not args:
        return V.ListVariable([V.TupleVariable([V.ConstantVariable(k), v]) for k, v in mo.items.items()])
    if name == "to_tuple" and not args:
        return V.TupleVariable(list(mo.items.values()))
    if name == "__getitem__" and len(args) == 1:
        return get_item(tx, mo, args[0])
    if name == "__contains__" and len(args) == 1 and args[0].is_constant():
        return V.ConstantVariable(args[0].as_constant() in mo.items)
    if name == "get" and args and args[0].is_constant():
        k = args[0].as_constant()
        return mo.items[k] if k in mo.items else (args[1] if len(args) > 1 else V.ConstantVariable(None))
    raise Unsupported(f"method {name} of {mo.cls.__name__}")


def check_rebuildable(mo):
    """Calling cls(**non-None fields) gives back the same dict part only if the items are
    exactly the non-None fields, in field order (no extra keys, no stale items)."""
    fields = [f.name for f in dataclasses.fields(mo.cls) if f.init]
    expected = [f for f in fields if not _is_none(mo.attrs.get(f, V.ConstantVariable(None)))]
    extra_attrs = set(mo.attrs) - set(fields)
    if list(mo.items) != expected or extra_attrs or \
            any(mo.items[k] is not mo.attrs[k] for k in expected):
        raise Unsupported(f"cannot rebuild a {mo.cls.__name__} whose items differ from its fields")
    return {f: mo.attrs[f] for f in expected}


@dispatch.reconstruct.register(V.ModelOutputVariable)
def reconstruct(cg, var, side_effects):
    """Pre-existing (never mutated): the same object; made in the frame: cls(**non-None
    fields), whose real __init__/__post_init__ rebuild the dict part."""
    if var.source is not None:
        return cg.load_source(var)
    fields = check_rebuildable(var)

    def build():
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", var.cls)
        cg.emit("BUILD_TUPLE", 0)
        parts = []
        for k, v in fields.items():
            cg.emit("LOAD_CONST", k)
            parts.append(f"{k}={cg.reconstruct(v, side_effects)}")
        cg.emit("BUILD_MAP", len(fields))
        cg.emit("CALL_FUNCTION_EX", 1)
        return f"{var.cls.__name__}({', '.join(parts)})"
    return cg.build_once(var, build)
