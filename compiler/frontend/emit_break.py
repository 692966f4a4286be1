"""Ending a capture: compile the graph so far and emit the transformed code.

Three endings: the function returned (`finish_return`), a planned graph break at an
instruction that runs eagerly before a resume function takes over (`finish_break`), or a stop
before an instruction from which a resume function simply continues (`finish_stop`).
"""
from __future__ import annotations

import collections
import dataclasses
import inspect
import types

import torch
from bytecode import Instr, Label
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.bytecode_info import PY312
from tracetorch.compiler.frontend.codegen import (
    GRAPH_OUT,
    PyCodegen,
    held_values,
    reachable_variables,
)
from tracetorch.compiler.frontend.eager_calls import route_calls
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.graph_compile import compile_graph
from tracetorch.compiler.frontend.guards import Guard, signature_source
from tracetorch.compiler.frontend.resume import (
    STACK_ARG,
    abstract_instr_at,
    assemble,
    make_function,
    make_resume_code,
    transformed_function,
)
from tracetorch.compiler.frontend.static_inputs import StaticInputCall

from tracetorch import logs

log = logs.get_logger(__name__)

# Instructions a graph break may run eagerly, with (pops, pushes) where fixed.
RESUMABLE = {
    "CALL", "CALL_FUNCTION_EX", "BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "CONTAINS_OP",
    "IS_OP", "STORE_ATTR", "STORE_SUBSCR", "DELETE_SUBSCR", "GET_ITER", "UNARY_NEGATIVE",
    "UNARY_NOT", "UNARY_INVERT", "UNARY_POSITIVE", "FORMAT_VALUE", "BUILD_STRING",
    "UNPACK_SEQUENCE", "BINARY_SLICE", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE",
    "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_IF_NONE",
    "POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
    "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", "CALL_INTRINSIC_1",
}
_FIXED = {"BINARY_OP": (2, 1), "BINARY_SUBSCR": (2, 1), "COMPARE_OP": (2, 1),
          "CONTAINS_OP": (2, 1), "IS_OP": (2, 1), "STORE_ATTR": (2, 0), "STORE_SUBSCR": (3, 0),
          "DELETE_SUBSCR": (2, 0), "GET_ITER": (1, 1), "UNARY_NEGATIVE": (1, 1),
          "UNARY_NOT": (1, 1), "UNARY_INVERT": (1, 1), "UNARY_POSITIVE": (1, 1),
          "BINARY_SLICE": (3, 1), "CALL_INTRINSIC_1": (1, 1)}


@dataclasses.dataclass
class CaptureResult:
    """What capture_frame returns: the transformed function, its guards, graphs and breaks."""
    fn: types.FunctionType
    guards: list
    graphs: list
    graph_breaks: list
    transformed_source: str = ""


def _operands(tx, inst):
    """(pops, pushes) of the break instruction."""
    op = inst.opname
    if op in _FIXED:
        return _FIXED[op]
    if op == "CALL":
        return inst.arg + 2, 1
    if op == "CALL_FUNCTION_EX":
        return 3 + (inst.arg & 1), 1
    if op == "FORMAT_VALUE":
        return 1 + bool(inst.arg & 0x04), 1
    if op == "BUILD_STRING":
        return inst.arg, 1
    if op == "UNPACK_SEQUENCE":
        return 1, inst.arg
    if "JUMP" in op:
        return 1, 0
    raise Unsupported(f"cannot run {op} eagerly")


# ---- code emission ---------------------------------------------------------------------------
def _begin(tx, values, lineno):
    compiled, outputs, gm = compile_graph(tx, values)
    cg = PyCodegen(lineno=lineno, graph_outputs=outputs, code=tx.code)
    if compiled is not None:
        srcs = tx.output.input_sources
        call = StaticInputCall(compiled, srcs)
        passed = call.roots + call.others
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", call)
        for s in passed:
            s.reconstruct(cg)
        cg.call(len(passed))
        cg.emit("STORE_FAST", GRAPH_OUT)
        note = (f"  # inputs read from {', '.join(r.render() for r in call.roots)} once, "
                f"again after a module mutation" if call.roots else "")
        cg.lines.append(f"{GRAPH_OUT} = {call.render_call()}{note}")
    if tx.ctx.side_effects:
        logs.artifact("side_effects", tx.ctx.side_effects.describe)
        cg.preload_read_before_mutation(values, tx.ctx.side_effects)
        cg.replay_side_effects(tx.ctx.side_effects)
    return cg


def _side_values(tx):
    vals = []
    for op in tx.ctx.side_effects.ops:
        if op[0] == "container":
            vals.append(op[1])
        elif op[0] == "append":
            vals.append(op[2])
        else:
            vals.append(op[3])
    return vals


def _result(tx, body, cg, breaks):
    code = assemble(tx.code, body)
    fn = transformed_function(tx.fn, code)
    src = _render(tx, cg)
    logs.artifact("bytecode", lambda: _transformed_text(tx, code, src))
    return CaptureResult(fn, _guards(tx), list(tx.ctx.graphs), breaks, src)


def _guards(tx):
    guards = list(tx.output.guards.values())
    guards += tx.output.symbolic_guards()
    guards.append(_guard("", "GRAD_MODE", tx.ctx.initial_grad))
    guards.append(_guard("", "DEFAULT_DTYPE", torch.get_default_dtype()))
    return guards


def _guard(source, kind, expected):
    return Guard(source, kind, expected, None)


def finish_return(tx, value):
    cg = _begin(tx, [value] + _side_values(tx), _line(tx))
    text = cg.reconstruct(value)
    cg.emit("RETURN_VALUE")
    cg.lines.append(f"return {text}")
    return _result(tx, cg.instrs, cg, [])


def _line(tx):
    inst = tx.current
    return inst.positions.lineno if inst is not None and inst.positions else tx.code.co_firstlineno


def _live_locals(tx):
    """(name, Variable | None) for every bound local, varnames order then cell variables;
    None = unchanged since the call began. Cell variables are passed by value (the resume
    function's MAKE_CELL puts them into fresh cells); a closure over them that only locals
    hold is rebuilt over those fresh cells (`rebuildable_closures`), and capture refuses a
    break while any other closure over the old cells is alive."""
    names = _bound_locals(tx)
    remade, patches = _closure_plan(tx, names)
    names = [(n, _ClosureLocal(_unwrap(v), isinstance(v, _CellValue))
              if v is not None and id(_unwrap(v)) in remade else v)
             for n, v in names]
    # a container holding such a closure travels with None at its places
    for k, (n, v) in enumerate(names):
        if v is not None and id(_unwrap(v)) in patches:
            var, places = patches[id(_unwrap(v))]
            names[k] = (n, _PatchedLocal(var, _stand_in(var, places), places))
    return _iterators_as_sequences(tx, names)


def _stand_in(var, places):
    none = V.ConstantVariable(None)
    if isinstance(var, V.ListVariable):
        return V.ListVariable([none if i in places else item for i, item in enumerate(var.items)])
    return V.DictVariable({k: none if k in places else item for k, item in var.items.items()})


def _bound_locals(tx):
    names = []
    cellvars = set(tx.code.co_cellvars)
    for name in tx.code.co_varnames:
        if name == STACK_ARG or name in cellvars:
            continue      # a resume function's saved stack is consumed by its prologue
        if name in tx.locals:
            var = tx.locals[name]
            if tx.wrapped_args.get(name) is var:
                names.append((name, None))
            else:
                names.append((name, var))
        elif name in tx.arg_values and name not in tx.wrapped_args and name not in tx.deleted:
            names.append((name, None))
    for name in tx.code.co_cellvars:
        cell = tx.cells.get(name)
        if isinstance(cell, V.CellVariable) and cell.contents is not None:
            names.append((name, _CellValue(cell.contents)))
    return names


def _unwrap(v):
    return v.var if isinstance(v, (_CellValue, _IterLocal, _ClosureLocal, _PatchedLocal)) else v


def rebuildable_closures(tx) -> set:
    """ids of the closures made in this frame that the resume function can make again
    instead of receiving them (capture asks before refusing a break while a closure is alive)."""
    return _closure_plan(tx, _bound_locals(tx))[0]


def _closure_ids(tx, names) -> set:
    return _closure_plan(tx, names)[0]


def _closure_plan(tx, names):
    """A function made here over this frame's cells (or its free variables), held by locals
    and by lists/dicts that only locals hold (made in the frame, nothing else reaches them:
    not the stack, not another container, not anything a side effect reaches), is not passed
    to the resume function: its prologue runs MAKE_FUNCTION again over the resume function's
    own cells, which receive the values of the frame's cells, stores it into those locals and
    puts it back at its places in those containers (which arrive holding None there; they
    are the same objects as the frame's, so every local holding one still shares it). The
    frame and the closure then share one cell after the break as before it, and the resume
    function traces the calls. Nothing can tell the new function object from the old one,
    since only those locals and containers ever held it.
    Returns (ids of those closures, {id(container): (container, {position: closure})})."""
    roots = list(tx.stack) + _side_values(tx)
    direct = collections.Counter()
    for _, v in names:
        if v is not None:
            roots.append(_unwrap(v))
            direct[id(_unwrap(v))] += 1
    held = collections.Counter(id(v) for v in roots)
    for v in reachable_variables(roots):
        held.update(id(c) for c in held_values(v))
    cells = _frame_cells(tx)

    def candidate(var):
        return isinstance(var, V.NestedFunctionVariable) and var.closure and \
            _closure_spec(var, cells) is not None

    # containers the prologue can patch: a plain list or dict made here, held by one plain
    # local only (a cell variable's container would need LOAD_DEREF; a tuple cannot be
    # patched). The prologue makes it again (list(items) / dict(items)) before patching: a
    # list that came in as an argument would make the patch a side effect on an input
    # holding a new closure, and nothing but that local could tell the new list from the old.
    in_containers = collections.Counter()
    patches = {}
    for name, v in names:
        var = _unwrap(v)
        if isinstance(v, _CellValue) or getattr(var, "source", None) is not None \
                or held[id(var)] != 1 or direct[id(var)] != 1:
            continue
        if type(var) is V.ListVariable:
            places = {i: item for i, item in enumerate(var.items) if candidate(item)}
        elif type(var) is V.DictVariable and var.dict_cls is dict:
            places = {k: item for k, item in var.items.items() if candidate(item)}
        else:
            continue
        if places:
            patches[id(var)] = (var, places)
            in_containers.update(id(c) for c in places.values())
    out = set()
    for _, v in list(names) + [(None, c) for _, ps in patches.values() for c in ps.values()]:
        var = _unwrap(v)
        if candidate(var) and held[id(var)] == direct[id(var)] + in_containers[id(var)]:
            out.add(id(var))
    patches = {k: (c, {p: f for p, f in ps.items() if id(f) in out})
               for k, (c, ps) in patches.items()}
    return out, {k: v for k, v in patches.items() if v[1]}


def _frame_cells(tx):
    """id(CellVariable) -> (name, is a cell variable (else a free variable)) of this frame."""
    out = {}
    for name, cell in tx.cells.items():
        if isinstance(cell, V.CellVariable):
            if name in tx.code.co_cellvars:
                out[id(cell)] = (name, True)
            elif name in tx.code.co_freevars:
                out[id(cell)] = (name, False)
    return out


def _closure_spec(var, cells):
    """(code, ((cell name, is cellvar), ...), defaults, annotations) to make `var` again, or
    None: a cell not of this frame (an inlined function's), defaults or annotations that are
    not constants, keyword-only defaults."""
    if getattr(var, "source", None) is not None or var.kwdefaults is not None:
        return None
    refs = []
    for c in var.closure:
        if id(c) not in cells:
            return None
        refs.append(cells[id(c)])
    consts = []
    for part in (var.defaults, getattr(var, "annotations", None)):
        if part is not None and not part.is_constant():
            return None
        consts.append(None if part is None else part.as_constant())
    try:
        hash(tuple(consts))            # part of the resume code's cache key
    except TypeError:
        return None
    return var.code, tuple(refs), consts[0], consts[1]


def _iterators_as_sequences(tx, names):
    """A list/tuple iterator made in the frame and held by one local only travels as a fresh
    sequence of the items it has left, which the resume prologue turns back into an iterator
    (GET_ITER): the resume function then traces its own iterator instead of receiving an
    opaque one it cannot step (Dynamo rebuilds these iterators the same way). An iterator
    over a list that something else can still reach (an argument, another local) keeps its
    live rebuild, which sees that list change."""
    roots = list(tx.stack) + _side_values(tx)
    for _, v in names:
        if v is not None:
            roots.append(_unwrap(v))
    held = collections.Counter(id(v) for v in roots)     # references to each value
    for v in reachable_variables(roots):
        held.update(id(c) for c in held_values(v))
    out = []
    for name, v in names:
        if isinstance(v, V.IteratorVariable) and held[id(v)] == 1:
            v = _IterLocal(v, v.remaining(), "BUILD_TUPLE")
        elif isinstance(v, V.ListIteratorVariable) and held[id(v)] == 1 and \
                v.list.source is None and held[id(v.list)] == 1:
            v = _IterLocal(v, list(v.list.items[v.index:]), "BUILD_LIST")
        elif isinstance(v, V.DequeVariable) and held[id(v)] == 1 and v.source is None:
            # a deque made in the frame (a local only): made again from its items by the
            # prologue, so the resume function models its own deque (an incoming one is an
            # opaque object whose methods break the graph)
            v = _IterLocal(v, list(v.items), "BUILD_LIST", (collections.deque,))
        elif isinstance(v, V.DictVariable) and v.dict_cls is collections.defaultdict and \
                held[id(v)] == 1 and v.source is None and _plain_factory(v) is not None:
            # a defaultdict made in the frame, the same way: defaultdict(factory, {...})
            v = _IterLocal(v, None, None, (collections.defaultdict, _plain_factory(v)))
        out.append((name, v))
    return out


def _plain_factory(d):
    """defaultdict's factory when it is a builtin type (list, int, set, dict ...), which the
    prologue loads as a constant; else None."""
    f = getattr(d, "default_factory", None)
    if f is not None and f.is_constant():
        f = f.as_constant()
        if isinstance(f, type) and f.__module__ == "builtins":
            return f
    return None


class _IterLocal:
    """An iterator local passed as a sequence of its remaining items (see above), or a
    container passed as a list of its items (build None: a defaultdict as a plain dict) and
    made again by the call `ctor[0](*ctor[1:], passed)`."""

    def __init__(self, var, items, build, ctor=None):
        self.var = var
        self.items = items
        self.build = build
        self.ctor = ctor


class _ClosureLocal:
    """A closure local made again by the resume prologue (see _closure_ids)."""

    def __init__(self, var, is_cell):
        self.var = var
        self.is_cell = is_cell


class _PatchedLocal:
    """A list/dict local passed as `stand_in` (None where it held closures the prologue makes
    again), copied by the prologue (list(...) / dict(...)) and patched there: places =
    {index or key: closure}."""

    def __init__(self, var, stand_in, places):
        self.var = var
        self.stand_in = stand_in
        self.places = places


class _CellValue:
    """Marks a cell variable's content in the live-locals list (stored with STORE_DEREF)."""

    def __init__(self, var):
        self.var = var


def _unwrap_live(live):
    """The values the transformed code rebuilds (a closure made again is not one of them)."""
    return [v.stand_in if isinstance(v, _PatchedLocal) else _unwrap(v)
            for _, v in live if v is not None and not isinstance(v, _ClosureLocal)]


def _store_locals(tx, cg, live):
    for name, var in live:
        if var is None:
            continue
        if isinstance(var, _ClosureLocal):
            cg.lines.append(f"# {name}: the closure {var.var.qualname}, made again in the resume "
                            f"function over its own cells")
            continue
        if isinstance(var, _CellValue):
            text = cg.reconstruct(var.var)
            cg.emit("STORE_DEREF", name)
        elif isinstance(var, _IterLocal) and var.build is None:
            # the defaultdict's items as a plain dict
            text = cg.reconstruct(V.DictVariable(dict(var.var.items)))
            cg.emit("STORE_FAST", name)
            text = f"{text}  # defaultdict({var.ctor[1].__name__}, ...) again in the resume function"
        elif isinstance(var, _PatchedLocal):
            text = cg.reconstruct(var.stand_in)
            cg.emit("STORE_FAST", name)
            text = f"{text}  # closures put back at {sorted(map(repr, var.places))} in the resume function"
        elif isinstance(var, _IterLocal):
            parts = [cg.reconstruct(i) for i in var.items]
            cg.emit(var.build, len(parts))
            cg.emit("STORE_FAST", name)
            again = "iter()" if var.ctor is None else f"{var.ctor[0].__name__}()"
            text = f"[{', '.join(parts)}]  # {again} again in the resume function"
        else:
            text = cg.reconstruct(var)
            cg.emit("STORE_FAST", name)
        cg.lines.append(f"{name} = {text}")


def _push_lower(tx, cg, lower):
    """Push the stack below the break's operands (minus NULLs); return the slot layout."""
    layout, texts = [], []
    for v in lower:
        if isinstance(v, V.NullVariable):
            layout.append("null")
            continue
        if isinstance(v, V.IteratorVariable):
            parts = [cg.reconstruct(i) for i in v.remaining()]
            cg.emit("BUILD_TUPLE", len(parts))
            layout.append("iter")
            texts.append(f"({', '.join(parts)})")
            continue
        if isinstance(v, V.ContextExitVariable):
            # a grad-mode `with` in progress: the resume function re-enters it (resume.py)
            layout.append(("with", v.ctx.target, v.ctx.prior))
            continue
        if isinstance(v, V.DeletedVariable):
            raise Unsupported(f"cannot save {v!r} across a graph break")
        texts.append(cg.reconstruct(v))
        layout.append("value")
    return layout, texts


def _emit_resume(tx, cg, offset, layout, live, stack_texts):
    names = [n for n, v in live if not isinstance(v, _ClosureLocal)]
    iter_locals = tuple(n for n, v in live if isinstance(v, _IterLocal) and v.ctor is None)
    made = tuple((n, v.ctor) for n, v in live if isinstance(v, _IterLocal) and v.ctor is not None)
    made += tuple((n, (type(v.var.items),)) for n, v in live if isinstance(v, _PatchedLocal))
    code = make_resume_code(tx.code, offset, layout, names, iter_locals, _closure_specs(tx, live),
                            made)
    resume = tx.ctx.make_compiled_callable(make_function(code, tx.fn))
    n = sum(1 for k in layout if k in ("value", "iter"))
    cg.emit("BUILD_TUPLE", n)
    cg.emit("STORE_FAST", STACK_ARG)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", resume)
    kinds = dict(live)
    order = code.co_varnames[:code.co_argcount]       # resume.resume_argnames' order
    for name in order:
        if name == STACK_ARG:
            cg.emit("LOAD_FAST", STACK_ARG)
        else:
            cg.emit("LOAD_DEREF" if isinstance(kinds[name], _CellValue) else "LOAD_FAST", name)
    cg.call(1 + len(names))
    cg.emit("RETURN_VALUE")
    stack_text = f"({', '.join(stack_texts)}{',' if len(stack_texts) == 1 else ''})"
    cg.lines.append(f"return {code.co_name}("
                    f"{', '.join(stack_text if n == STACK_ARG else n for n in order)})")


def _closure_specs(tx, live):
    """For make_resume_code: (targets, code, cell refs, defaults, annotations) per closure,
    targets = ((local name, is a cell variable, ()), ...) holding it and ((container local,
    False, (index or key,)), ...) for the lists/dicts holding it (resume._remake_closure)."""
    cells = _frame_cells(tx)
    by_var = {}
    for name, v in live:
        if isinstance(v, _ClosureLocal):
            by_var.setdefault(id(v.var), (v.var, []))[1].append((name, v.is_cell, ()))
    done = set()
    for name, v in live:
        if isinstance(v, _PatchedLocal) and id(v.var) not in done:
            done.add(id(v.var))
            for key, fn in v.places.items():
                by_var.setdefault(id(fn), (fn, []))[1].append((name, False, (key,)))
    out = []
    for var, targets in by_var.values():
        code, refs, defaults, annotations = _closure_spec(var, cells)
        out.append((tuple(targets), code, refs, defaults, annotations))
    return tuple(out)


def finish_stop(tx, inst, gb):
    if not tx.output.has_ops() and not tx.ctx.side_effects and _first_real(tx, inst):
        # nothing was captured before the stop point: run the whole frame eagerly, with the
        # functions it calls compiled on their own (as Dynamo's frame hook would)
        fn, routed = route_calls(tx.fn, tx.ctx.make_compiled_callable)
        if gb.call_offset is not None and gb.call_offset in routed:
            # the break is the callee's, which now compiles on its own and reports it there
            log.debug("eager_frame_break_in_callee", reason=gb.reason,
                      location=f"{gb.filename}:{gb.lineno}")
            return CaptureResult(fn, [], [], [])
        _log_break(tx, gb, frame_skipped=True)   # the whole frame runs eagerly
        return CaptureResult(fn, [], [], [gb])
    live = _live_locals(tx)
    stack = list(tx.stack)
    cg = _begin(tx, stack + _unwrap_live(live) + _side_values(tx), _line(tx))
    layout, texts = _push_lower(tx, cg, stack)
    _store_locals(tx, cg, live)
    cg.lines.append(f"# graph stops before {inst.opname} at line {_line(tx)}: {gb.reason}")
    _emit_resume(tx, cg, inst.offset, layout, live, texts)
    _log_break(tx, gb)
    return _result(tx, cg.instrs, cg, [gb])


def _first_real(tx, inst):
    """Is inst where this code's real work starts (nothing traced before it)?"""
    return inst.offset <= tx.entry_offset()


def finish_break(tx, inst, gb, via_call):
    pops, pushes = _operands(tx, inst)
    if pops > len(tx.stack):
        raise Unsupported("internal: stack underflow at the break")
    lower = tx.stack[:len(tx.stack) - pops]
    operands = list(tx.stack[len(tx.stack) - pops:])
    if via_call:
        operands = _wrap_callee(tx, inst, operands)
    live = _live_locals(tx)
    cg = _begin(tx, lower + operands + _unwrap_live(live) + _side_values(tx),
                _line(tx))
    layout, texts = _push_lower(tx, cg, lower)
    _store_locals(tx, cg, live)
    op_texts = [cg.reconstruct(v) for v in operands]
    cg.lines.append(f"# graph break at {gb.filename}:{gb.lineno}: {gb.reason}")
    cg.lines.append(_render_eager(tx, inst, op_texts))
    _emit_instruction(tx, cg, inst, layout, live, texts, pushes)
    _log_break(tx, gb)
    return _result(tx, cg.instrs, cg, [gb])


def _render_eager(tx, inst, texts):
    """The break instruction as Python, for the readable source."""
    op = inst.opname
    if op == "CALL":
        fn, args = (texts[1], texts[2:]) if texts[0] == "NULL" else (texts[0], texts[1:])
        kw = list(tx.kw_names or ())
        pos, kws = args[:len(args) - len(kw)], args[len(args) - len(kw):]
        parts = pos + [f"{k}={v}" for k, v in zip(kw, kws)]
        return f"___result = {fn}({', '.join(parts)})  # runs eagerly"
    if "JUMP" in op:
        return f"if {texts[-1]}: ...  # {op}, decided eagerly"
    return f"___result = {op}({', '.join(texts)})  # runs eagerly"


def _emit_instruction(tx, cg, inst, layout, live, texts, pushes):
    op = inst.opname
    bc, pos = abstract_instr_at(tx.code, inst.offset)
    orig = bc[pos]
    nxt = tx.info.next_offset(inst.offset)
    if op == "CALL":
        if tx.kw_names:
            cg.emit("KW_NAMES", tuple(tx.kw_names))
        cg.call(inst.arg)
    elif "JUMP" in op:
        taken = Label()
        name = op
        if not PY312 and name.startswith("POP_JUMP_IF"):
            name = name.replace("POP_JUMP_IF", "POP_JUMP_FORWARD_IF")
        cg.instrs.append(Instr(name, taken, lineno=cg.lineno))
        keeps = op.endswith("_OR_POP")
        _emit_resume(tx, cg, nxt, layout, live, texts)
        cg.instrs.append(taken)
        _emit_resume(tx, cg, inst.argval, layout + (["value"] if keeps else []),
                     live, texts + (["___cond"] if keeps else []))
        return
    else:
        cg.instrs.append(orig.copy())
    _emit_resume(tx, cg, nxt, layout + ["value"] * pushes, live,
                 texts + (["___result"] if pushes == 1 else [f"___result[{i}]" for i in range(pushes)]))


def _wrap_callee(tx, inst, operands):
    """Break at a call whose callee broke inside: the callee runs as a compiled function."""
    if inst.opname != "CALL":       # CALL_FUNCTION_EX: NULL, fn, args[, kwargs]
        if isinstance(operands[0], V.NullVariable):
            return [operands[0], _compiled_callable(tx, operands[1])] + operands[2:]
        return operands
    first, second, rest = operands[0], operands[1], operands[2:]
    make = tx.ctx.make_compiled_callable
    if isinstance(first, V.NullVariable):
        target = second
        if isinstance(target, V.UserMethodVariable):
            return [V.ConstantVariable(make(target.fn)), target.obj] + rest
        if isinstance(target, V.NNModuleVariable):
            cls = type(target.value)
            # a Python __call__ override runs first (it calls Module.__call__ itself)
            call = cls.__call__ if cls.__call__ is not torch.nn.Module.__call__ else cls.forward
            if not isinstance(call, types.FunctionType):
                return operands
            return [V.ConstantVariable(make(call)), target] + rest
        return [first, _compiled_callable(tx, target)] + rest
    return operands


def _compiled_callable(tx, target):
    make = tx.ctx.make_compiled_callable
    if isinstance(target, V.UserFunctionVariable):
        return V.ConstantVariable(make(target.fn))
    if isinstance(target, V.UserMethodVariable):
        return _MethodOf(make(target.fn), target.obj)
    if isinstance(target, V.PartialVariable) and isinstance(target.fn, V.BuiltinVariable) \
            and target.fn.fn is torch.nn.Module.__call__ and len(target.args) == 1 \
            and not target.kwargs and isinstance(target.args[0], V.NNModuleVariable):
        # super().__call__ from a __call__ override: the module's forward, compiled (its
        # hooks were checked, and are guarded, when the call was traced)
        forward = type(target.args[0].value).forward
        if isinstance(forward, types.FunctionType):
            return _MethodOf(make(forward), target.args[0])
    if isinstance(target, V.NewModuleVariable):
        # a module created in the frame (new_modules.py): no hooks of its own, global ones
        # were checked when the call was traced; its forward is compiled
        return _MethodOf(make(inspect.getattr_static(target.cls, "forward")), target)
    if isinstance(target, V.NestedFunctionVariable) and not target.closure \
            and target.kwdefaults is None and (target.defaults is None or target.defaults.is_constant()):
        defaults = target.defaults.as_constant() if target.defaults is not None else None
        real = types.FunctionType(target.code, target.globals, target.code.co_name, defaults)
        return V.ConstantVariable(make(real))
    return target


class _MethodOf(V.UserMethodVariable):
    pass


def _log_break(tx, gb, frame_skipped=False):
    from tracetorch.logs.break_reasons import explain  # issue 18: id, explanation, hints
    why = explain(gb.reason)
    logs.artifact("graph_breaks", lambda: _break_text(gb, why, frame_skipped))
    logs.artifact("graph_break", lambda: {
        "reason": gb.reason, "instruction": gb.instruction, "filename": gb.filename,
        "lineno": gb.lineno, "source_line": gb.source_line, "user_stack": gb.user_stack,
        "reason_id": why.id, "explanation": why.explanation, "hints": list(why.hints),
        "frame_skipped": frame_skipped})
    log.debug("graph_break", reason=gb.reason, location=f"{gb.filename}:{gb.lineno}",
              instruction=gb.instruction, reason_id=why.id, frame_skipped=frame_skipped)


def _break_text(gb, why=None, frame_skipped=False):
    lines = [f"Graph break in user code at {gb.filename}:{gb.lineno}",
             f"Reason: {gb.reason}", f"Instruction: {gb.instruction}",
             f"Code: {gb.source_line}", "User stack (outermost first):"]
    lines += [f"  {s}" for s in gb.user_stack]
    if frame_skipped:
        lines.append("Capture gave up on this frame: the whole function runs eagerly.")
    if why is not None:
        lines += [f"[{why.id}] {why.title}: {why.explanation}"] + [f"  Hint: {h}" for h in why.hints]
    return "\n".join(lines)


def _render(tx, cg):
    head = f"def {tx.code.co_name}({signature_source(tx.code)}):"
    return "\n".join([head] + ["    " + line for line in cg.lines])


def _transformed_text(tx, code, src):
    import dis
    import io
    buf = io.StringIO()
    dis.dis(code, file=buf)
    return (f"MODIFIED BYTECODE {code.co_name} {code.co_filename} line {code.co_firstlineno}\n"
            f"{buf.getvalue()}\npossible source code:\n{src}\n")


__all__ = ["finish_return", "finish_break", "finish_stop", "RESUMABLE"]
