"""Calls to generator functions whose result the caller consumes at once.

CPython runs a generator lazily, interleaved with its consumer. We run it to completion at
the call (as Dynamo's generator inlining did) and hand the caller an iterator over the
yielded values. That is only the same program when the interleaving cannot be observed, so:
  - the call's result must go straight into a consumer (a for loop, `yield from`, or one of
    list/tuple/any/all/sum/next/... as their only argument): nothing runs in between;
  - the generator body must not cause side effects on pre-existing objects, mutate a
    container or object that its caller or its yielded values reach, or write a tensor in
    place (the consumer would see the final state at every item), and it may yield at most
    MAX_ITEMS values (an endless generator stopped early by its consumer never ends here).
Anything else keeps the existing graph break.

nn.Module's tree walkers (modules, named_modules, children, parameters, ...) are not traced
through their bytecode (named_modules keeps a set of modules): their items are read from the
real module and wrapped with sources, and the tree's names are guarded.
"""
from __future__ import annotations

import inspect

import torch
from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.instructions import ReturnValue
from tracetorch.compiler.frontend.iterators import children
from tracetorch.compiler.frontend.source import AttrSource, GetItemSource

from tracetorch import logs

log = logs.get_logger(__name__)

MAX_ITEMS = 1024

# builtins that consume an iterable argument completely (or, for next, take its first item
# and drop the iterator) without running user code between items
_CONSUMERS = {list, tuple, any, all, sum, next, sorted, set, frozenset, min, max, dict}


def consumed_immediately(tx) -> bool:
    """Whether the value the caller's current CALL produces goes straight into a consumer."""
    instructions = tx.info.instructions
    k = tx.ip
    while k < len(instructions) and instructions[k].opname in ("PRECALL", "CACHE"):
        k += 1
    if k >= len(instructions):
        return False
    nxt = instructions[k]
    if nxt.opname in ("GET_ITER", "GET_YIELD_FROM_ITER"):
        return True
    if nxt.opname == "CALL" and nxt.arg == 1 and not tx.kw_names and len(tx.stack) >= 2:
        # stack: [NULL, builtin] <- the generator object comes next
        fn = tx.stack[-1]
        return (isinstance(tx.stack[-2], V.NullVariable) and isinstance(fn, V.BuiltinVariable)
                and fn.fn in _CONSUMERS)
    return False


def run_generator(tx, child, name):
    """Run an inlined generator function's child tracer to completion."""
    effects = tx.ctx.side_effects
    ops_before, touched_before = len(effects.ops), len(effects.touched)
    nodes_before = set(tx.output.graph.nodes)
    child.generated = []
    child.max_generated = MAX_ITEMS
    try:
        child.run()
    except ReturnValue as r:
        # `x = yield from gen()` would need the value; our iterators end with None
        if not (r.value.is_constant() and r.value.as_constant() is None):
            raise Unsupported(f"generator function {name} returns a value") from None
    ahead = f"generator function {name} {{}} (it cannot be run ahead of its consumer)"
    if len(effects.ops) != ops_before:
        raise Unsupported(ahead.format("has side effects"))
    # containers / objects it mutated: fine when only the generator itself can see them
    touched = effects.touched[touched_before:]
    if touched:
        visible = _reachable(tx, child.generated)
        if any(getattr(v, "source", None) is not None or id(v) in visible for v in touched):
            raise Unsupported(ahead.format("mutates an object its consumer can see"))
    for node in tx.output.graph.nodes:
        if node not in nodes_before and _mutating(node):
            raise Unsupported(ahead.format(f"mutates a tensor in place ({node.target})"))
    log.debug("generator_inlined", function=name, items=len(child.generated))
    return V.IteratorVariable(child.generated)


def _reachable(tx, extra) -> set:
    """ids of the Variables the caller frames (locals, stacks, cells) and `extra` reach."""
    seen = set()
    todo = list(extra)
    while tx is not None:
        todo += list(tx.locals.values()) + list(tx.stack) + list(tx.cells.values())
        tx = tx.parent
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (V.BaseListVariable, V.IteratorVariable)):
            todo += list(v.items)
        elif isinstance(v, V.DictVariable):
            todo += list(v.items.values())
        elif isinstance(v, (V.NewObjectVariable, V.ModelOutputVariable)):
            todo += list(v.attrs.values())
        elif isinstance(v, V.CellVariable) and v.contents is not None:
            todo.append(v.contents)
        elif isinstance(v, (V.LazyIteratorVariable, V.DictViewVariable, V.ListIteratorVariable)):
            todo += children(v)
        elif isinstance(v, V.NDArrayVariable):
            todo.append(v.tensor)
        elif isinstance(v, (V.NestedFunctionVariable,)) and v.closure:
            todo += list(getattr(v.closure, "items", v.closure))
    return seen


_INPLACE_OPERATORS = {"setitem", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod",
                      "ipow", "imatmul", "iand", "ior", "ixor", "ilshift", "irshift"}


def _mutating(node) -> bool:
    """A recorded op that writes a tensor: x.add_(...), x[i] = v, x += y, out=..."""
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if "out" in node.kwargs:
        return True
    if getattr(node.target, "__module__", None) == "_operator" and name in _INPLACE_OPERATORS:
        return True
    return name.endswith("_") and not name.startswith("_")


_TREE_METHODS = {
    # method -> (named variant used to find each item's path, keeps the name in the item)
    "modules": ("named_modules", False), "named_modules": ("named_modules", True),
    "children": ("named_children", False), "named_children": ("named_children", True),
    "parameters": ("named_parameters", False), "named_parameters": ("named_parameters", True),
    "buffers": ("named_buffers", False), "named_buffers": ("named_buffers", True),
}


def module_tree_method(fn):
    """The name of an nn.Module tree walker when `fn` is nn.Module's own, else None."""
    name = getattr(fn, "__name__", None)
    if name in _TREE_METHODS and getattr(torch.nn.Module, name, None) is fn:
        return name
    return None


def call_module_tree(tx, mv, method, args, kwargs):
    """modules() / named_parameters() / ... of a sourced module: its real items, wrapped."""
    if mv.source is None or not all(a.is_constant() for a in list(args) + list(kwargs.values())):
        raise Unsupported(f"nn.Module.{method} with non-constant arguments")
    try:
        bound = inspect.signature(getattr(torch.nn.Module, method)).bind(
            None, *[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except TypeError:
        raise Unsupported(f"nn.Module.{method}: bad arguments") from None
    ckw = dict(bound.arguments)
    ckw.pop("self")
    if ckw.get("memo") is not None:
        raise Unsupported("nn.Module.named_modules with a memo")
    m = mv.value
    real = list(getattr(m, method)(**ckw))
    named, keeps_name = _TREE_METHODS[method]
    # the same walk with no prefix gives each item's path from m, in the same order
    path_kw = {k: v for k, v in ckw.items() if k not in ("prefix", "memo")}
    paths = list(getattr(m, named)(**path_kw))
    if len(paths) != len(real):
        raise Unsupported(f"nn.Module.{method}: unexpected walk")
    # the walk changes when the tree's names change: guard them (modules themselves get
    # ID_MATCH, tensors TENSOR_MATCH); the names of one walk are unique, so dict() keeps them
    call = ", ".join(f"{k}={v!r}" for k, v in path_kw.items())
    tx.output.add_guard(f"list(dict({mv.source.name()}.{named}({call})))",
                        "CONSTANT_MATCH", [n for n, _ in paths])
    items = []
    for item, (path, value) in zip(real, paths):
        source, reached = _path_source(m, mv.source, path)
        if reached is not value or (item[1] if keeps_name else item) is not value:
            # an override of the walk yields something else
            raise Unsupported(f"nn.Module.{method}: {path!r} does not lead to its item")
        var = dispatch.wrap(tx, value, source)
        items.append(V.TupleVariable([V.ConstantVariable(item[0]), var]) if keeps_name else var)
    log.debug("module_tree_walk", method=method, module=mv.source.name(), items=len(items))
    return V.IteratorVariable(items)


def _path_source(root, source, path):
    obj = root
    for part in path.split(".") if path else []:
        if isinstance(obj, (torch.nn.ModuleList, torch.nn.Sequential)) and part.isdigit():
            source = GetItemSource(source, int(part))
        elif part.isidentifier():
            source = AttrSource(source, part)
        else:
            raise Unsupported(f"module path {path!r} is not an attribute path")
        obj = getattr(obj, part)
    return source, obj
