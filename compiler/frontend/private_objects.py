"""copy.deepcopy of a pre-existing plain-data object (a model config), made while tracing.

`copy.deepcopy(config)` in traced code (transformers' `get_text_config(decoder=True)` on an
encoder-decoder config, reached when a KV cache is built in forward) creates an object nobody
else can see. It is made for real, at trace time, and then read and mutated for real
(PrivateObjectVariable): its class's own __getattribute__/__setattr__ run as they would, which
is exact because no one else holds the object. What it depends on is the original: every
attribute read from the copy that the trace has not written is guarded on the original
(`L['self'].config.decoder_layers == 2`), so a change of the original recompiles.

Only objects whose state is plain data qualify (no tensors, modules, functions or other
objects in their __dict__, recursively through lists, tuples and dicts); the copy may not
escape the graph's frame (rebuilding it is not supported: a graph break), and calling one of
its methods runs the real method on constant arguments, with its result taken as a constant
(the result's origin is not guarded: only attribute reads are).
"""
from __future__ import annotations

import copy

from tracetorch import logs
from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.source import AttrSource, GetItemSource

log = logs.get_logger(__name__)

_LEAF_TYPES = (int, float, bool, str, type(None), bytes, complex)


def _plain_data(value, depth=0) -> bool:
    if depth > 6:
        return False
    if type(value) in _LEAF_TYPES:
        return True
    if type(value) in (list, tuple, set, frozenset):
        return all(_plain_data(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) in _LEAF_TYPES and _plain_data(v, depth + 1) for k, v in value.items())
    return False


def _plain_object(value, depth=0) -> bool:
    """An object whose state is plain data, or other such objects (nested sub-configs)."""
    state = getattr(value, "__dict__", None)
    if type(state) is not dict or depth > 3:
        return False
    return all(_plain_data(v) or (_plain_object(v, depth + 1) and hasattr(v, "__dict__"))
               for v in state.values())


def deepcopy(tx, args, kwargs):
    """copy.deepcopy(obj) on a sourced pre-existing object of plain data."""
    if len(args) != 1 or kwargs:
        raise Unsupported("copy.deepcopy with a memo")
    obj = args[0]
    if isinstance(obj, PrivateObjectVariable):
        origin, value = obj.origin, obj.value
    elif isinstance(obj, V.UserObjectVariable) and obj.source is not None:
        origin, value = obj.source, obj.value
    else:
        raise Unsupported(f"copy.deepcopy of {obj!r}")
    if not _plain_object(value):
        raise Unsupported(f"copy.deepcopy of a {type(value).__name__} that holds more than data")
    tx.output.add_guard(origin, "TYPE_MATCH", type(value))
    log.debug("deepcopy_at_trace_time", cls=type(value).__qualname__, origin=origin.name())
    return PrivateObjectVariable(copy.deepcopy(value), origin)


def _constant(tx, value, source):
    """A value read from the copy: guarded on the original when it came from there."""
    if not _plain_data(value):
        raise Unsupported(f"a {type(value).__name__} read from a trace-time copy")
    if source is not None:
        tx.output.add_guard(source, "CONSTANT_MATCH", value)
    return V.ConstantVariable(value)


class PrivateObjectVariable(V.Variable):
    """A real object made at trace time that only the trace can reach (see module doc)."""

    def __init__(self, value, origin):
        self.value = value
        self.origin = origin         # the source of the object it was copied from
        self.written = set()         # attributes the trace set or deleted (no longer the origin's)

    def python_type(self):
        return type(self.value)

    def __repr__(self):
        return f"Private({type(self.value).__name__})"

    def _origin_attr(self, name):
        return None if name in self.written or self.origin is None else AttrSource(self.origin, name)

    def _item_source(self, i):
        return None if self.origin is None or self.written else GetItemSource(self.origin, i)

    def _wrap(self, tx, value, source):
        if _plain_object(value) and not isinstance(value, type):
            return PrivateObjectVariable(value, source)
        return _constant(tx, value, source)


# ---- its operations, registered into the evaluator's tables (dispatch.py) -------------------
@dispatch.is_none.register(PrivateObjectVariable)
def _is_none(tx, obj):
    return False


@dispatch.get_attr.register(PrivateObjectVariable)
def _get_attr(tx, obj, name):
    try:
        value = getattr(obj.value, name)
    except AttributeError:
        raise Unsupported(f"{type(obj.value).__name__} copy has no attribute {name}") from None
    if callable(value) and hasattr(type(obj.value), name):
        return V.MethodVariable(obj, name)
    return obj._wrap(tx, value, obj._origin_attr(name))


@dispatch.unpack.register(PrivateObjectVariable)
def _unpack(tx, obj):
    """Iteration runs for real (the object is private); items are guarded on the original's
    items (origin[i]) when the trace wrote nothing on the copy."""
    items = list(obj.value)
    return [obj._wrap(tx, item, obj._item_source(i)) for i, item in enumerate(items)]


@dispatch.length.register(PrivateObjectVariable)
def _length(tx, obj):
    n = len(obj.value)
    if obj.origin is not None and not obj.written:
        expr = f"len({obj.origin.name()}) == {n}"
        tx.output.add_guard(expr, "SYMBOLIC", expr)
    return V.ConstantVariable(n)


@dispatch.has_attr.register(PrivateObjectVariable)
def _has_attr(tx, obj, name):
    found = hasattr(obj.value, name)
    source = obj._origin_attr(name)
    if source is not None:
        tx.output.add_guard(obj.origin, "HASATTR", (name, found))
    return found


@dispatch.store_attr.register(PrivateObjectVariable)
def _store_attr(tx, obj, name, value):
    if not value.is_constant() or not _plain_data(value.as_constant()):
        raise Unsupported(f"storing {value!r} on a trace-time copy")
    setattr(obj.value, name, value.as_constant())
    obj.written.add(name)


@dispatch.delete_attr.register(PrivateObjectVariable)
def _delete_attr(tx, obj, name):
    delattr(obj.value, name)
    obj.written.add(name)


@dispatch.call_method.register(PrivateObjectVariable)
def _call_method(tx, obj, name, args, kwargs):
    if not all(a.is_constant() for a in list(args) + list(kwargs.values())):
        raise Unsupported(f"method {name} of a trace-time copy with symbolic arguments")
    result = getattr(obj.value, name)(*[a.as_constant() for a in args],
                                       **{k: v.as_constant() for k, v in kwargs.items()})
    if result is obj.value:
        return obj
    if _plain_object(result) and not isinstance(result, type):
        return PrivateObjectVariable(result, None)    # made by the call: private too
    if not _plain_data(result):
        raise Unsupported(f"method {name} of a trace-time copy returned a "
                          f"{type(result).__name__}")
    log.debug("trace_time_copy_method", cls=type(obj.value).__qualname__, method=name)
    return V.ConstantVariable(result)
