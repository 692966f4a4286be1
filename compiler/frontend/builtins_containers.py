"""Builtins that build, measure or walk containers and iterables: len (a table by the operand's
kind, dispatch.length), range, slice, list/tuple/set/frozenset/dict, reversed/iter/next, the lazy
map/zip/filter/enumerate (iterators.py), sum, min/max/sorted (with key=), any/all. Registered
into dispatch.BUILTINS; NOT_HANDLED leaves a call to builtin_calls' generic rules."""
from __future__ import annotations

import inspect
import types

import torch
from tracetorch.compiler.frontend import dispatch, iterators, symbolic
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.builtin_calls import const_value, consts, is_none
from tracetorch.compiler.frontend.data_ops import make_slice
from tracetorch.compiler.frontend.dispatch import NOT_HANDLED
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.exceptions import raise_new
from tracetorch.compiler.frontend.iterators import make_lazy
from tracetorch.compiler.frontend.source import LenSource


# ---- len(): by the operand's kind -----------------------------------------------------------
@dispatch.builtin(len)
def _len_builtin(tx, fn, args, kwargs):
    return dispatch.length(tx, args[0])


@dispatch.length.default
def _length(tx, v):
    if v.is_constant():
        return V.ConstantVariable(len(v.as_constant()))
    if isinstance(v, V.NewObjectVariable) and \
            isinstance(inspect.getattr_static(v.cls, "__len__", None), types.FunctionType):
        # an object made in the frame with a Python __len__: traced
        return dispatch.call_function(tx, dispatch.get_attr(tx, v, "__len__"), [], {})
    raise Unsupported(f"len() of {v!r}")


@dispatch.length.register(V.BaseListVariable, V.DictVariable, V.ModelOutputVariable)
def _length_items(tx, v):
    return V.ConstantVariable(len(v.items))


@dispatch.length.register(V.SetVariable)
def _length_set(tx, v):
    return V.ConstantVariable(len(v.values))


@dispatch.length.register(V.DictViewVariable)
def _length_view(tx, v):
    return V.ConstantVariable(len(v.dict.items))


@dispatch.length.register(V.TensorVariable)
def _length_tensor(tx, v):
    if v.example.dim() == 0:
        raise Unsupported("len() of a 0-d tensor")
    n = v.example.shape[0]
    if isinstance(n, int):
        return V.ConstantVariable(n)
    return symbolic.record(tx, torch.ops.aten.sym_size.int, (v, V.ConstantVariable(0)))


@dispatch.length.register(V.NNModuleVariable)
def _length_module(tx, v):
    if hasattr(v.value, "__len__"):
        return V.ConstantVariable(len(v.value))
    return _length(tx, v)


@dispatch.length.register(V.NDArrayVariable)
def _length_ndarray(tx, v):
    if v.scalar:
        return _length(tx, v)
    return dispatch.length(tx, v.tensor)     # an array's len() is its first dim, as a tensor's


@dispatch.length.register(V.RuntimeStrVariable)
def _length_runtime_str(tx, v):
    return tx.output.add_scalar_input(len(v.value), LenSource(v.source))


# ---- construction and iteration ---------------------------------------------------------------
@dispatch.builtin(range)
def _range(tx, fn, args, kwargs):
    args = [symbolic.specialize(tx, a) for a in args]
    if consts(args):
        return V.ConstantVariable(range(*[a.as_constant() for a in args]))
    raise Unsupported("range() with a symbolic bound")


@dispatch.builtin(slice)
def _slice(tx, fn, args, kwargs):
    return make_slice(list(args))


@dispatch.builtin(list)
def _list(tx, fn, args, kwargs):
    return V.ListVariable(dispatch.unpack(tx, args[0]) if args else [])


@dispatch.builtin(tuple)
def _tuple(tx, fn, args, kwargs):
    return V.TupleVariable(dispatch.unpack(tx, args[0]) if args else [])


@dispatch.builtin(set)
def _set(tx, fn, args, kwargs):
    return V.SetVariable(const_value(i) for i in (dispatch.unpack(tx, args[0]) if args else []))


@dispatch.builtin(frozenset)
def _frozenset(tx, fn, args, kwargs):
    items = dispatch.unpack(tx, args[0]) if args else []
    return V.ConstantVariable(frozenset(const_value(i) for i in items))


@dispatch.builtin(dict)
def _dict(tx, fn, args, kwargs):
    items = symbolic.mapping_items(tx, args[0], "dict()") if args else {}
    items.update(kwargs)
    return V.DictVariable(items)


@dispatch.builtin(reversed)
def _reversed(tx, fn, args, kwargs):
    return V.IteratorVariable(list(reversed(dispatch.unpack(tx, args[0]))))


@dispatch.builtin(iter)
def _iter(tx, fn, args, kwargs):
    return dispatch.get_iter(tx, args[0])


@dispatch.builtin(next)
def _next(tx, fn, args, kwargs):
    if not iterators.is_iterator(args[0]):
        raise Unsupported(f"next() of {args[0]!r}")
    item = iterators.iter_next(tx, args[0])
    if item is not None:
        return item
    if len(args) > 1:
        return args[1]
    raise_new(StopIteration)


# builtins whose result is a lazy iterator (iterators.py)
@dispatch.builtin(map)
def _lazy_map(tx, fn, args, kwargs):
    if len(args) < 2 or kwargs:
        raise Unsupported("map() needs a function and at least one iterable")
    return make_lazy(tx, "map", args[0], args[1:])


@dispatch.builtin(zip)
def _lazy_zip(tx, fn, args, kwargs):
    if set(kwargs) - {"strict"}:
        raise Unsupported(f"zip() with keywords {sorted(kwargs)}")
    strict = bool(kwargs["strict"].as_constant()) if "strict" in kwargs else False
    return make_lazy(tx, "zip", None, args, strict=strict)


@dispatch.builtin(filter)
def _lazy_filter(tx, fn, args, kwargs):
    if len(args) != 2 or kwargs:
        raise Unsupported("filter() takes a function (or None) and one iterable")
    pred = None if is_none(args[0]) else args[0]
    return make_lazy(tx, "filter", pred, args[1:])


@dispatch.builtin(enumerate)
def _lazy_enumerate(tx, fn, args, kwargs):
    start = args[1] if len(args) > 1 else kwargs.get("start", V.ConstantVariable(0))
    start = symbolic.specialize(tx, start)
    if not start.is_constant():
        raise Unsupported("enumerate() with a non-constant start")
    return make_lazy(tx, "enumerate", None, args[:1], start=start.as_constant())


# ---- reductions ---------------------------------------------------------------------------
@dispatch.builtin(sum)
def _sum(tx, fn, args, kwargs):
    if kwargs:
        return NOT_HANDLED         # sum(start=...) of constants: folded by the generic rules
    total = args[1] if len(args) > 1 else V.ConstantVariable(0)
    if not iterators.is_iterator(args[0]):
        for item in dispatch.unpack(tx, args[0]):
            total = dispatch.binary_op(tx, "+", total, item)
        return total
    # item by item: an item's __add__ (user code) runs before the next item is produced
    while True:
        item = iterators.iter_next(tx, args[0])
        if item is None:
            return total
        total = dispatch.binary_op(tx, "+", total, item)


@dispatch.builtin(min, max, sorted)
def _ordered(tx, fn, args, kwargs):
    if kwargs and set(kwargs) <= {"key", "default", "reverse"}:
        return _ordered_with_key(tx, fn, args, kwargs)
    if kwargs:
        return NOT_HANDLED
    if fn is sorted:
        if len(args) != 1:
            return NOT_HANDLED
        items = dispatch.unpack(tx, args[0])
        if not consts(items):
            return NOT_HANDLED     # sorted() of symbolic values: the generic rules decide
        try:
            return V.ListVariable([V.ConstantVariable(v) for v in
                                   sorted(i.as_constant() for i in items)])
        except TypeError:
            raise Unsupported("sorted() of values that do not compare") from None
    items = dispatch.unpack(tx, args[0]) if len(args) == 1 else list(args)
    if consts(items) and items:
        return V.ConstantVariable(fn(a.as_constant() for a in items))
    if all(isinstance(a, V.SymNodeVariable) or a.is_constant() for a in items) and len(items) == 2:
        return symbolic.record(tx, torch.sym_max if fn is max else torch.sym_min, items)
    raise Unsupported(f"{fn.__name__}() over tensors (Python comparison of data)")


def _ordered_with_key(tx, fn, args, kwargs):
    """min/max/sorted with key= / default= / reverse=: the key function is called (traced) on
    each item in order, as CPython does; the keys must be constants to be compared now."""
    items = dispatch.unpack(tx, args[0]) if len(args) == 1 else list(args)
    key = kwargs.get("key")
    if key is not None and is_none(key):
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


@dispatch.builtin(any, all)
def _any_all(tx, fn, args, kwargs):
    if len(args) != 1:
        return NOT_HANDLED
    if not iterators.is_iterator(args[0]):
        truths = [dispatch.truthiness(tx, i) for i in dispatch.unpack(tx, args[0])]
        return V.ConstantVariable(fn(truths))
    # an iterator is pulled one item at a time and left where CPython stops: at the first
    # true item (any) or false item (all), so a lazy producer's side effects stop there too
    while True:
        item = iterators.iter_next(tx, args[0])
        if item is None:
            return V.ConstantVariable(fn is all)
        if dispatch.truthiness(tx, item) == (fn is any):
            return V.ConstantVariable(fn is any)
