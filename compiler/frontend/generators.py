"""Generator objects of inlined generator functions and generator expressions, stepped lazily.

CPython runs a generator interleaved with its consumer: its body runs up to a yield only when
next() asks for the item, and a consumer that stops early (any/all/next/a for loop with break,
zip over a shorter input) never runs the rest. So does the trace: calling a generator function
(or evaluating a generator expression) makes a GeneratorVariable holding the callee's Tracer,
not started; each next() (FOR_ITER, next(), zip/map pulling an item, list()/sum() draining it,
any/all until they know the answer) resumes that Tracer until its next YIELD_VALUE
(instructions.Yielded) or its return. Side effects, graph nodes and raised exceptions of the
body therefore happen in CPython's order, with no need to prove that running ahead is
invisible. At a graph break, a generator not yet started is rebuilt by calling its function
again (nothing has run yet); one that has finished is rebuilt as an exhausted generator; one
suspended halfway cannot be rebuilt (its frame exists only in the trace), so capture stops
before it was made (capture.py's restart earlier).

nn.Module's tree walkers (modules, named_modules, children, parameters, ...) are not traced
through their bytecode (named_modules keeps a set of modules): their items are read from the
real module and wrapped with sources, and the tree's names are guarded.
"""
from __future__ import annotations

import inspect

import torch
from tracetorch.compiler.frontend import dispatch, exceptions, iterators
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.instructions import ReturnValue, Yielded
from tracetorch.compiler.frontend.source import AttrSource, GetItemSource

from tracetorch import logs

log = logs.get_logger(__name__)

# builtins that consume an iterable argument completely (or, for next, take its first item
# and drop the iterator) without running user code between items
_CONSUMERS = {list, tuple, any, all, sum, next, sorted, set, frozenset, min, max, dict}


def consumed_immediately(tx) -> bool:
    """Whether the value the caller's current CALL produces goes straight into a consumer
    (a for loop or one of _CONSUMERS): module tree walks are read eagerly only then."""
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


def make_generator(tx, child, fn, args, kwargs, name):
    """The generator object a call to an inlined generator function returns: nothing of its
    body runs yet (CPython only creates the frame)."""
    child.generator = gen = V.GeneratorVariable(child, fn, args, name)
    gen.kwargs = dict(kwargs)
    log.debug("generator_lazy", function=name,
              reason="its body runs item by item, interleaved with its consumer, as in CPython")
    return gen


def _next_generator(tx, gen):
    """Run the suspended frame to its next yield: the item, or None once it returns."""
    if gen.exhausted:
        return None
    if gen.running:
        raise Unsupported(f"generator {gen.name} is already executing")
    frame = gen.frame
    gen.started = gen.running = True
    try:
        frame.run()
    except Yielded as y:
        return y.value
    except ReturnValue as r:
        gen.exhausted = True
        gen.return_value = r.value
        return None
    except exceptions.TracedRaise:
        gen.exhausted = True        # an exception out of a generator finishes it
        raise
    except Unsupported as e:
        e.user_stack.insert(0, frame.user_frame())
        raise
    finally:
        gen.running = False
    raise Unsupported(f"generator {gen.name} ended without return")


iterators.register_next(V.GeneratorVariable, _next_generator)


def frame_values(gen) -> list:
    """What a generator holds: its call (while not started) and its frame's live values."""
    frame = gen.frame
    out = [gen.fn] if gen.fn is not None else []
    out += list(gen.args) + list(getattr(gen, "kwargs", {}).values())
    if gen.started and not gen.exhausted:
        out += list(frame.locals.values()) + list(frame.stack) + list(frame.cells.values())
    return [v for v in out if isinstance(v, V.Variable)]


iterators.register_children(V.GeneratorVariable, frame_values)


def exhausted_generator():
    """Runtime: a finished generator object (a generator the trace ran to its end)."""
    gen = _empty()
    for _ in gen:
        pass
    return gen


def _empty():
    return
    yield


@dispatch.reconstruct.register(V.GeneratorVariable)
def _reconstruct_generator(cg, gen, side_effects):
    def build():
        if gen.exhausted:
            cg.emit("PUSH_NULL")
            cg.emit("LOAD_CONST", exhausted_generator)
            cg.call(0)
            return f"<finished generator {gen.name}>"
        if gen.started:
            raise Unsupported(f"generator {gen.name} suspended halfway cannot be rebuilt "
                              "after the graph (its frame exists only in the trace)")
        if getattr(gen, "kwargs", None):
            raise Unsupported(f"generator {gen.name} made with keyword arguments")
        cg.emit("PUSH_NULL")
        fn = cg.reconstruct(gen.fn, side_effects)
        parts = [cg.reconstruct(a, side_effects) for a in gen.args]
        cg.call(len(parts))
        return f"{fn}({', '.join(parts)})"
    return cg.build_once(gen, build)


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
