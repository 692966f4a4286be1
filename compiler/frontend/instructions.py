"""The symbolic bytecode evaluator: one handler per CPython opcode (3.11 and 3.12).

`Tracer` walks a code object's instructions with a stack and locals of symbolic values
(variables.py). Tensor work goes to the FX graph (output_graph.py); calls, attribute reads and
operators are resolved by calls.py / attributes.py; user functions are inlined (inline.py).
Anything it will not capture raises `Unsupported`; the root tracer (capture.py) turns that
into a graph break, an inlined one passes it outwards with its frame added to the user stack.
"""
from __future__ import annotations

import functools

from tracetorch.compiler.frontend import dispatch, exceptions, iterators
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.attributes import super_attr
from tracetorch.compiler.frontend.builder import _wrap_foreign, wrap_global
from tracetorch.compiler.frontend.bytecode_info import PY312, code_info, format_instruction
from tracetorch.compiler.frontend.data_ops import DataOps
from tracetorch.compiler.frontend.errors import FinishCapture, FullgraphError, RestartAnalysis, Unsupported, UserFrame

from tracetorch import logs

log = logs.get_logger(__name__)

MAX_INLINE_DEPTH = 24


class ReturnValue(Exception):
    def __init__(self, value):
        self.value = value


class Yielded(ReturnValue):
    """A generator frame reached YIELD_VALUE: it stops there (its ip after the yield) until
    the next next() runs it again (generators.py)."""


class Tracer(DataOps):
    def __init__(self, ctx, code, f_globals, symbolic_locals, cells, parent=None, fn_name=None):
        self.ctx = ctx                      # CaptureContext (capture.py): graph, side effects
        self.output = ctx.output
        self.code = code
        self.info = code_info(code)
        self.f_globals = f_globals
        self.locals = symbolic_locals       # name -> Variable (absent = unbound)
        self.cells = cells                  # cell/free var name -> CellVariable | Source-backed var
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.stack: list[V.Variable] = []
        self.ip = 0
        self.kw_names = None
        self.current = None
        self.last_line = None
        self.fn_name = fn_name or code.co_name

    # ---- stack helpers -------------------------------------------------------------------
    def push(self, v):
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # ---- location -------------------------------------------------------------------------
    def location(self):
        inst = self.current
        line = inst.positions.lineno if inst is not None and inst.positions else None
        return self.code.co_filename, line

    def location_str(self):
        filename, line = self.location()
        return f"{filename}:{line}"

    def user_frame(self) -> UserFrame:
        filename, line = self.location()
        pos = self.current.positions if self.current is not None else None
        col = pos.col_offset if pos is not None else None
        end = pos.end_col_offset if pos is not None and pos.end_lineno == pos.lineno else None
        return UserFrame(filename, line, self.info.source_line(line).strip(),
                         format_instruction(self.current) if self.current else "", self.fn_name, col, end)

    def stack_trace(self) -> str:
        """The user stack at this instruction in torch.fx's `stack_trace` format (outermost
        frame first): '  File "path", line N, in fn\n    source line\n' per frame."""
        frames = []
        tx = self
        while tx is not None:
            filename, line = tx.location()
            frames.append(f'  File "{filename}", line {line}, in {tx.fn_name}\n'
                          f"    {tx.info.source_line(line).strip()}\n")
            tx = tx.parent
        return "".join(reversed(frames))

    # ---- main loop ------------------------------------------------------------------------
    def run(self):
        while True:
            inst = self.info.instructions[self.ip]
            self.ip += 1
            self.step(inst)

    def step(self, inst):
        self.current = inst
        self.output.location = self.location_str()
        self.output.tracer = self           # nodes recorded now get this user stack (stack_trace)
        line = inst.positions.lineno if inst.positions else None
        if line is not None and line != self.last_line:
            self.last_line = line
            logs.artifact("trace_source", lambda: f"TRACE starts_line {self.code.co_filename}:"
                          f"{line} in {self.fn_name}\n    {self.info.source_line(line).strip()}")
        logs.artifact("trace_bytecode", lambda: f"TRACE {inst.opname} {inst.argrepr} "
                      f"{self.stack!r}")
        # try/except and try/finally bodies are traced along their normal path, as Dynamo
        # does: the finally body follows inline, a handler is only reached by an exception
        # raised while tracing (RAISE_VARARGS breaks). As with Dynamo, an exception raised by
        # the compiled graph itself propagates without running the frame's handlers.
        handler = getattr(self, inst.opname, None)
        if handler is None and inst.opname in exceptions.OPCODES:
            handler = functools.partial(exceptions.OPCODES[inst.opname], self)
        if handler is None:
            raise Unsupported(f"opcode {inst.opname} is not supported")
        try:
            handler(inst)
        except exceptions.TracedRaise as err:
            # an exception of the traced program: to this frame's handler, else to the caller
            if exceptions.handle(self, err):
                return
            if self.parent is None:
                raise Unsupported(f"{err.var.cls.__name__} raised and not caught in the traced "
                                  "frame (eager raises it)") from None
            raise
        except (Unsupported, ReturnValue, RestartAnalysis, FinishCapture, FullgraphError):
            raise
        except RecursionError:
            raise Unsupported("recursion too deep while tracing") from None
        except Exception as e:
            # A bug of ours must not become a wrong result or a crash: break the graph there.
            log.warning("internal_error", error=f"{type(e).__name__}: {e}",
                        instruction=format_instruction(inst), location=self.location_str())
            raise Unsupported(f"internal error while tracing {inst.opname}: "
                              f"{type(e).__name__}: {e}") from None

    def jump(self, target_offset):
        self.ip = self.info.index_of[target_offset]

    # ---- no-ops ---------------------------------------------------------------------------
    def NOP(self, inst): pass
    RESUME = NOP
    PRECALL = NOP
    COPY_FREE_VARS = NOP

    def MAKE_CELL(self, inst):
        name = inst.argval
        cell = V.CellVariable(self.locals.pop(name, None))
        self.cells[name] = cell

    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def PUSH_NULL(self, inst):
        self.push(V.NULL)

    def POP_TOP(self, inst):
        self.pop()

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    def END_FOR(self, inst):
        self.popn(2)

    # ---- locals, constants, globals, cells -------------------------------------------------
    def LOAD_FAST(self, inst):
        name = inst.argval
        if name not in self.locals or isinstance(self.locals[name], V.DeletedVariable):
            raise Unsupported(f"local variable {name!r} read before assignment")
        self.push(self.locals[name])
    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):
        self.push(self.locals.pop(inst.argval, V.DeletedVariable()))

    def STORE_FAST(self, inst):
        value = self.pop()
        if isinstance(value, V.DeletedVariable):
            self.locals.pop(inst.argval, None)
        else:
            self.locals[inst.argval] = value

    def DELETE_FAST(self, inst):
        self.locals.pop(inst.argval, None)

    def LOAD_CONST(self, inst):
        value = inst.argval
        if callable(value) and not isinstance(value, (str, bytes)) and not (
                isinstance(value, type) and value.__module__ == "builtins"):
            # objects our own generated prologues load (torch.no_grad, _set_grad_enabled, ...)
            self.push(_wrap_foreign(self, value))
            return
        self.push(V.ConstantVariable(value))

    def LOAD_GLOBAL(self, inst):
        if inst.arg & 1:
            self.push(V.NULL)
        self.push(self.load_global(inst.argval))

    def load_global(self, name):
        return wrap_global(self, name)

    def STORE_GLOBAL(self, inst):
        value = self.pop()
        self.ctx.side_effects.store_global(self, inst.argval, value)

    def LOAD_DEREF(self, inst):
        name = inst.argval
        cell = self.cells.get(name)
        if isinstance(cell, V.CellVariable):
            if cell.contents is None:
                raise Unsupported(f"free variable {name!r} read before assignment")
            self.push(cell.contents)
        elif cell is not None:
            self.push(cell)
        else:
            raise Unsupported(f"closure variable {name!r} is not available")

    def STORE_DEREF(self, inst):
        name = inst.argval
        cell = self.cells.get(name)
        if isinstance(cell, V.CellVariable):
            cell.contents = self.pop()
        else:
            raise Unsupported(f"assignment to the closure variable {name!r} of an enclosing "
                              "function (nonlocal write)")

    def LOAD_CLOSURE(self, inst):
        name = inst.argval
        cell = self.cells.get(name)
        if not isinstance(cell, V.CellVariable):
            raise Unsupported(f"closure over {name!r}, a cell of an enclosing function")
        self.push(cell)

    # ---- imports --------------------------------------------------------------------------
    def IMPORT_NAME(self, inst):
        """`import m` / `from m import x` of a module that is already imported: the module
        object, taken as it is (like Dynamo). A first import runs module code: a break."""
        import importlib.util
        import sys
        fromlist = self.pop()
        level = self.pop()
        if not (fromlist.is_constant() and level.is_constant()):
            raise Unsupported("import with non-constant arguments")
        name = inst.argval
        if level.as_constant():
            package = self.f_globals.get("__package__") or self.f_globals.get("__name__", "")
            try:
                name = importlib.util.resolve_name("." * level.as_constant() + name, package)
            except (ImportError, ValueError):
                raise Unsupported(f"relative import of {inst.argval!r}") from None
        module = sys.modules.get(name)
        if module is None:
            raise Unsupported(f"import of {name!r}, which is not imported yet (runs module code)")
        if not fromlist.as_constant():
            module = sys.modules.get(name.partition(".")[0])
        self.push(V.PythonModuleVariable(module))

    def IMPORT_FROM(self, inst):
        mod = self.stack[-1]
        if not isinstance(mod, V.PythonModuleVariable) or not hasattr(mod.value, inst.argval):
            raise Unsupported(f"from-import of {inst.argval!r}")
        self.push(dispatch.get_attr(self, mod, inst.argval))

    # ---- attributes -----------------------------------------------------------------------
    def LOAD_ATTR(self, inst):
        obj = self.pop()
        method = PY312 and bool(inst.arg & 1)
        value = dispatch.get_attr(self, obj, inst.argval)
        if method:
            self.push(V.NULL)
        self.push(value)

    def LOAD_METHOD(self, inst):
        obj = self.pop()
        value = dispatch.get_attr(self, obj, inst.argval)
        self.push(V.NULL)
        self.push(value)

    def STORE_ATTR(self, inst):
        obj = self.pop()
        value = self.pop()
        dispatch.store_attr(self, obj, inst.argval, value)

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        if dispatch.delete_attr(self, obj, inst.argval) is dispatch.NOT_HANDLED:
            raise Unsupported(f"del of attribute {inst.argval} of {obj!r}")

    def LOAD_SUPER_ATTR(self, inst):
        # 3.12: super global, class, self on the stack; low bit = method load,
        # second bit = two-argument super(cls, self)
        obj = self.pop()
        cls = self.pop()
        self.pop()
        if not cls.is_constant() or not isinstance(cls.as_constant(), type):
            raise Unsupported("super() with a non-class")
        value = super_attr(self, V.SuperVariable(cls.as_constant(), obj), inst.argval)
        if inst.arg & 1:
            self.push(V.NULL)
        self.push(value)

    # ---- iteration and jumps ------------------------------------------------------------------
    def GET_ITER(self, inst):
        self.push(dispatch.get_iter(self, self.pop()))

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not iterators.is_iterator(it):
            raise Unsupported(f"iteration over {it!r}")
        item = iterators.iter_next(self, it)
        if item is not None:
            self.push(item)
            return
        self.pop()
        target = inst.argval
        if PY312:
            k = self.info.index_of[target]
            if self.info.instructions[k].opname == "END_FOR":
                target = self.info.instructions[k + 1].offset
        self.jump(target)

    def JUMP_FORWARD(self, inst):
        self.jump(inst.argval)
    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD
    JUMP_ABSOLUTE = JUMP_FORWARD

    def _pop_jump(self, inst, when):
        value = self.pop()
        if when in ("NONE", "NOT_NONE"):
            is_none = dispatch.is_none(self, value)
            if is_none is None:
                raise Unsupported(f"'is None' test on {value!r}")
            taken = is_none if when == "NONE" else not is_none
        else:
            truth = dispatch.truthiness(self, value)
            taken = truth if when == "TRUE" else not truth
        if taken:
            self.jump(inst.argval)

    def POP_JUMP_IF_TRUE(self, inst): self._pop_jump(inst, "TRUE")
    def POP_JUMP_IF_FALSE(self, inst): self._pop_jump(inst, "FALSE")
    def POP_JUMP_IF_NONE(self, inst): self._pop_jump(inst, "NONE")
    def POP_JUMP_IF_NOT_NONE(self, inst): self._pop_jump(inst, "NOT_NONE")
    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE
    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst):
        if dispatch.truthiness(self, self.stack[-1]):
            self.jump(inst.argval)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not dispatch.truthiness(self, self.stack[-1]):
            self.jump(inst.argval)
        else:
            self.pop()

    # ---- calls ----------------------------------------------------------------------------
    def CALL(self, inst):
        argc = inst.arg
        args = self.popn(argc)
        second = self.pop()
        first = self.pop()
        if isinstance(first, V.NullVariable):
            fn = second
        else:
            fn, args = first, [second] + args
        kwargs = {}
        if self.kw_names:
            names = self.kw_names
            kw_values = args[len(args) - len(names):]
            args = args[:len(args) - len(names)]
            kwargs = dict(zip(names, kw_values))
        self.kw_names = None
        self.push(dispatch.call_function(self, fn, list(args), kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs = self.pop() if inst.arg & 1 else V.DictVariable({})
        args = self.pop()
        fn = self.pop()
        if isinstance(self.stack[-1] if self.stack else None, V.NullVariable):
            self.pop()
        if not isinstance(kwargs, V.DictVariable):
            raise Unsupported(f"**kwargs from {kwargs!r}")
        self.push(dispatch.call_function(self, fn, dispatch.unpack(self, args), dict(kwargs.items)))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_constant()
        flags = inst.arg
        closure = self.pop().items if flags & 0x08 else None
        annotations = self.pop() if flags & 0x04 else None
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        self.push(V.NestedFunctionVariable(code, code.co_qualname if hasattr(code, "co_qualname")
                                           else code.co_name, defaults, kwdefaults, closure,
                                           self.f_globals, annotations))

    def BEFORE_WITH(self, inst):
        ctx = self.pop()
        if not isinstance(ctx, V.GradModeVariable):
            raise Unsupported(f"'with' on {ctx!r} (only torch.no_grad / enable_grad / "
                              "set_grad_enabled / contextlib.nullcontext are traced)")
        if ctx.target is None:           # contextlib.nullcontext(): enters and exits as is
            self.push(V.ContextExitVariable(ctx))
            self.push(V.ConstantVariable(None))
            return
        if ctx.prior is None:
            ctx.prior = self.output.grad_enabled
        if ctx.target != self.output.grad_enabled:
            self.output.record_grad_mode(ctx.target)
        self.push(V.ContextExitVariable(ctx))
        self.push(V.ConstantVariable(None))

    # ---- generator frames (generators.py steps them: each next() runs to the next yield) ----
    def RETURN_GENERATOR(self, inst):
        if getattr(self, "generator", None) is None:
            raise Unsupported("generator function")
        self.push(V.ConstantVariable(None))

    def YIELD_VALUE(self, inst):
        if getattr(self, "generator", None) is None:
            raise Unsupported("yield outside an inlined generator")
        value = self.pop()
        self.push(V.ConstantVariable(None))     # what next() sends in, seen when it resumes
        raise Yielded(value)

    # `yield from it`: GET_YIELD_FROM_ITER, then a SEND loop that yields each item of `it`
    def GET_YIELD_FROM_ITER(self, inst):
        if getattr(self, "generator", None) is None:
            raise Unsupported("yield from outside an inlined generator")
        self.push(dispatch.get_iter(self, self.pop()))

    def SEND(self, inst):
        sent = self.pop()
        it = self.stack[-1]
        if not iterators.is_iterator(it) or not (sent.is_constant() and sent.as_constant() is None):
            raise Unsupported(f"send to {it!r}")
        item = iterators.iter_next(self, it)
        if item is not None:
            self.push(item)
            return
        # exhausted: the `yield from` expression's value (a generator's return value, else
        # None); 3.11 pops the iterator here, 3.12 leaves it to END_SEND
        value = getattr(it, "return_value", None) or V.ConstantVariable(None)
        if not PY312:
            self.pop()
        self.push(value)
        self.jump(inst.argval)

    def END_SEND(self, inst):
        value = self.pop()
        self.pop()
        self.push(value)

    # ---- returns --------------------------------------------------------------------------
    def RETURN_VALUE(self, inst):
        raise ReturnValue(self.pop())

    def RETURN_CONST(self, inst):
        raise ReturnValue(V.ConstantVariable(inst.argval))


@dispatch.is_none.default
def _is_none(tx, v):
    """POP_JUMP_IF_NONE on v: True / False, or None when the kind cannot tell (a break)."""
    if isinstance(v, V.ConstantVariable):
        return v.value is None
    if isinstance(v, (V.TensorVariable, V.BaseListVariable, V.DictVariable, V.NNModuleVariable,
                      V.UserFunctionVariable, V.NestedFunctionVariable, V.SymNodeVariable,
                      V.MethodVariable, V.UserMethodVariable, V.TorchFunctionVariable,
                      V.BuiltinVariable, V.PythonModuleVariable, V.NewObjectVariable,
                      V.ModelOutputVariable, V.PartialVariable, V.IteratorVariable)):
        return False
    if isinstance(v, V.UserObjectVariable):
        return v.value is None
    return None


__all__ = ["Tracer", "ReturnValue", "Yielded", "MAX_INLINE_DEPTH"]
