"""Iterators, lazy builtins and live dict views, with CPython's timing.

CPython's `map`, `zip`, `filter` and `enumerate` are lazy: the mapped function runs when an
item is pulled, interleaved with the loop body, and `zip(..., strict=True)` raises when one
input runs out before the others. `d.keys()` / `d.values()` / `d.items()` are live views of
the dict. Here:

  LazyIteratorVariable  map/zip/filter/enumerate made while tracing; `iter_next` pulls one
                        item at a time (so side effects of the function happen in order);
                        rebuilt after the graph as the same builtin over what is left.
  DictViewVariable      a view that reads its DictVariable's items whenever it is used.
  iter_next(tx, it)     the iterator protocol of every iterator kind (a table by kind), used
                        by FOR_ITER, next(), and unpack().
  fold_result(value)    a value computed at trace time by a Python call on constants
                        ("a b".split(), range(3).__iter__()): mutable results become fresh
                        symbolic containers, so no call of the compiled code shares (and
                        mutates) an object created while tracing.
"""
from __future__ import annotations

import collections
import itertools
import operator

from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.exceptions import raise_new

from tracetorch import logs

log = logs.get_logger(__name__)

_DONE = object()


# ---- the iterator protocol ----------------------------------------------------------------
def _next_plain(tx, it):
    if it.index < len(it.items):
        it.index += 1
        return it.items[it.index - 1]
    return None


def _next_lazy(tx, it):
    if it.exhausted:
        return None
    return _LAZY_NEXT[it.kind](tx, it)


def _pull(tx, inner):
    out = iter_next(tx, inner)
    return _DONE if out is None else out


def _next_map(tx, it):
    args = []
    for inner in it.iterators:
        item = _pull(tx, inner)
        if item is _DONE:
            it.exhausted = True
            return None
        args.append(item)
    return dispatch.call_function(tx, it.fn, args, {})


def _next_zip(tx, it):
    items = []
    for i, inner in enumerate(it.iterators):
        item = _pull(tx, inner)
        if item is _DONE:
            it.exhausted = True
            if it.strict:
                # CPython pulls the others only to tell whether they are exhausted too
                longer = None
                if i == 0:
                    longer = next((j for j, other in enumerate(it.iterators[1:], 1)
                                   if _pull(tx, other) is not _DONE), None)
                if i > 0 or longer is not None:
                    n = len(it.iterators)
                    shape = ([[0]] * i + [[]] + [[0]] * (n - i - 1)) if i > 0 else \
                        ([[]] * longer + [[0]] * (n - longer))
                    try:
                        list(zip(*shape, strict=True))
                    except ValueError as e:          # CPython's own message
                        raise_new(ValueError, *e.args)
            return None
        items.append(item)
    return V.TupleVariable(items)


def _next_filter(tx, it):
    while True:
        item = _pull(tx, it.iterators[0])
        if item is _DONE:
            it.exhausted = True
            return None
        keep = item if it.fn is None else dispatch.call_function(tx, it.fn, [item], {})
        if dispatch.truthiness(tx, keep):
            return item


def _next_enumerate(tx, it):
    item = _pull(tx, it.iterators[0])
    if item is _DONE:
        it.exhausted = True
        return None
    it.count += 1
    return V.TupleVariable([V.ConstantVariable(it.count - 1), item])


def _next_list(tx, it):
    items = it.list.items
    if it.index < len(items):
        it.index += 1
        return items[it.index - 1]
    it.index = 1 << 30      # exhausted for good, as CPython's (it drops the list)
    return None


def _next_chain(tx, it):
    pos = it.state or 0
    while pos < len(it.iterators):
        item = iter_next(tx, get_iter_of(tx, it, pos))
        if item is not None:
            it.state = pos
            return item
        pos += 1
    it.state = pos
    it.exhausted = True
    return None


def get_iter_of(tx, it, pos):
    inner = it.iterators[pos]
    if not is_iterator(inner):
        inner = it.iterators[pos] = dispatch.get_iter(tx, inner)    # chain calls iter() when reached
    return inner


def _next_count(tx, it):
    value = it.count
    it.count = value + it.options.get("step", 1)
    return V.ConstantVariable(value)


def _next_islice(tx, it):
    o = it.options
    target = it.count if it.state is None else it.state + o["step"]
    if o["stop"] is not None and target >= o["stop"]:
        it.exhausted = True
        return None
    pos = -1 if it.state is None else it.state
    item = None
    while pos < target:
        item = _pull(tx, it.iterators[0])
        if item is _DONE:
            it.exhausted = True
            return None
        pos += 1
    it.state = target
    return item


def _next_accumulate(tx, it):
    if it.state is None and it.options.get("initial") is not None:
        it.state = it.options["initial"]
        return it.state
    item = _pull(tx, it.iterators[0])
    if item is _DONE:
        it.exhausted = True
        return None
    if it.state is None:
        it.state = item
    elif it.fn is None:
        it.state = dispatch.binary_op(tx, "+", it.state, item)
    else:
        it.state = dispatch.call_function(tx, it.fn, [it.state, item], {})
    return it.state


def _next_zip_longest(tx, it):
    items, live = [], False
    for i, inner in enumerate(it.iterators):
        item = _DONE if inner is None else _pull(tx, inner)
        if item is _DONE:
            it.iterators[i] = None
            item = it.options["fill"]
        else:
            live = True
        items.append(item)
    if not live:
        it.exhausted = True
        return None
    return V.TupleVariable(items)


_LAZY_NEXT = {"map": _next_map, "zip": _next_zip, "filter": _next_filter,
              "enumerate": _next_enumerate, "chain": _next_chain, "count": _next_count,
              "islice": _next_islice, "accumulate": _next_accumulate,
              "zip_longest": _next_zip_longest}
_NEXT = {V.IteratorVariable: _next_plain, V.LazyIteratorVariable: _next_lazy,
         V.ListIteratorVariable: _next_list}


def register_next(kind, step):
    """Another module's iterator kind (generators.py: generator frames), stepped by step(tx, it)."""
    _NEXT[kind] = step


_CHILDREN = {}


def register_children(kind, held):
    """What an iterator kind of another module holds, for scans of live values."""
    _CHILDREN[kind] = held


def is_iterator(v) -> bool:
    return type(v) in _NEXT or any(isinstance(v, k) for k in _NEXT)


def iter_next(tx, it):
    """The next item of iterator `it` (a Variable), or None when it is exhausted."""
    step = _NEXT.get(type(it))
    if step is None:
        for kind, fn in _NEXT.items():
            if isinstance(it, kind):
                step = fn
                break
        else:
            raise Unsupported(f"next() of {it!r}")
    return step(tx, it)


def drain(tx, it) -> list:
    out = []
    while True:
        item = iter_next(tx, it)
        if item is None:
            return out
        out.append(item)


def make_lazy(tx, kind, fn, iterables, strict=False, start=0, **options):
    # chain calls iter() on each argument only when it gets there
    its = list(iterables) if kind == "chain" else [dispatch.get_iter(tx, a) for a in iterables]
    log.debug("lazy_iterator", kind=kind, inputs=len(its),
              reason="CPython evaluates it item by item; so does the trace")
    return V.LazyIteratorVariable(kind, fn, its, strict=strict, start=start, **options)


def children(v) -> list:
    """Variables a lazy iterator or a view holds (for scans of live values)."""
    held = _CHILDREN.get(type(v))
    if held is not None:
        return held(v)
    if isinstance(v, V.LazyIteratorVariable):
        extra = [x for x in (v.state, v.options.get("fill"), v.options.get("initial"))
                 if isinstance(x, V.Variable)]
        return ([v.fn] if v.fn is not None else []) + [i for i in v.iterators if i is not None] + extra
    if isinstance(v, V.DictViewVariable):
        return [v.dict]
    if isinstance(v, V.ListIteratorVariable):
        return [v.list]
    return []


def rebuild_list_iter(lst, index):
    """Runtime: iter(lst) advanced by `index` items (a ListIteratorVariable, codegen.py)."""
    it = iter(lst)
    for _ in range(min(index, len(lst))):
        next(it)
    if index > len(lst):
        list(it)
    return it


def rebuild_lazy(kind, option, fn, *its):
    """Runtime: the builtin lazy iterator a LazyIteratorVariable stands for (codegen.py)."""
    if kind == "chain":
        return itertools.chain(*its)
    if kind == "count":
        return itertools.count(*option)
    if kind == "map":
        return map(fn, *its)
    if kind == "filter":
        return filter(fn, *its)
    if kind == "zip":
        return zip(*its, strict=option)
    return enumerate(its[0], option)


# ---- dict views ---------------------------------------------------------------------------
def view_items(v) -> list:
    d = v.dict.items
    if v.kind == "keys":
        return [V.ConstantVariable(k) for k in d]
    if v.kind == "values":
        return list(d.values())
    return [V.TupleVariable([V.ConstantVariable(k), x]) for k, x in d.items()]


def view_constant(v):
    """The view's contents as a real set-like value, when it is all constants (for set
    operators and `in`)."""
    if v.kind == "keys":
        return set(v.dict.items)
    items = view_items(v)
    if not all(i.is_constant() for i in items):
        raise Unsupported(f"set operation on dict.{v.kind}() holding non-constants")
    return [i.as_constant() for i in items]


# ---- values computed at trace time from constants -----------------------------------------
_IMMUTABLE = (int, float, bool, str, bytes, complex, type(None), range, slice, frozenset,
              type(Ellipsis))
_ITERATOR_TYPES = tuple({type(iter(x)) for x in ([], (), "", range(1), {}, {}.values(),
                                                  {}.items(), set(), b"")})


def fold_result(value):
    """The Variable for `value`, the result of a Python call on constants at trace time."""
    t = type(value)
    if t in (list, collections.deque):
        return V.ListVariable([fold_result(x) for x in value])
    if t is dict:
        return V.DictVariable({k: fold_result(x) for k, x in value.items()})
    if t is set:
        return V.SetVariable(value)
    if t is tuple and not all(type(x) in _IMMUTABLE or type(x) is tuple for x in value):
        return V.TupleVariable([fold_result(x) for x in value])
    if t in _ITERATOR_TYPES:
        return V.IteratorVariable([fold_result(x) for x in value])
    return V.ConstantVariable(value)


# ---- set operators on views and sets ------------------------------------------------------
_SET_OPS = {"|": operator.or_, "&": operator.and_, "-": operator.sub, "^": operator.xor}


def _as_set(v):
    if isinstance(v, V.DictViewVariable):
        return view_constant(v)
    if isinstance(v, V.SetVariable):
        return set(v.values)
    if v.is_constant() and isinstance(v.as_constant(), (set, frozenset)):
        return v.as_constant()
    return None


def set_binary(tx, symbol, a, b):
    """`a op b` on sets and dict views (keys() | keys(), s - {1}), else None."""
    fn = _SET_OPS.get(symbol.rstrip("="))
    if fn is None or not any(isinstance(x, (V.DictViewVariable, V.SetVariable)) for x in (a, b)):
        return None
    x, y = _as_set(a), _as_set(b)
    if x is None or y is None:
        return None
    if isinstance(a, V.DictViewVariable) and not isinstance(x, set):
        x = set(x)
    if symbol.endswith("=") and isinstance(a, V.SetVariable):
        if a.source is not None:
            raise Unsupported("in-place operator on a set that existed before the call")
        a.values = set(fn(set(a.values), set(y)))
        return a
    out = fn(x if isinstance(x, (set, frozenset)) else set(x), y if isinstance(y, (set, frozenset)) else set(y))
    return V.SetVariable(out) if isinstance(out, set) else V.ConstantVariable(out)


# ---- rebuilding iterators and views after the graph (dispatch.reconstruct) ----------------
@dispatch.reconstruct.register(V.IteratorVariable)
def _reconstruct_iterator(cg, var, side_effects):
    """iter((remaining items,)): what is left to yield, in order. An iterator is stateful:
    two places holding it (two locals) get one object (build_once), as in the frame."""
    def build():
        parts = [cg.reconstruct(p, side_effects) for p in var.remaining()]
        cg.emit("BUILD_TUPLE", len(parts))
        cg.emit("GET_ITER")
        return f"iter(({', '.join(parts)}))"
    return cg.build_once(var, build)


@dispatch.reconstruct.register(V.ListIteratorVariable)
def _reconstruct_list_iterator(cg, var, side_effects):
    """A live iterator over the rebuilt list, advanced to where the frame left it (one object
    however many places hold it)."""
    def build():
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", rebuild_list_iter)
        text = cg.reconstruct(var.list, side_effects)
        cg.emit("LOAD_CONST", var.index)
        cg.call(2)
        return f"iter({text}) (at {var.index})"
    return cg.build_once(var, build)


@dispatch.reconstruct.register(V.DictViewVariable)
def _reconstruct_dict_view(cg, var, side_effects):
    """dict_cls.keys/values/items(<rebuilt dict>): still a live view of that dict."""
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", getattr(var.dict.dict_cls, var.kind))
    text = cg.reconstruct(var.dict, side_effects)
    cg.call(1)
    return f"{text}.{var.kind}()"


@dispatch.reconstruct.register(V.LazyIteratorVariable)
def _reconstruct_lazy(cg, var, side_effects):
    """map(fn, *its) / filter(fn, it) / zip(*its, strict=) / enumerate(it, start) over what
    is left of the inner iterators: the same builtin type, still lazy; one object however
    many places hold it."""
    return cg.build_once(var, lambda: _build_lazy(cg, var, side_effects))


def _build_lazy(cg, var, side_effects):
    if var.exhausted:
        cg.emit("LOAD_CONST", ())
        cg.emit("GET_ITER")
        return "iter(())"
    builtin = var.python_type()
    if var.kind not in ("map", "filter", "zip", "enumerate", "chain", "count"):
        raise Unsupported(f"cannot rebuild a partly consumed itertools.{var.kind} after the graph")
    option = {"zip": var.strict, "count": (var.count, var.options.get("step", 1))}.get(
        var.kind, var.count)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", rebuild_lazy)
    cg.emit("LOAD_CONST", var.kind)
    cg.emit("LOAD_CONST", option)
    fn = var.fn if var.fn is not None else V.ConstantVariable(None)
    parts = [cg.reconstruct(fn, side_effects)]
    parts += [cg.reconstruct(it, side_effects) for it in var.iterators]
    cg.call(2 + len(parts))
    extra = {"zip": f", strict={var.strict}", "enumerate": f", start={var.count}"}.get(var.kind, "")
    shown = parts if var.kind in ("map", "filter") else parts[1:]
    return f"{builtin.__name__}({', '.join(shown)}{extra})"
