"""functools / itertools / operator / collections traced by their documented semantics.

These are C implementations (or stdlib Python the tracer does not inline), so each has a small
handler here, dispatched through tables (no per-call isinstance ladders):

  BUILTINS      C functions called with Variables: functools.reduce (registered with
                @dispatch.builtin, like the builtins of builtins_*.py).
  TYPES         classes instantiated in traced code: itertools.chain/count/islice/accumulate/
                zip_longest (lazy iterators, iterators.py), permutations/combinations/product/
                combinations_with_replacement (CPython materializes their input at creation,
                so do we), operator.itemgetter/attrgetter/methodcaller (real immutable objects
                made now from constant arguments), collections.deque/defaultdict/OrderedDict/
                Counter (symbolic containers).
  Counter       a DictVariable whose dict_cls is Counter: a missing key reads 0 (missing_key);
                its methods and operators are Python functions of ours, inlined (first-rules on
                dispatch.call_method / binary_op / unary_op), so they trace like user code.
  CALLABLE_CONSTANTS  calling such an operator object: the item/attribute/method access it
                stands for, traced on the argument.
  STDLIB_PURE   stdlib Python functions called on constants only, answered now (namedtuple
                class creation).
Anything else these modules offer stays a graph break with its reason.
"""
from __future__ import annotations

import collections
import collections.abc
import copy
import dataclasses
import functools
import itertools
import operator
import typing

import torch

from tracetorch.compiler.frontend import dispatch, iterators, symbolic
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.iterators import make_lazy
from tracetorch.compiler.frontend.symbolic import python_type

from tracetorch import logs

log = logs.get_logger(__name__)


def _consts(vs):
    return all(v.is_constant() for v in vs)


# ---- functools ------------------------------------------------------------------------------
@dispatch.builtin(functools.reduce)
def _reduce(tx, fn, args, kwargs):
    if kwargs or len(args) not in (2, 3):
        raise Unsupported("functools.reduce(function, iterable[, initial])")
    it = dispatch.get_iter(tx, args[1])
    value = args[2] if len(args) == 3 else iterators.iter_next(tx, it)
    if value is None:
        raise Unsupported("functools.reduce() of an empty iterable raises TypeError")
    while True:
        item = iterators.iter_next(tx, it)
        if item is None:
            return value
        value = dispatch.call_function(tx, args[0], [value, item], {})


# C functions of these modules called like builtins (builder.py wraps them as BuiltinVariables;
# their handlers are registered into dispatch.BUILTINS above)
BUILTINS = frozenset({functools.reduce})


# ---- itertools ------------------------------------------------------------------------------
def _lazy(kind):
    def make(tx, args, kwargs):
        return make_lazy(tx, kind, None, list(args), **_options(kind, args, kwargs))
    return make


def _options(kind, args, kwargs):
    if kind == "chain":
        if kwargs:
            raise Unsupported("itertools.chain() takes no keywords")
        return {}
    if kind == "zip_longest":
        if set(kwargs) - {"fillvalue"}:
            raise Unsupported("itertools.zip_longest() keywords")
        return {"fill": kwargs.get("fillvalue", V.ConstantVariable(None))}
    raise Unsupported(f"itertools.{kind}")


def _count(tx, args, kwargs):
    vals = list(args) + [kwargs[k] for k in ("start", "step")[len(args):] if k in kwargs]
    if not _consts(vals) or not all(type(v.as_constant()) in (int, float) for v in vals):
        raise Unsupported("itertools.count() with non-constant start/step")
    start, step = ([v.as_constant() for v in vals] + [0, 1][len(vals):])[:2]
    return V.LazyIteratorVariable("count", None, [], start=start, step=step)


def _islice(tx, args, kwargs):
    if kwargs or not 2 <= len(args) <= 4:
        raise Unsupported("itertools.islice(iterable, [start,] stop[, step])")
    bounds = [symbolic.specialize(tx, a) for a in args[1:]]
    if not _consts(bounds):
        raise Unsupported("itertools.islice() with non-constant bounds")
    s = slice(*[b.as_constant() for b in bounds])
    start, stop, step = s.start or 0, s.stop, s.step or 1
    if start < 0 or (stop is not None and stop < 0) or step < 1:
        raise Unsupported("itertools.islice() with negative bounds raises ValueError")
    return V.LazyIteratorVariable("islice", None, [dispatch.get_iter(tx, args[0])], start=start,
                                  stop=stop, step=step)


def _accumulate(tx, args, kwargs):
    if len(args) not in (1, 2) or set(kwargs) - {"initial", "func"}:
        raise Unsupported("itertools.accumulate(iterable[, func], *, initial)")
    fn = args[1] if len(args) > 1 else kwargs.get("func")
    if fn is not None and fn.is_constant() and fn.as_constant() is None:
        fn = None
    return V.LazyIteratorVariable("accumulate", fn, [dispatch.get_iter(tx, args[0])],
                                  initial=kwargs.get("initial"))


def _combinatoric(real):
    def make(tx, args, kwargs):
        if real is itertools.product:
            if set(kwargs) - {"repeat"}:
                raise Unsupported("itertools.product() keywords")
            pools = [dispatch.unpack(tx, a) for a in args]
            repeat = symbolic.specialize(tx, kwargs.get("repeat", V.ConstantVariable(1)))
            if not repeat.is_constant():
                raise Unsupported("itertools.product() with a non-constant repeat")
            pools = pools * repeat.as_constant()
            picks = itertools.product(*[range(len(p)) for p in pools])
            rows = [[pools[j][i] for j, i in enumerate(pick)] for pick in picks]
        else:
            if kwargs or not args:
                raise Unsupported(f"itertools.{real.__name__}() keywords")
            pool = dispatch.unpack(tx, args[0])       # CPython takes tuple(iterable) at creation
            rest = [symbolic.specialize(tx, a) for a in args[1:]]
            if not _consts(rest):
                raise Unsupported(f"itertools.{real.__name__}() with a non-constant r")
            picks = real(range(len(pool)), *[r.as_constant() for r in rest])
            rows = [[pool[i] for i in pick] for pick in picks]
        log.debug("itertools_materialized", function=real.__name__, items=len(rows))
        return V.IteratorVariable([V.TupleVariable(r) for r in rows])
    return make


# ---- operator ------------------------------------------------------------------------------
def _operator_object(real):
    def make(tx, args, kwargs):
        if not _consts(args) or not _consts(kwargs.values()):
            raise Unsupported(f"operator.{real.__name__}() with non-constant arguments")
        return V.ConstantVariable(real(*[a.as_constant() for a in args],
                                       **{k: v.as_constant() for k, v in kwargs.items()}))
    return make


def _call_itemgetter(tx, getter, args, kwargs):
    if kwargs or len(args) != 1:
        raise Unsupported("itemgetter called with other than one argument")
    keys = getter.__reduce__()[1]
    got = [dispatch.get_item(tx, args[0], V.ConstantVariable(k)) for k in keys]
    return got[0] if len(keys) == 1 else V.TupleVariable(got)


def _call_attrgetter(tx, getter, args, kwargs):
    if kwargs or len(args) != 1:
        raise Unsupported("attrgetter called with other than one argument")
    names = getter.__reduce__()[1]
    got = []
    for dotted in names:
        v = args[0]
        for part in dotted.split("."):
            v = dispatch.get_attr(tx, v, part)
        got.append(v)
    return got[0] if len(names) == 1 else V.TupleVariable(got)


def _call_methodcaller(tx, caller, args, kwargs):
    if kwargs or len(args) != 1:
        raise Unsupported("methodcaller called with other than one argument")
    ctor, margs = caller.__reduce__()
    mkw = {}
    if isinstance(ctor, functools.partial):          # methodcaller with keyword arguments
        mkw = dict(ctor.keywords)
        margs = tuple(ctor.args) + tuple(margs)
    name, margs = margs[0], margs[1:]
    method = dispatch.get_attr(tx, args[0], name)
    return dispatch.call_function(tx, method, [V.ConstantVariable(a) for a in margs],
                         {k: V.ConstantVariable(v) for k, v in mkw.items()})


CALLABLE_CONSTANTS = {operator.itemgetter: _call_itemgetter, operator.attrgetter: _call_attrgetter,
                      operator.methodcaller: _call_methodcaller}


# ---- collections ---------------------------------------------------------------------------
def _deque(tx, args, kwargs):
    if len(args) > 1 or kwargs:
        raise Unsupported("collections.deque with maxlen")
    return V.DequeVariable(dispatch.unpack(tx, args[0]) if args else [])


def _defaultdict(tx, args, kwargs):
    factory = args[0] if args else V.ConstantVariable(None)
    items = symbolic.mapping_items(tx, args[1], "defaultdict") if len(args) > 1 else {}
    if len(args) > 2:
        raise Unsupported("defaultdict() takes at most two arguments")
    items.update(kwargs)
    d = V.DictVariable(items, dict_cls=collections.defaultdict)
    d.default_factory = factory
    return d


def _ordered_dict(tx, args, kwargs):
    d = dispatch.call_type(tx, dict, args, kwargs)
    d.dict_cls = collections.OrderedDict
    return d


# ---- collections.Counter -------------------------------------------------------------------
# Counter's own methods are stdlib Python built on C helpers and heapq; these equivalents,
# written for the tracer, keep CPython's results (insertion order of keys, ties in most_common,
# only positive counts kept by the operators) and are inlined with the Counter as `self`.
def _is_counter(v):
    return isinstance(v, V.DictVariable) and v.dict_cls is collections.Counter


def _counter_update(self, iterable=None, /, **kwds):
    if iterable is not None:
        if isinstance(iterable, collections.abc.Mapping):
            if self:
                for elem, count in iterable.items():
                    self[elem] = count + self[elem]
            else:                          # an empty Counter takes a mapping's values as they are
                for elem, count in iterable.items():
                    self[elem] = count
        else:
            for elem in iterable:
                self[elem] = self[elem] + 1
    if kwds:
        _counter_update(self, kwds)


def _counter_subtract(self, iterable=None, /, **kwds):
    if iterable is not None:
        if isinstance(iterable, collections.abc.Mapping):
            for elem, count in iterable.items():
                self[elem] = self[elem] - count
        else:
            for elem in iterable:
                self[elem] = self[elem] - 1
    if kwds:
        _counter_subtract(self, kwds)


def _count_of(pair):
    return pair[1]


def _counter_most_common(self, n=None):
    # heapq.nlargest(n, ..., key) is documented as sorted(..., key, reverse=True)[:n]
    ranked = sorted(self.items(), key=_count_of, reverse=True)
    if n is None:
        return ranked
    return ranked[:n] if n > 0 else []


def _counter_elements(self):
    out = []
    for elem, count in self.items():
        for _ in range(count):
            out.append(elem)
    return itertools.chain(out)           # CPython returns an itertools.chain too


def _counter_total(self):
    return sum(self.values())


def _counter_keep(self, other, merge):
    # a new Counter of merge(count in self, count in other) over both key sets (self's keys
    # first), positive results only
    result = collections.Counter()
    for elem, count in self.items():
        new = merge(count, other[elem])
        if new > 0:
            result[elem] = new
    for elem, count in other.items():
        if elem not in self:
            new = merge(0, count)
            if new > 0:
                result[elem] = new
    return result


def _add(a, b):
    return a + b


def _sub(a, b):
    return a - b


def _max(a, b):
    return b if a < b else a


def _min(a, b):
    return a if a < b else b


def _counter_add(self, other):
    return _counter_keep(self, other, _add)


def _counter_sub(self, other):
    return _counter_keep(self, other, _sub)


def _counter_or(self, other):
    return _counter_keep(self, other, _max)


def _counter_and(self, other):
    return _counter_keep(self, other, _min)


def _counter_pos(self):
    result = collections.Counter()
    for elem, count in self.items():
        if count > 0:
            result[elem] = count
    return result


def _counter_neg(self):
    result = collections.Counter()
    for elem, count in self.items():
        if count < 0:
            result[elem] = 0 - count
    return result


def _counter_inplace(self, other, merge):
    for elem, count in other.items():
        self[elem] = merge(self[elem], count)
    for elem in [e for e, c in self.items() if not c > 0]:
        del self[elem]
    return self


def _counter_iadd(self, other):
    return _counter_inplace(self, other, _add)


def _counter_isub(self, other):
    return _counter_inplace(self, other, _sub)


def _counter_ior(self, other):
    return _counter_inplace(self, other, _max)


def _counter_iand(self, other):
    for elem, count in self.items():
        if other[elem] < count:
            self[elem] = other[elem]
    for elem in [e for e, c in self.items() if not c > 0]:
        del self[elem]
    return self


def _counter(tx, args, kwargs):
    if len(args) > 1:
        raise Unsupported("Counter() takes at most one positional argument")
    c = V.DictVariable({}, dict_cls=collections.Counter)
    if args or kwargs:
        dispatch.inline_call(tx, V.UserFunctionVariable(_counter_update), [c, *args], kwargs)
    return c


def _popitem(self, last=True):
    keys = list(self)
    if not keys:
        raise KeyError("popitem(): dictionary is empty")
    key = keys[-1] if last else keys[0]
    return key, self.pop(key)


def _od_move_to_end(self, key, last=True):
    value = self.pop(key)
    if last:
        self[key] = value
    else:
        rest = list(self.items())
        self.clear()
        self[key] = value
        for k, v in rest:
            self[k] = v


# methods of dict kinds by (class, name), looked up along the dict's class MRO
_DICT_METHODS = {
    **{(collections.Counter, name): fn for name, fn in (
        ("update", _counter_update), ("subtract", _counter_subtract),
        ("most_common", _counter_most_common), ("elements", _counter_elements),
        ("total", _counter_total), ("__add__", _counter_add), ("__sub__", _counter_sub),
        ("__or__", _counter_or), ("__and__", _counter_and), ("__pos__", _counter_pos),
        ("__neg__", _counter_neg))},
    (collections.OrderedDict, "move_to_end"): _od_move_to_end,
    (collections.OrderedDict, "popitem"): _popitem,
    (dict, "popitem"): _popitem,            # LIFO, as OrderedDict's default
}
# operators between two Counters (a Counter and anything else: NotImplemented in CPython,
# left to the generic rules)
_COUNTER_OPERATORS = {"+": _counter_add, "-": _counter_sub, "|": _counter_or, "&": _counter_and,
                      "+=": _counter_iadd, "-=": _counter_isub, "|=": _counter_ior,
                      "&=": _counter_iand}
_COUNTER_UNARY = {"pos": _counter_pos, "neg": _counter_neg}


def _inline(tx, fn, args, kwargs=None):
    log.debug("polyfill_inlined", function=fn.__name__)
    return dispatch.inline_call(tx, V.UserFunctionVariable(fn), args, kwargs or {})


@dispatch.call_method.first
def _dict_kind_method(tx, obj, name, args, kwargs):
    if not isinstance(obj, V.DictVariable):
        return dispatch.NOT_HANDLED
    for cls in obj.dict_cls.__mro__:
        poly = _DICT_METHODS.get((cls, name))
        if poly is not None:
            return _inline(tx, poly, [obj, *args], kwargs)
    return dispatch.NOT_HANDLED


@dispatch.binary_op.first
def _counter_binary(tx, symbol, a, b):
    if not (_is_counter(a) and _is_counter(b)) or symbol not in _COUNTER_OPERATORS:
        return dispatch.NOT_HANDLED
    return _inline(tx, _COUNTER_OPERATORS[symbol], [a, b])


@dispatch.unary_op.first
def _counter_unary(tx, name, a):
    if not _is_counter(a) or name not in _COUNTER_UNARY:
        return dispatch.NOT_HANDLED
    return _inline(tx, _COUNTER_UNARY[name], [a])


TYPES = {
    itertools.chain: _lazy("chain"), itertools.zip_longest: _lazy("zip_longest"),
    itertools.count: _count, itertools.islice: _islice, itertools.accumulate: _accumulate,
    itertools.permutations: _combinatoric(itertools.permutations),
    itertools.combinations: _combinatoric(itertools.combinations),
    itertools.combinations_with_replacement: _combinatoric(itertools.combinations_with_replacement),
    itertools.product: _combinatoric(itertools.product),
    operator.itemgetter: _operator_object(operator.itemgetter),
    operator.attrgetter: _operator_object(operator.attrgetter),
    operator.methodcaller: _operator_object(operator.methodcaller),
    collections.deque: _deque, collections.defaultdict: _defaultdict,
    collections.OrderedDict: _ordered_dict, collections.Counter: _counter,
}


def missing_key(tx, d, key):
    """d[key] for a missing key of a defaultdict made in the frame: factory() stored and
    returned (a mutation, as in CPython); of a Counter: 0 (not stored); else None."""
    if d.dict_cls is collections.Counter:
        return V.ConstantVariable(0)
    factory = getattr(d, "default_factory", None)
    if factory is None or (factory.is_constant() and factory.as_constant() is None):
        return None
    value = dispatch.call_function(tx, factory, [], {})
    tx.ctx.side_effects.mutate(tx, d)
    d.items[key.as_constant()] = value
    return value


# ---- Python reimplementations inlined in place of C / stdlib ones -------------------------
def _fromkeys(iterable, value=None):
    d = {}
    for k in iterable:
        d[k] = value
    return d


def _dataclass_replace(obj, /, **changes):
    for f in dataclasses.fields(obj):
        if f.init and f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def _dataclass_asdict(obj, *, dict_factory=dict):
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError("asdict() should be called on dataclass instances")
    return _dataclass_copy(obj, dict_factory, True)


def _dataclass_astuple(obj, *, tuple_factory=tuple):
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError("astuple() should be called on dataclass instances")
    return _dataclass_copy(obj, tuple_factory, False)


def _dataclass_copy(value, factory, as_dict):
    """asdict/astuple's recursion: nested dataclasses become dicts (tuples), lists, tuples,
    namedtuples and dicts are rebuilt with their items converted, anything else deep-copied."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if as_dict:
            return factory([(f.name, _dataclass_copy(getattr(value, f.name), factory, as_dict))
                            for f in dataclasses.fields(value)])
        return factory([_dataclass_copy(getattr(value, f.name), factory, as_dict)
                        for f in dataclasses.fields(value)])
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*[_dataclass_copy(v, factory, as_dict) for v in value])
    if isinstance(value, (list, tuple)):
        return type(value)([_dataclass_copy(v, factory, as_dict) for v in value])
    if isinstance(value, dict):
        return type(value)([(_dataclass_copy(k, factory, as_dict), _dataclass_copy(v, factory, as_dict))
                            for k, v in value.items()])
    if isinstance(value, (int, float, str, bool, bytes, type(None))):
        return value                      # immutable: deepcopy returns it
    if isinstance(value, torch.Tensor) and not value.requires_grad:
        return value.clone()              # deepcopy of a tensor with no autograd history
    return copy.deepcopy(value)


def _dataclass_fields(tx, args, kwargs):
    """dataclasses.fields(obj or class): the class's Field objects, fixed when the class was
    made (the object's class is guarded by its type)."""
    if kwargs or len(args) != 1:
        raise Unsupported("dataclasses.fields(obj)")
    v = args[0]
    cls = v.as_constant() if v.is_constant() and isinstance(v.as_constant(), type) else python_type(v)
    if not dataclasses.is_dataclass(cls):
        raise Unsupported("dataclasses.fields of a non-dataclass raises TypeError")
    return V.ConstantVariable(dataclasses.fields(cls))


def _is_dataclass(tx, args, kwargs):
    """dataclasses.is_dataclass(obj or class): decided by the class (fixed by the object's guard)."""
    if kwargs or len(args) != 1:
        raise Unsupported("dataclasses.is_dataclass(obj)")
    v = args[0]
    cls = v.as_constant() if v.is_constant() else python_type(v)
    return V.ConstantVariable(dataclasses.is_dataclass(cls))


# (owner, attribute) -> Python function inlined in its place (owner: a builtin type)
CLASS_POLYFILLS = {(dict, "fromkeys"): _fromkeys}
# stdlib functions -> a handler (tx, args, kwargs), or a Python function inlined instead
STDLIB_HANDLERS = {dataclasses.fields: _dataclass_fields, dataclasses.is_dataclass: _is_dataclass}
STDLIB_POLYFILLS = {dataclasses.replace: _dataclass_replace, dataclasses.asdict: _dataclass_asdict,
                    dataclasses.astuple: _dataclass_astuple}


# ---- stdlib Python functions answered on constants -----------------------------------------
STDLIB_PURE = {collections.namedtuple,
               typing.get_origin, typing.get_args}    # type introspection (field validators)


def _python_value(v):
    """The real value of a constant, or of a list/tuple of constants (a fresh copy)."""
    if v.is_constant():
        return v.as_constant()
    if type(v) in (V.ListVariable, V.TupleVariable):
        items = [_python_value(i) for i in v.items]
        return items if type(v) is V.ListVariable else tuple(items)
    raise Unsupported(f"a stdlib call with the non-constant argument {v!r}")


def call_pure(tx, fn, args, kwargs):
    """A stdlib function of STDLIB_PURE on constants: called now (its result is a new class or
    an immutable value; a namedtuple class made per call is one class here, per capture)."""
    value = fn(*[_python_value(a) for a in args], **{k: _python_value(v) for k, v in kwargs.items()})
    log.debug("stdlib_call_folded", function=f"{fn.__module__}.{fn.__name__}",
              reason="pure on constant arguments")
    return V.ConstantVariable(value)
