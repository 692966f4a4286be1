"""capture_frame: trace one call of a Python function into FX graphs, guards and a
transformed function (docs/CONTRACTS.md section 6).

The root tracer evaluates the function's bytecode. When it meets something it will not
capture it does not guess: it restarts the analysis with a plan ("break at offset X", or
"stop before offset Y" where a break cannot be resumed, e.g. inside a loop or a with/try
block), and on the second pass, arriving there, it compiles the graph so far, emits bytecode
that runs the graph, replays side effects, rebuilds stack and locals, runs the offending
instruction eagerly and continues in a resume function (resume.py) compiled on first call.
"""
from __future__ import annotations

import dataclasses
import inspect
import types

import torch
from tracetorch.compiler.frontend import (
    dispatch,
    dynamic,
    emit_break,
    handlers,  # noqa: F401 (fills dispatch's tables)
)
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.bytecode_info import code_info, format_instruction
from tracetorch.compiler.frontend.emit_break import RESUMABLE, CaptureResult
from tracetorch.compiler.frontend.errors import FinishCapture, FullgraphError, RestartAnalysis, Unsupported
from tracetorch.compiler.frontend.instructions import ReturnValue, Tracer
from tracetorch.compiler.frontend.iterators import children
from tracetorch.compiler.frontend.output_graph import OutputGraph
from tracetorch.compiler.frontend.resume import RESUME_ORIGIN
from tracetorch.compiler.frontend.side_effects import SideEffects
from tracetorch.compiler.frontend.source import LocalSource

from tracetorch import logs

log = logs.get_logger(__name__)
MAX_RESTARTS = 12


@dataclasses.dataclass
class GraphBreak:
    reason: str
    instruction: str
    filename: str
    lineno: int | None
    source_line: str
    user_stack: list            # [(filename, lineno, source line, instruction, function)] outermost first
    call_offset: int | None = None   # a callee broke inside: the caller's call instruction

    def __str__(self):
        return f"{self.reason} at {self.filename}:{self.lineno}: {self.source_line.strip()}"


@dataclasses.dataclass
class Plan:
    """What earlier passes learned: where to break, where to stop."""
    break_at: dict = dataclasses.field(default_factory=dict)   # offset -> (GraphBreak, via_call)
    stop_at: dict = dataclasses.field(default_factory=dict)    # offset -> GraphBreak
    static_scalars: bool = False    # a dynamic scalar met code that needs its value: specialize


class CaptureContext:
    def __init__(self, fn, dynamic_dims, compile_id, backend, make_compiled_callable, fullgraph):
        self.output = OutputGraph(dynamic_dims)
        self.side_effects = SideEffects()
        self.root_globals = fn.__globals__
        self.global_cache = {}
        self.wrap_memo = {}         # id(real object) -> (object, Variable): one Variable per object
        self.compile_id = compile_id
        self.backend = backend
        self.make_compiled_callable = make_compiled_callable
        self.fullgraph = fullgraph
        self.initial_grad = torch.is_grad_enabled()
        self.graphs = []


def capture_frame(fn, args, kwargs, *, compile_id, backend, fullgraph, dynamic_dims,
                  make_compiled_callable) -> CaptureResult:
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"capture_frame expects a Python function, got {type(fn).__name__}")
    plan = Plan()
    logs.artifact("bytecode", lambda: _bytecode_text("ORIGINAL BYTECODE", fn.__code__))
    for attempt in range(MAX_RESTARTS):
        dims = {} if dynamic_dims is None else dynamic_dims
        if plan.static_scalars:
            dims = dict(dims)          # the tensor dims only: every scalar a constant again
        ctx = CaptureContext(fn, dims, compile_id, backend, make_compiled_callable,
                             fullgraph)
        root = RootTracer(ctx, fn, args, kwargs, plan)
        try:
            return root.capture()
        except RestartAnalysis:
            log.debug("restart_analysis", function=fn.__qualname__, attempt=attempt + 1,
                      break_at=sorted(plan.break_at), stop_at=sorted(plan.stop_at))
            continue
    log.warning("capture_gave_up", function=fn.__qualname__, reason="too many restarts")
    return CaptureResult(fn, [], [], [])


class RootTracer(Tracer):
    def __init__(self, ctx, fn, args, kwargs, plan):
        code = fn.__code__
        # follow_wrapped=False: a functools.wraps decorator copies the wrapped signature onto
        # its wrapper, but the frame we evaluate is the wrapper's own code (*args, **kwargs).
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
        bound.apply_defaults()
        self.fn = fn
        self.arg_values = dict(bound.arguments)
        super().__init__(ctx, code, fn.__globals__, {}, {}, fn_name=fn.__qualname__)
        self.plan = plan
        self.depth_at = {}          # offset -> stack depth when first reached in this pass
        self.order = []             # offsets in the order first reached
        self.wrapped_args = {}      # name -> the Variable wrapped from L[name]
        self.deleted = set()        # locals deleted / cleared while tracing
        self.freevar_values = dict(zip(code.co_freevars,
                                       [_cell(c) for c in (fn.__closure__ or ())]))

    # ---- lazy arguments and free variables --------------------------------------------------
    def LOAD_FAST(self, inst):
        self._wrap_arg(inst.argval)
        super().LOAD_FAST(inst)
    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):
        self._wrap_arg(inst.argval)
        super().LOAD_FAST_AND_CLEAR(inst)
        self.deleted.add(inst.argval)

    def STORE_FAST(self, inst):
        super().STORE_FAST(inst)
        if inst.argval in self.locals:
            self.deleted.discard(inst.argval)

    def DELETE_FAST(self, inst):
        super().DELETE_FAST(inst)
        self.deleted.add(inst.argval)

    def _wrap_arg(self, name):
        if name not in self.locals and name in self.arg_values and name not in self.wrapped_args \
                and name not in self.deleted:
            var = dispatch.wrap(self, self.arg_values[name], LocalSource(name))
            self.locals[name] = var
            self.wrapped_args[name] = var

    def LOAD_DEREF(self, inst):
        name = inst.argval
        if name not in self.cells and name in self.freevar_values:
            self.cells[name] = dispatch.wrap(self, self.freevar_values[name], LocalSource(name, is_cell=True))
        super().LOAD_DEREF(inst)

    def LOAD_CLOSURE(self, inst):
        name = inst.argval
        if name in self.code.co_freevars and name in self.freevar_values \
                and not isinstance(self.cells.get(name), V.CellVariable):
            # a function made here closes over a free variable of this frame (a genexpr
            # reading it): a cell Variable holding its (guarded) value, shared from now on
            if name not in self.cells:
                self.cells[name] = dispatch.wrap(self, self.freevar_values[name], LocalSource(name, is_cell=True))
            self.cells[name] = V.CellVariable(self.cells[name])
        super().LOAD_CLOSURE(inst)

    def STORE_DEREF(self, inst):
        if inst.argval in self.code.co_freevars:
            # a write to a cell of the enclosing function: later reads in the trace see the
            # new value, and the transformed function replays the write (side_effects.py)
            name = inst.argval
            if name not in self.freevar_values:
                raise Unsupported(f"assignment to the closure variable {name!r} (nonlocal)")
            value = self.pop()
            if isinstance(self.cells.get(name), V.CellVariable):
                self.cells[name].contents = value      # closures made here share the cell
            else:
                self.cells[name] = value
            self.ctx.side_effects.store_cell(name, value)
            return
        super().STORE_DEREF(inst)

    def MAKE_CELL(self, inst):
        name = inst.argval
        if name in self.arg_values and name not in self.locals:
            # after MAKE_CELL the slot holds a cell: reload it with LOAD_DEREF
            self.locals[name] = dispatch.wrap(self, self.arg_values[name], LocalSource(name, is_cell=True))
            self.wrapped_args[name] = self.locals[name]
        super().MAKE_CELL(inst)

    # ---- stepping with the plan ---------------------------------------------------------------
    def step(self, inst):
        off = inst.offset
        if off not in self.depth_at:
            self.depth_at[off] = len(self.stack)
            self.order.append(off)
        if off in self.plan.stop_at:
            raise FinishCapture(("stop", inst, self.plan.stop_at[off]))
        if off in self.plan.break_at:
            gb, via_call = self.plan.break_at[off]
            raise FinishCapture(("break", inst, gb, via_call))
        try:
            super().step(inst)
        except Unsupported as e:
            self._plan_break(inst, e)

    def _plan_break(self, inst, e: Unsupported):
        frame = self.user_frame()
        stack = [frame] + list(e.user_stack)
        inner = stack[-1]
        gb = GraphBreak(e.reason, inner.instruction, inner.filename, inner.lineno, inner.source_line,
                        [str(f) for f in stack])
        if "Sym(" in e.reason and self.ctx.output.dynamic_scalars and not self.plan.static_scalars:
            # a symbolic scalar reached code that needs its value and cannot specialize it
            # itself: rather than break the graph, capture again with the scalars constant
            # (CONSTANT_MATCH, as before they were marked dynamic)
            self.plan.static_scalars = True
            dynamic.log.info("dynamic_scalars_specialized", function=self.fn.__qualname__,
                             sources=sorted(self.ctx.output.dynamic_scalars), reason=e.reason,
                             location=f"{gb.filename}:{gb.lineno}")
            raise RestartAnalysis()
        if self.ctx.fullgraph:
            raise FullgraphError(e.reason, filename=gb.filename, lineno=gb.lineno,
                                 source_line=_raw_line(gb.filename, gb.lineno),
                                 instruction=gb.instruction, user_stack=gb.user_stack,
                                 col=inner.col, end_col=inner.end_col) from None
        via_call = bool(e.user_stack)
        why_not = self._cannot_resume_at(inst, via_call)
        if why_not is None:
            self.plan.break_at[inst.offset] = (gb, via_call)
        else:
            if via_call:
                gb.call_offset = inst.offset
            stop = self._stop_point(inst.offset)
            gb.reason = f"{gb.reason} ({why_not}; the rest of the function runs eagerly " \
                        f"from line {self._line_of(stop)} on)"
            self.plan.stop_at[stop] = gb
        raise RestartAnalysis()

    def _cannot_resume_at(self, inst, via_call):
        if self.code.co_cellvars and self._closure_alive():
            return "a closure over this function's variables is alive"
        if inst.opname not in RESUMABLE:
            return f"cannot resume after {inst.opname}"
        if self.info.in_loop(inst.offset):
            return "graph break inside a loop"
        kinds = self.info.region_kinds(inst.offset)
        if "try" in kinds or "cleanup" in kinds:
            return "graph break inside a try block or an inlined comprehension"
        if "with" in kinds and not any(isinstance(v, V.ContextExitVariable) for v in self.stack):
            return "graph break inside a with block of an untraced context manager"
        if any(isinstance(v, V.DeletedVariable) for v in self.stack):
            return "graph break with a cleared local on the stack"
        return None

    def _closure_alive(self):
        """Is a function created here (holding this frame's cells) reachable from the state,
        other than one the resume function makes again (emit_break.rebuildable_closures)?"""
        seen = emit_break.rebuildable_closures(self)
        todo = list(self.stack) + list(self.locals.values()) + [
            c.contents for c in self.cells.values() if isinstance(c, V.CellVariable) and c.contents]
        while todo:
            v = todo.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, V.NestedFunctionVariable) and v.closure:
                return True
            if isinstance(v, V.CellVariable):
                return True
            if isinstance(v, V.BaseListVariable):
                todo += V.list_items_for_scan(v)
            elif isinstance(v, V.IteratorVariable):
                todo += v.items
            elif isinstance(v, (V.LazyIteratorVariable, V.DictViewVariable, V.ListIteratorVariable)):
                todo += children(v)
            elif isinstance(v, V.DictVariable):
                todo += list(v.items.values())
            elif isinstance(v, (V.MethodVariable, V.UserMethodVariable)):
                todo.append(v.obj)
        return False

    def _stop_point(self, limit):
        """The last offset before `limit` reached with an empty stack, outside loops and
        blocks: the graph can end there and the rest of the function resume from it."""
        entry = self.entry_offset()
        best = entry
        for off in self.order:
            if off >= limit:
                continue
            if (self.depth_at[off] == 0 and not self.info.in_loop(off)
                    and not self.info.region_kinds(off) and off > best):
                best = off
        loop = self.info.in_loop(limit)
        if loop is not None and best >= loop[0]:
            best = entry
        return max(best, entry)

    def _line_of(self, offset):
        for inst in self.info.instructions[self.info.index_of.get(offset, 0):]:
            if inst.positions and inst.positions.lineno:
                return inst.positions.lineno
        return self.code.co_firstlineno

    def entry_offset(self):
        """Where this code's own work starts: after RESUME (and, in a resume function, at the
        target of its prologue's jump). Stopping there means capturing nothing."""
        origin = RESUME_ORIGIN.get(self.code)
        if origin is not None:
            return origin[2]
        for inst in self.info.instructions:
            if inst.opname not in ("RESUME", "NOP", "MAKE_CELL", "COPY_FREE_VARS"):
                return inst.offset
        return 0

    # ---- running ----------------------------------------------------------------------------
    def capture(self) -> CaptureResult:
        try:
            self.run()
        except ReturnValue as r:
            try:
                return emit_break.finish_return(self, r.value)
            except Unsupported as e:
                # the return value cannot be rebuilt (e.g. a closure made here): stop before
                # the return; the rest runs from a resume function
                if self.ctx.fullgraph:
                    raise FullgraphError(e.reason, filename=self.code.co_filename,
                                         lineno=self.location()[1]) from None
                inst = self.current
                frame = self.user_frame()
                gb = GraphBreak("the return value cannot be rebuilt after the graph",
                                frame.instruction, frame.filename, frame.lineno, frame.source_line,
                                [str(frame)])
                self._restart_earlier(inst.offset, gb, e)
        except FinishCapture as f:
            kind = f.args[0][0]
            try:
                if kind == "stop":
                    _, inst, gb = f.args[0]
                    return emit_break.finish_stop(self, inst, gb)
                _, inst, gb, via_call = f.args[0]
                return emit_break.finish_break(self, inst, gb, via_call)
            except Unsupported as e:
                # the state at the break cannot be rebuilt: stop earlier instead
                self._restart_earlier(f.args[0][1].offset, f.args[0][2], e)
        raise AssertionError("unreachable")

    def _restart_earlier(self, off, gb, e):
        self.plan.break_at.pop(off, None)
        self.plan.stop_at.pop(off, None)
        stop = self._stop_point(off)
        if stop in self.plan.stop_at or stop == off:
            stop = self.entry_offset()
        gb.reason = f"{gb.reason} (cannot rebuild the state there: {e.reason})"
        self.plan.stop_at[stop] = gb
        raise RestartAnalysis() from None


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:
        return None


def _raw_line(filename, lineno):
    import linecache
    return linecache.getline(filename, lineno).rstrip("\n") if lineno else ""


def _bytecode_text(title, code):
    import dis
    import io
    buf = io.StringIO()
    dis.dis(code, file=buf)
    return f"{title} {code.co_name} {code.co_filename} line {code.co_firstlineno}\n{buf.getvalue()}"


__all__ = ["capture_frame", "CaptureResult", "GraphBreak", "code_info", "format_instruction"]
