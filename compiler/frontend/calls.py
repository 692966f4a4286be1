"""Operators, subscripts, iteration and the call dispatcher of the evaluator.

Rule of the house: Python values known at trace time are computed at trace time (their
guards make that valid); tensors and symbolic sizes go into the graph; anything else is
`Unsupported` (a graph break), never a guess.
"""
from __future__ import annotations

import collections.abc
import copy
import functools
import inspect
import logging
import operator
import types
import weakref

import torch
from tracetorch.compiler.frontend import dispatch, numpy_calls, private_objects, stdlib_calls
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.attributes import object_dict_lookup
from tracetorch.compiler.frontend.builder import _CONSTANT_TYPES
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.exceptions import raise_new, reraise
from tracetorch.compiler.frontend.inline import _is_stdlib
from tracetorch.compiler.frontend.iterators import drain, fold_result, set_binary, view_constant, view_items
from tracetorch.compiler.frontend.members import guard_class_function
from tracetorch.compiler.frontend.source import AttrSource, CallSource, GetItemSource
from tracetorch.compiler.frontend.stdlib_calls import _python_value, missing_key
from tracetorch.compiler.frontend.symbolic import graph_value, record, specialize

from tracetorch import logs

log = logs.get_logger(__name__)

BINARY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
    ">>": operator.rshift,
}
INPLACE_OPS = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
               ">": operator.gt, ">=": operator.ge}
UNARY_OPS = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert}
_SAFE_CONST_TYPES = (int, float, bool, str, complex, type(None), tuple, torch.dtype,
                     torch.device, range, slice, bytes, torch.Size)


@dispatch.binary_op.default
def binary_op(tx, symbol, a, b):
    inplace = symbol in INPLACE_OPS
    fn = INPLACE_OPS.get(symbol) or BINARY_OPS.get(symbol)
    if fn is None:
        raise Unsupported(f"binary operator {symbol}")
    if isinstance(a, V.NDArrayVariable) or isinstance(b, V.NDArrayVariable):
        return numpy_calls.operator_call(tx, symbol, [a, b])
    if graph_value(a) or graph_value(b):
        if isinstance(a, V.TensorVariable) or isinstance(b, V.TensorVariable):
            other = b if isinstance(a, V.TensorVariable) else a
            if not (graph_value(other) or other.is_constant()):
                raise Unsupported(f"operator {symbol} between a tensor and {other!r}")
        if inplace and not isinstance(a, V.TensorVariable):
            fn = BINARY_OPS[symbol[:-1]]
        if symbol.rstrip("=") in ("//", "%") and isinstance(a, V.SymNodeVariable) \
                and not isinstance(b, V.TensorVariable) \
                and not (b.is_constant() and isinstance(b.as_constant(), int) and b.as_constant() > 0):
            # symbolic floor division / modulo by a divisor that may be negative: the ShapeEnv
            # rewrites (a // b) // c to a // (b * c), which only holds for positive divisors,
            # so Python's answer is computed on the values (guarded), not symbolically
            a, b = specialize(tx, a), specialize(tx, b)
            if a.is_constant() and b.is_constant():
                return _const_apply(fn, a.as_constant(), b.as_constant())
        return record(tx, fn, (a, b))
    if a.is_constant() and b.is_constant():
        return _const_apply(fn, a.as_constant(), b.as_constant())
    # sequences: concatenation and repetition
    base = BINARY_OPS.get(symbol.rstrip("=")) if symbol != "==" else None
    if base is operator.add:        # a constant tuple (`all_hidden = ()`) meets a symbolic one
        a, b = [V.TupleVariable([V.ConstantVariable(i) for i in x.as_constant()])
                if x.is_constant() and type(x.as_constant()) is tuple
                and isinstance(y, V.TupleVariable) else x for x, y in ((a, b), (b, a))]
    if isinstance(a, V.BaseListVariable) and isinstance(b, V.BaseListVariable) and base is operator.add:
        if type(a) is type(b) or (isinstance(a, V.TupleVariable) and isinstance(b, V.TupleVariable)):
            if inplace and isinstance(a, V.ListVariable):
                tx.ctx.side_effects.mutate(tx, a)
                a.items.extend(b.items)
                return a
            joined = a.items + b.items
            return V.SizeVariable(joined) if isinstance(a, V.SizeVariable) else type(a)(joined)
    if isinstance(a, V.ListVariable) and inplace and base is operator.add and isinstance(b, V.Variable):
        tx.ctx.side_effects.mutate(tx, a)
        a.items.extend(dispatch.unpack(tx, b))
        return a
    out = set_binary(tx, symbol, a, b)
    if out is not None:
        return out
    op = _BINARY_DUNDERS.get(symbol.rstrip("=")) if symbol not in ("==", "!=", "<=", ">=") else None
    if op is not None and any(isinstance(x, (V.NewObjectVariable, V.UserObjectVariable)) for x in (a, b)):
        # a Python operator method of the object's class: __iop__ first for `a op= b`
        got = _dunder_call(tx, (f"__i{op}__", None), a, b) if inplace else None
        if got is None:
            got = _dunder_call(tx, (f"__{op}__", f"__r{op}__"), a, b)
        if got is not None:
            return got
    if isinstance(a, V.BaseListVariable) and b.is_constant() and base is operator.mul:
        n = b.as_constant()
        if isinstance(n, int):
            return type(a)(a.items * n) if not isinstance(a, V.SizeVariable) else V.SizeVariable(a.items * n)
    raise Unsupported(f"operator {symbol} on {a!r} and {b!r}")


def _const_apply(fn, *args):
    try:
        result = fn(*args)
    except Exception as e:
        reraise(e, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__} on constants")
    return fold_result(result)


@dispatch.unary_op.default
def unary_op(tx, name, a):
    fn = UNARY_OPS[name]
    if isinstance(a, V.NDArrayVariable):
        return numpy_calls.operator_call(tx, name, [a])
    if graph_value(a):
        return record(tx, fn, (a,))
    if a.is_constant():
        return _const_apply(fn, a.as_constant())
    raise Unsupported(f"unary {name} on {a!r}")


@dispatch.compare_op.default
def compare_op(tx, symbol, a, b):
    if symbol in ("is", "is not"):
        same = identical(a, b)
        if same is None:
            raise Unsupported(f"'{symbol}' between {a!r} and {b!r}")
        return V.ConstantVariable(same if symbol == "is" else not same)
    fn = COMPARE_OPS[symbol]
    if isinstance(a, V.NDArrayVariable) or isinstance(b, V.NDArrayVariable):
        return numpy_calls.operator_call(tx, symbol, [a, b])
    if graph_value(a) or graph_value(b):
        return record(tx, fn, (a, b))
    if a.is_constant() and b.is_constant():
        return _const_apply(fn, a.as_constant(), b.as_constant())
    if symbol in ("==", "!=") and isinstance(a, V.ConstantVariable) != isinstance(b, V.ConstantVariable):
        # e.g. `x.dtype == torch.float32` where one side is a wrapped constant
        pass
    objects = (V.NNModuleVariable, V.UserObjectVariable)
    if isinstance(a, objects) or isinstance(b, objects):
        same = identical(a, b)
        if same is not None and symbol in ("==", "!=") and _default_eq(a) and _default_eq(b):
            return V.ConstantVariable(same if symbol == "==" else not same)
    values = _plain_values(a, b)
    if values is not None:        # containers of constants compare by value, as in CPython
        return _const_apply(fn, *values)
    dunder = _dunder_call(tx, _COMPARE_DUNDERS.get(symbol), a, b)
    if dunder is not None:
        return dunder
    raise Unsupported(f"comparison {symbol} between {a!r} and {b!r}")


_PLAIN_CONTAINERS = (V.ListVariable, V.TupleVariable, V.SetVariable, V.DictVariable)
_COMPARE_DUNDERS = {"==": ("__eq__", "__eq__"), "!=": ("__ne__", "__ne__"), "<": ("__lt__", "__gt__"),
                    ">": ("__gt__", "__lt__"), "<=": ("__le__", "__ge__"), ">=": ("__ge__", "__le__")}
_BINARY_DUNDERS = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv",
                   "%": "mod", "**": "pow", "@": "matmul", "&": "and", "|": "or", "^": "xor",
                   "<<": "lshift", ">>": "rshift"}


def _plain_values(a, b):
    """(a, b) as real values when both are constants or plain containers of constants (made in
    the frame or guarded), else None."""
    if not (isinstance(a, _PLAIN_CONTAINERS) or isinstance(b, _PLAIN_CONTAINERS)):
        return None
    try:
        return tuple(_plain(v, _python_value) for v in (a, b))
    except Unsupported:
        return None


def _plain(v, convert):
    if isinstance(v, V.SetVariable):
        return set(v.values)
    if type(v) is V.DictVariable and v.dict_cls is dict:
        return {k: _plain(x, convert) for k, x in v.items.items()}
    if isinstance(v, V.LazyListVariable):
        return [_plain(x, convert) for x in v.items]
    return convert(v)


def _dunder_call(tx, names, a, b):
    """a OP b where a (or, reflected, b) is an object made in the frame or a pre-existing one
    whose class defines the operator in Python: the method inlined, NotImplemented honoured."""
    if names is None:
        return None
    for obj, other, name in ((a, b, names[0]), (b, a, names[1])):
        if name is None or not isinstance(obj, (V.NewObjectVariable, V.UserObjectVariable)):
            continue
        cls = obj.python_type()
        method = inspect.getattr_static(cls, name, None)
        if not isinstance(method, types.FunctionType):
            continue
        out = dispatch.inline_call(tx, V.UserFunctionVariable(method), [obj, other], {})
        if out.is_constant() and out.as_constant() is NotImplemented:
            continue
        return out
    return None


def _default_eq(v):
    value = getattr(v, "value", None)
    return value is not None and type(value).__eq__ is object.__eq__


def identical(a, b):
    """`a is b` when it can be decided at trace time, else None."""
    if a is b:
        return True
    if isinstance(a, V.ConstantVariable) and isinstance(b, V.ConstantVariable):
        return a.value is b.value
    if isinstance(a, (V.ConstantVariable, V.BuiltinVariable, V.TorchFunctionVariable)) and \
            isinstance(b, (V.ConstantVariable, V.BuiltinVariable, V.TorchFunctionVariable)):
        return a.as_constant() is b.as_constant()     # fixed objects: `type(d) is dict`
    real = (V.NNModuleVariable, V.UserObjectVariable, V.PythonModuleVariable)
    if isinstance(a, real) and isinstance(b, real):
        return a.value is b.value
    fns = (V.UserFunctionVariable, V.BuiltinVariable, V.TorchFunctionVariable)
    if isinstance(a, fns) and isinstance(b, fns):
        if getattr(a, "by_code", False) or getattr(b, "by_code", False):
            # closures guarded by code, not identity: only the same source is the same object
            same_src = a.source is not None and b.source is not None and a.source.name() == b.source.name()
            return True if same_src else None
        return a.fn is b.fn     # functions are fixed objects (guarded by id where sourced)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, V.ConstantVariable) and x.value is None:
            if isinstance(y, (V.TensorVariable, V.BaseListVariable, V.DictVariable,
                              V.NNModuleVariable, V.UserFunctionVariable, V.SymNodeVariable,
                              V.NestedFunctionVariable, V.MethodVariable, V.UserMethodVariable)):
                return False
            if isinstance(y, V.UserObjectVariable):
                return False
    if isinstance(a, V.TensorVariable) and isinstance(b, V.TensorVariable):
        # in-place ops return their input: the fake tensors tell object identity. Two
        # different inputs are the same object only under the aliasing guard output_graph
        # adds; that they differ is not guarded, so it is not decided here.
        if a.node is b.node or a.example is b.example:
            return True
        if a.node.op == "placeholder" and b.node.op == "placeholder":
            return None
        return False
    if isinstance(a, V.TensorVariable) != isinstance(b, V.TensorVariable):
        other = b if isinstance(a, V.TensorVariable) else a
        if other.is_constant():
            return False
    if type(a) is not type(b) and all(isinstance(x, (V.BaseListVariable, V.DictVariable)) for x in (a, b)):
        return False
    fresh = (V.ListVariable, V.DictVariable, V.SetVariable, V.NewObjectVariable)
    if isinstance(a, fresh) and isinstance(b, fresh) and (a.source is None or b.source is None):
        return False        # two distinct Variables, one made in the frame: distinct objects
    return None


@dispatch.truthiness.default
def truthiness(tx, v) -> bool:
    """bool(v) at trace time; a tensor's truth is data: a graph break (eager decides)."""
    if isinstance(v, V.TensorVariable):
        raise Unsupported("bool() of a tensor (data-dependent control flow)")
    if isinstance(v, V.SymNodeVariable):
        try:
            return bool(v.example)   # guards the shape env on the hint, like Dynamo
        except Exception as e:
            raise Unsupported(f"data-dependent branch on a symbolic value: {e}") from None
    if v.is_constant():
        return bool(v.as_constant())
    if isinstance(v, (V.BaseListVariable,)):
        return len(v.items) > 0
    if isinstance(v, (V.DictVariable, V.ModelOutputVariable)):
        return len(v.items) > 0
    if isinstance(v, V.SetVariable):
        return len(v.values) > 0
    if isinstance(v, V.DictViewVariable):
        return len(v.dict.items) > 0
    if isinstance(v, (V.LazyIteratorVariable, V.ListIteratorVariable)):
        return True
    if isinstance(v, (V.NNModuleVariable, V.UserFunctionVariable, V.NestedFunctionVariable,
                      V.BuiltinVariable, V.TorchFunctionVariable, V.PythonModuleVariable,
                      V.MethodVariable, V.UserMethodVariable)):
        if isinstance(v, V.NNModuleVariable) and hasattr(type(v.value), "__len__"):
            return len(v.value) > 0
        return True
    if isinstance(v, V.UserObjectVariable):
        cls = type(v.value)
        if not hasattr(cls, "__bool__") and not hasattr(cls, "__len__"):
            return True
        if v.source is not None:
            # Python __bool__/__len__ (a cache's len()): traced on the pre-existing object
            return _new_object_truth(tx, v, cls)
    if isinstance(v, V.NewObjectVariable) and not isinstance(v, V.NewModuleVariable):
        return _new_object_truth(tx, v)
    raise Unsupported(f"bool() of {v!r}")


def _new_object_truth(tx, v, cls=None):
    """bool() of an object made in the frame (or a sourced one): its class's Python __bool__,
    else __len__ != 0, else True (CPython's order)."""
    cls = cls if cls is not None else v.cls
    for name in ("__bool__", "__len__"):
        impl = inspect.getattr_static(cls, name, None)
        if impl is None:
            continue
        if not isinstance(impl, types.FunctionType):
            raise Unsupported(f"bool() of {v!r}: {name} is not Python code")
        result = specialize(tx, dispatch.call_function(tx, dispatch.get_attr(tx, v, name), [], {}))
        if not result.is_constant():
            raise Unsupported(f"bool() of {v!r}: {name} returned {result!r}")
        return bool(result.as_constant()) if name == "__bool__" else result.as_constant() != 0
    return True


@dispatch.contains_op.default
def contains_op(tx, item, container) -> bool:
    item = specialize(tx, item)        # `n in (1, 2)` needs n's value (guarded), as Dynamo
    if isinstance(container, (V.BaseListVariable,)):
        if not item.is_constant() or not all(i.is_constant() for i in container.items):
            raise Unsupported("'in' on a sequence of non-constants")
        return item.as_constant() in [i.as_constant() for i in container.items]
    if isinstance(container, V.SetVariable):
        if not item.is_constant():
            raise Unsupported("'in' on a set with a non-constant")
        return item.as_constant() in container.values
    if isinstance(container, V.DictVariable) or (isinstance(container, V.DictViewVariable)
                                                  and container.kind == "keys"):
        items = container.items if isinstance(container, V.DictVariable) else container.dict.items
        if not item.is_constant():
            raise Unsupported("'in' on a dict with a non-constant key")
        return item.as_constant() in items
    if isinstance(container, V.DictViewVariable):
        if not item.is_constant():
            raise Unsupported("'in' on a dict view with a non-constant")
        return item.as_constant() in view_constant(container)
    if isinstance(container, V.ModelOutputVariable) and item.is_constant():
        return item.as_constant() in container.items
    if isinstance(container, V.UserObjectVariable) and container.source is not None \
            and item.is_constant() and type(item.as_constant()) in (str, int) \
            and type(container.value).__contains__ is collections.abc.Mapping.__contains__:
        # a Mapping whose `in` is "self[key] does not raise KeyError": asked now, and the
        # answer guarded by asking again (e.g. Hugging Face's attention-function registries)
        found = item.as_constant() in container.value
        expr = f"{item.as_constant()!r} {'in' if found else 'not in'} {container.source.name()}"
        tx.output.add_guard(expr, "SYMBOLIC", expr)
        return found
    if isinstance(container, V.ObjectDictVariable):
        return object_dict_lookup(tx, container, item)[0]
    if container.is_constant() and item.is_constant():
        return item.as_constant() in container.as_constant()
    raise Unsupported(f"'in' with {container!r}")


@dispatch.unpack.default
def unpack(tx, v) -> list:
    """The items of an iterable with a known, finite length."""
    if isinstance(v, V.BaseListVariable):
        return list(v.items)
    if isinstance(v, (V.DictVariable, V.ModelOutputVariable)):
        return [V.ConstantVariable(k) for k in v.items]
    if isinstance(v, V.SetVariable):
        return [V.ConstantVariable(k) for k in v.values]
    if isinstance(v, V.IteratorVariable):
        items = v.remaining()
        v.index = len(v.items)
        return items
    if isinstance(v, (V.LazyIteratorVariable, V.ListIteratorVariable)):
        return drain(tx, v)
    if isinstance(v, V.DictViewVariable):
        return view_items(v)
    if isinstance(v, V.NNModuleVariable):
        m = v.value
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ParameterList)):
            tx.output.add_guard(v.source, "LENGTH_CHECK", len(m))
            return [dispatch.wrap(tx, sub, GetItemSource(v.source, i)) for i, sub in enumerate(m)]
        if isinstance(m, (torch.nn.ModuleDict, torch.nn.ParameterDict)):
            tx.output.add_guard(f"list({v.source.name()}.keys())", "CONSTANT_MATCH", list(m.keys()))
            return [V.ConstantVariable(k) for k in m.keys()]
        raise Unsupported(f"iteration over {type(m).__name__}")
    if isinstance(v, V.TensorVariable):
        ex = v.example
        if ex.dim() == 0:
            raise Unsupported("iteration over a 0-d tensor")
        n = ex.shape[0]
        if not isinstance(n, int):
            raise Unsupported("iteration over a tensor with a dynamic first dim")
        return [record(tx, operator.getitem, (v, V.ConstantVariable(i))) for i in range(n)]
    if v.is_constant():
        value = v.as_constant()
        try:
            return [V.ConstantVariable(x) for x in value]
        except TypeError:
            raise Unsupported(f"iteration over {type(value).__name__}") from None
    if isinstance(v, V.NewObjectVariable) and \
            getattr(v.cls, "__iter__", None) is collections.abc.Sequence.__iter__:
        return _unpack_sequence(tx, v)
    raise Unsupported(f"iteration over {v!r}")


def _unpack_sequence(tx, v):
    """A collections.abc.Sequence made in the frame (its mixin __iter__ reads self[0],
    self[1], ... until IndexError): its own __len__ and __getitem__ traced, index by index."""
    n = specialize(tx, dispatch.call_function(tx, dispatch.get_attr(tx, v, "__len__"), [], {}))
    if not n.is_constant() or not isinstance(n.as_constant(), int):
        raise Unsupported(f"iteration over {v!r} of unknown length")
    log.debug("iterate_sequence_object", cls=v.cls.__qualname__, length=n.as_constant())
    getitem = dispatch.get_attr(tx, v, "__getitem__")
    return [dispatch.call_function(tx, getitem, [V.ConstantVariable(i)], {}) for i in range(n.as_constant())]


@dispatch.get_iter.default
def get_iter(tx, v):
    if isinstance(v, (V.IteratorVariable, V.LazyIteratorVariable, V.ListIteratorVariable)):
        return v
    if type(v) in (V.ListVariable, V.LazyListVariable):
        return V.ListIteratorVariable(v)      # live: sees the list change while looping
    return V.IteratorVariable(dispatch.unpack(tx, v))


@dispatch.get_item.default
def get_item(tx, obj, key):
    if isinstance(obj, V.TensorVariable):
        if not (key.is_constant() or graph_value(key) or _index_ok(key)):
            raise Unsupported(f"tensor indexing with {key!r}")
        return record(tx, operator.getitem, (obj, key))
    if isinstance(obj, V.NamedTupleVariable) and \
            isinstance(inspect.getattr_static(obj.tuple_cls, "__getitem__", None), types.FunctionType):
        # a namedtuple subclass with its own __getitem__: inlined
        return dispatch.inline_call(tx, V.UserFunctionVariable(obj.tuple_cls.__getitem__), [obj, key], {})
    if isinstance(obj, (V.BaseListVariable, V.DictVariable, V.NNModuleVariable, V.ConstantVariable)):
        key = specialize(tx, key)
    if isinstance(obj, V.BaseListVariable):
        if isinstance(key, V.ConstantVariable):
            k = key.value
            try:
                if isinstance(k, slice):
                    items = obj.items[k]
                    if isinstance(obj, V.SizeVariable):
                        return V.SizeVariable(items)
                    return (V.ListVariable if isinstance(obj, V.ListVariable) else V.TupleVariable)(items)
                return obj.items[k]
            except IndexError:
                if type(obj) in (V.ListVariable, V.TupleVariable) and isinstance(k, int):
                    raise_new(IndexError, f"{'list' if type(obj) is V.ListVariable else 'tuple'} "
                                          "index out of range")
                raise Unsupported(f"index {k!r} out of range for {obj!r}") from None
            except TypeError:
                raise Unsupported(f"index {k!r} out of range for {obj!r}") from None
        raise Unsupported(f"subscript of a sequence with {key!r}")
    if isinstance(obj, V.DictVariable):
        if key.is_constant() and key.as_constant() in obj.items:
            return obj.items[key.as_constant()]
        if key.is_constant():
            value = missing_key(tx, obj, key)          # a defaultdict's factory
            if value is not None:
                return value
            if obj.dict_cls in (dict, collections.OrderedDict):
                raise_new(KeyError, key.as_constant())
        raise Unsupported(f"dict lookup with {key!r}")
    if isinstance(obj, V.NNModuleVariable):
        if key.is_constant() and isinstance(obj.value, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)):
            k = key.as_constant()
            try:
                sub = obj.value[k]
            except (IndexError, KeyError, TypeError):
                raise Unsupported(f"module index {k!r}") from None
            if isinstance(sub, torch.nn.Module) and not isinstance(k, slice):
                return dispatch.wrap(tx, sub, GetItemSource(obj.source, k))
            if isinstance(k, slice) and isinstance(obj.value, (torch.nn.ModuleList, torch.nn.Sequential)):
                tx.output.add_guard(obj.source, "LENGTH_CHECK", len(obj.value))
                picked = range(len(obj.value))[k]
                return V.ModuleSliceVariable(
                    [dispatch.wrap(tx, obj.value[i], GetItemSource(obj.source, i)) for i in picked],
                    type(obj.value))
        raise Unsupported(f"subscript of module {obj!r}")
    if isinstance(obj, V.ObjectDictVariable):
        return dispatch.call_method(tx, obj, "__getitem__", [key], {})
    if isinstance(obj, (V.UserObjectVariable, V.NewObjectVariable)):
        method = getattr(obj.python_type(), "__getitem__", None)
        if isinstance(method, types.FunctionType):     # a Python __getitem__: inlined
            return dispatch.inline_call(tx, V.UserFunctionVariable(method), [obj, key], {})
    if obj.is_constant() and key.is_constant():
        return _const_apply(operator.getitem, obj.as_constant(), key.as_constant())
    raise Unsupported(f"subscript of {obj!r}")


def _index_ok(key):
    if isinstance(key, V.SliceVariable):
        return True
    if isinstance(key, V.TupleVariable):
        # x[..., [-2], :]: a list of constant indices inside the tuple is advanced indexing
        return all(i.is_constant() or graph_value(i) or isinstance(i, V.SliceVariable)
                   or (isinstance(i, V.ListVariable) and _index_ok(i)) for i in key.items)
    if isinstance(key, V.ListVariable):
        return all(i.is_constant() for i in key.items)
    return False


@dispatch.store_item.default
def store_item(tx, obj, key, value):
    if isinstance(obj, V.TensorVariable):
        if not (key.is_constant() or graph_value(key) or _index_ok(key)):
            raise Unsupported(f"tensor index assignment with {key!r}")
        if not (graph_value(value) or value.is_constant()):
            raise Unsupported(f"tensor index assignment of {value!r}")
        record(tx, operator.setitem, (obj, key, value))
        return
    if isinstance(obj, V.ListVariable) and key.is_constant():
        tx.ctx.side_effects.mutate(tx, obj)
        k = key.as_constant()
        try:
            if isinstance(k, slice):
                obj.items[k] = dispatch.unpack(tx, value)
            else:
                obj.items[k] = value
        except (IndexError, TypeError, ValueError):
            raise Unsupported(f"list assignment at {k!r}") from None
        return
    if isinstance(obj, V.DictVariable) and key.is_constant():
        tx.ctx.side_effects.mutate(tx, obj)
        obj.items[key.as_constant()] = value
        return
    raise Unsupported(f"item assignment on {obj!r}")


def _real_callable(v):
    """The Python callable a function-like Variable stands for (its signature is fixed)."""
    if isinstance(v, (V.UserFunctionVariable, V.BuiltinVariable, V.TorchFunctionVariable)):
        return v.fn
    if isinstance(v, V.UserMethodVariable) and hasattr(v.obj, "value"):
        return types.MethodType(v.fn, v.obj.value)
    if isinstance(v, V.NNModuleVariable):
        return v.value
    raise Unsupported(f"inspect.signature of {v!r}")


def _mapping_get_now(tx, obj, args, kwargs):
    """Mapping.get(key[, default]) with a constant key on a pre-existing mapping (os.environ,
    a registry): whether the key is there is asked now and guarded; a Python __getitem__ of
    user code is inlined, else a constant value is read now and guarded by reading it again."""
    if kwargs or not 1 <= len(args) <= 2 or not args[0].is_constant() \
            or type(args[0].as_constant()) not in (str, int):
        raise Unsupported(f"Mapping.get on {obj!r} with a non-constant key")
    key = args[0].as_constant()
    found = key in obj.value
    expr = f"{key!r} {'in' if found else 'not in'} {obj.source.name()}"
    tx.output.add_guard(expr, "SYMBOLIC", expr)
    if not found:
        return args[1] if len(args) > 1 else V.ConstantVariable(None)
    getitem = type(obj.value).__getitem__
    if isinstance(getitem, types.FunctionType) and not _is_stdlib(getitem.__code__.co_filename):
        return dispatch.inline_call(tx, V.UserFunctionVariable(getitem), [obj, args[0]], {})
    value = obj.value[key]
    if type(value) not in _CONSTANT_TYPES:
        raise Unsupported(f"Mapping.get on {obj!r} returned a {type(value).__name__}")
    tx.output.add_guard(f"{obj.source.name()}[{key!r}]", "CONSTANT_MATCH", value)
    return V.ConstantVariable(value)


# ---- calls, by the callee's kind (builtins, torch functions, methods of values, numpy
# functions, modules and fresh modules register theirs in their own modules) ----------------
@dispatch.call_function.default
def _not_callable(tx, fn, args, kwargs):
    raise Unsupported(f"call to {fn!r}")


@dispatch.call_function.register(V.UserFunctionVariable)
def _call_user_function(tx, fn, args, kwargs):
    if hasattr(fn.fn, "_tracetorch_cache") and isinstance(getattr(fn.fn, "__wrapped__", None), types.FunctionType):
        # a compiler.compile'd function called from traced code: its original is inlined (the
        # wrapper's cache lookup is runtime machinery), as Dynamo inlines a torch.compile'd one
        src = AttrSource(fn.source, "__wrapped__") if fn.source is not None else None
        return dispatch.inline_call(tx, V.UserFunctionVariable(fn.fn.__wrapped__, src), args, kwargs)
    if fn.fn is inspect.signature and len(args) == 1 and not kwargs:
        return V.ConstantVariable(inspect.signature(_real_callable(args[0])))
    if fn.fn in _SPECIAL_FUNCTIONS:
        return _SPECIAL_FUNCTIONS[fn.fn](tx, args, kwargs)
    if fn.fn in stdlib_calls.STDLIB_PURE:
        return stdlib_calls.call_pure(tx, fn.fn, args, kwargs)
    if fn.fn in stdlib_calls.STDLIB_HANDLERS:
        return stdlib_calls.STDLIB_HANDLERS[fn.fn](tx, args, kwargs)
    if fn.fn in stdlib_calls.STDLIB_POLYFILLS:
        log.debug("polyfill_inlined", function=fn.fn.__qualname__)
        return dispatch.inline_call(tx, V.UserFunctionVariable(stdlib_calls.STDLIB_POLYFILLS[fn.fn]),
                                    args, kwargs)
    return dispatch.inline_call(tx, fn, args, kwargs)


@dispatch.call_function.register(V.NestedFunctionVariable)
def _call_nested_function(tx, fn, args, kwargs):
    return dispatch.inline_call(tx, fn, args, kwargs)


@dispatch.call_function.register(V.UserMethodVariable)
def _call_user_method(tx, fn, args, kwargs):
    if fn.fn is collections.abc.Mapping.get and isinstance(fn.obj, V.UserObjectVariable) \
            and fn.obj.source is not None:
        return _mapping_get_now(tx, fn.obj, args, kwargs)
    deferred = _logging_call(tx, fn, args, kwargs)
    if deferred is not None:
        return deferred
    if fn.fn in _SPECIAL_METHODS:
        return _SPECIAL_METHODS[fn.fn](tx, fn, args, kwargs)
    return dispatch.inline_call(tx, V.UserFunctionVariable(fn.fn), [fn.obj] + list(args), kwargs,
                                callee=fn)


@dispatch.call_function.register(V.PartialVariable)
def _call_partial(tx, fn, args, kwargs):
    deferred = _logging_call(tx, fn, args, kwargs)
    if deferred is not None:
        return deferred
    return dispatch.call_function(tx, fn.fn, fn.args + list(args), {**fn.kwargs, **kwargs})


@dispatch.call_function.register(V.ContextExitVariable)
def _call_context_exit(tx, fn, args, kwargs):
    ctx = fn.ctx
    if ctx.prior is not None and ctx.prior != tx.output.grad_enabled:
        tx.output.record_grad_mode(ctx.prior)
    return V.ConstantVariable(None)


@dispatch.call_function.register(V.ConstantVariable)
def _call_constant(tx, fn, args, kwargs):
    if isinstance(fn.value, type):
        return dispatch.call_type(tx, fn.value, args, kwargs)
    if type(fn.value) in stdlib_calls.CALLABLE_CONSTANTS:
        return stdlib_calls.CALLABLE_CONSTANTS[type(fn.value)](tx, fn.value, args, kwargs)
    return _not_callable(tx, fn, args, kwargs)


@dispatch.call_function.register(V.WeakRefVariable)
def _call_weakref(tx, fn, args, kwargs):
    if args or kwargs:
        return _not_callable(tx, fn, args, kwargs)
    return fn.target


@dispatch.call_function.register(V.NewObjectVariable)
def _call_new_object(tx, fn, args, kwargs):
    return dispatch.call_function(tx, dispatch.get_attr(tx, fn, "__call__"), args, kwargs)


@dispatch.call_function.register(V.UserObjectVariable)
def _call_user_object(tx, fn, args, kwargs):
    if isinstance(fn.value, functools.partial) and type(fn.value) is functools.partial:
        p = fn.value
        inner = dispatch.wrap(tx, p.func, AttrSource(fn.source, "func"))
        pargs = dispatch.wrap(tx, p.args, AttrSource(fn.source, "args"))
        pkw = dispatch.wrap(tx, p.keywords, AttrSource(fn.source, "keywords"))
        return dispatch.call_function(tx, inner, pargs.items + list(args), {**pkw.items, **kwargs})
    if type(fn.value) is weakref.ReferenceType and not args and not kwargs:
        target = fn.value()
        if target is None:
            # dead now, dead for good: unless the weakref at the source is replaced (guarded)
            tx.output.add_guard(f"{fn.source.name()}() is None", "SYMBOLIC",
                                f"{fn.source.name()}() is None")
            return V.ConstantVariable(None)
        return dispatch.wrap(tx, target, CallSource(fn.source))
    if type(fn.value) in _CALLABLE_OBJECTS:
        return _CALLABLE_OBJECTS[type(fn.value)](tx, fn, args, kwargs)
    call = getattr(type(fn.value), "__call__", None)
    if isinstance(call, types.FunctionType):
        guard_class_function(tx, fn, "__call__", call)
        return dispatch.inline_call(tx, V.UserFunctionVariable(call), [fn] + list(args), kwargs)
    return _not_callable(tx, fn, args, kwargs)


def _call_cached_function(tx, fn, args, kwargs):
    """A functools.lru_cache/cache wrapper: the wrapped function is traced (as Dynamo does);
    the cache itself is not consulted or filled, so the function must not depend on its
    cache for correctness (a pure helper, the case the decorator is made for)."""
    wrapped = fn.value.__wrapped__
    log.debug("inline_lru_cache_wrapper", function=getattr(wrapped, "__qualname__", repr(wrapped)))
    src = AttrSource(fn.source, "__wrapped__") if fn.source is not None else None
    inner = dispatch.wrap(tx, wrapped, src) if src is not None else V.UserFunctionVariable(wrapped)
    if not isinstance(inner, V.UserFunctionVariable):
        raise Unsupported(f"lru_cache around {type(wrapped).__name__}")
    return dispatch.inline_call(tx, inner, args, kwargs)


class _InferenceFunctionCtx:
    """The ctx an autograd.Function's forward gets when no gradient can flow: what it saves
    for backward is never read."""

    def save_for_backward(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


_APPLIERS = {}


def _function_applier(cls):
    """A plain function calling cls.apply (an FX target with a name of its own)."""
    applier = _APPLIERS.get(cls)
    if applier is None:
        def applier(*args):
            return cls.apply(*args)
        applier.__name__ = applier.__qualname__ = f"autograd_function_apply_{cls.__name__}"
        _APPLIERS[cls] = applier
    return applier


def _autograd_function_apply(tx, fn, args, kwargs):
    """SomeFunction.apply(*args): with gradients off, or no input that requires one, apply
    computes forward(ctx, *args) and nothing else, so forward is traced. A Function whose
    backward could run is a graph break (its backward is not captured)."""
    cls = fn.obj.as_constant() if fn.obj.is_constant() else None
    forward = inspect.getattr_static(cls, "forward", None) if isinstance(cls, type) else None
    if not isinstance(forward, staticmethod) or not isinstance(forward.__func__, types.FunctionType):
        raise Unsupported(f"autograd.Function {getattr(cls, '__name__', cls)} without a Python "
                          "staticmethod forward")
    needs_grad = tx.output.grad_enabled and any(
        isinstance(a, V.TensorVariable) and a.example.requires_grad
        for a in list(args) + list(kwargs.values()))
    if needs_grad:
        # one opaque node that calls apply: the graph runs the Function itself, so autograd
        # (or AOT autograd tracing the joint graph through it) uses its own backward
        if kwargs or not all(isinstance(a, V.TensorVariable) or a.is_constant() for a in args):
            raise Unsupported(f"autograd.Function {cls.__name__}.apply with arguments that are "
                              "not tensors or constants (with gradients)")
        log.debug("autograd_function_node", function=cls.__qualname__,
                  reason="an input requires grad: apply recorded as one node")
        return record(tx, _function_applier(cls), tuple(args))
    default_setup = torch.autograd.function._SingleLevelFunction.setup_context
    ctx_args = [] if cls.setup_context is not default_setup else \
        [V.NewObjectVariable(_InferenceFunctionCtx)]
    log.debug("autograd_function_forward_inlined", function=cls.__qualname__,
              reason="no input requires grad")
    return dispatch.inline_call(tx, V.UserFunctionVariable(forward.__func__),
                              ctx_args + list(args), kwargs)


def _logging_call(tx, fn, args, kwargs):
    """logger.warning(...)/logger.warning_once(...) with constant arguments: deferred, called
    for real after the graph (Dynamo's reorderable logging functions) instead of a break;
    a cached method (warning_once) keeps its once-only behaviour since its cache is used."""
    if isinstance(fn, V.PartialVariable) and len(fn.args) == 1 and not fn.kwargs \
            and isinstance(fn.fn, V.UserObjectVariable) \
            and type(fn.fn.value) is functools._lru_cache_wrapper:
        owner, target = fn.args[0], fn.fn.value
    elif isinstance(fn, V.UserMethodVariable) and fn.fn.__module__ == "logging":
        owner, target = fn.obj, fn.fn
    else:
        return None
    if not (isinstance(owner, V.UserObjectVariable) and isinstance(owner.value, logging.Logger)):
        return None
    if not all(a.is_constant() for a in list(args) + list(kwargs.values())):
        return None
    call = functools.partial(target, owner.value, *[a.as_constant() for a in args],
                             **{k: v.as_constant() for k, v in kwargs.items()})
    log.debug("deferred_logging_call", function=getattr(target, "__qualname__", repr(target)),
              logger=owner.value.name)
    tx.ctx.side_effects.record_call(call)
    return V.ConstantVariable(None)


def _deepcopy(tx, args, kwargs):
    return private_objects.deepcopy(tx, args, kwargs)


# functions whose call is handled here rather than inlined, by the function object
_SPECIAL_FUNCTIONS = {
    copy.deepcopy: _deepcopy,
}


# methods whose call is traced by a handler of their own, by the function object
_SPECIAL_METHODS = {
    torch.autograd.Function.apply.__func__: _autograd_function_apply,
}


# callable objects whose call is traced by a handler of their own, by exact type
_CALLABLE_OBJECTS = {
    functools._lru_cache_wrapper: _call_cached_function,
}
