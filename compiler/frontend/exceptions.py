"""Python exceptions raised and caught inside the traced code.

An exception the traced code raises (`raise ValueError(...)`, or one CPython would raise for an
operation on known values: a missing dict key, next() of an exhausted iterator, int("x") ...)
becomes `TracedRaise(ExceptionVariable)`. The tracer that is running looks the current
instruction up in its code's exception table: a covering entry sends it to the handler with the
stack cut to the entry's depth (plus the instruction offset when the entry says so) and the
exception pushed, as CPython's unwinding does; the handler's own opcodes (PUSH_EXC_INFO,
CHECK_EXC_MATCH, POP_EXCEPT, RERAISE) are traced like any others. With no entry the exception
leaves the frame: an inlined callee hands it to its caller's CALL; the root frame breaks the
graph there (eager raises it for real). A handler of a `with` block (its __exit__ would see the
exception) is not modelled: a graph break.
"""
from __future__ import annotations

import dis

from tracetorch import logs
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported

log = logs.get_logger(__name__)


class TracedRaise(Exception):
    """An exception of the traced program, in flight through the tracers (not an error of ours)."""

    def __init__(self, var):
        super().__init__(var.cls.__name__)
        self.var = var


_ENTRIES: dict = {}


def _entries(code):
    got = _ENTRIES.get(code)
    if got is None:
        got = _ENTRIES[code] = list(dis.Bytecode(code).exception_entries)
    return got


def raise_new(cls, *args):
    """Raise `cls(*args)` (constant arguments) in the traced program."""
    raise TracedRaise(V.ExceptionVariable(cls, [V.ConstantVariable(a) for a in args]))


_PLAIN = (int, float, bool, str, bytes, type(None))


def reraise(e: Exception, reason: str):
    """A builtin exception that a Python operation on constants raised at trace time: raised in
    the traced program (same type and arguments) when it is a plain builtin one, else a break."""
    if type(e).__module__ == "builtins" and all(type(a) in _PLAIN for a in e.args):
        raise TracedRaise(V.ExceptionVariable(type(e), [V.ConstantVariable(a) for a in e.args])) from None
    raise Unsupported(reason) from None


def handle(tx, err: TracedRaise) -> bool:
    """Unwind `tx` to the handler covering its current instruction; False when none does."""
    offset = tx.current.offset
    for e in _entries(tx.code):
        if e.start <= offset < e.end:
            if "with" in tx.info.region_kinds(offset) and tx.info._handler_kind(e.target) == "with":
                raise Unsupported(f"{err.var.cls.__name__} raised inside a with block "
                                  "(its __exit__ would see it)")
            del tx.stack[e.depth:]
            if e.lasti:
                tx.push(V.ConstantVariable(offset))
            tx.push(err.var)
            tx.jump(e.target)
            log.debug("exception_caught", exception=err.var.cls.__name__, offset=offset,
                      handler=e.target, function=tx.fn_name)
            return True
    return False


# ---- the handler opcodes ------------------------------------------------------------------
def PUSH_EXC_INFO(tx, inst):
    exc = tx.pop()
    tx.push(V.ConstantVariable(None))        # the previously handled exception (none traced)
    tx.push(exc)


def CHECK_EXC_MATCH(tx, inst):
    classes = tx.pop()
    exc = tx.stack[-1]
    if not (classes.is_constant() and isinstance(exc, V.ExceptionVariable)):
        raise Unsupported(f"except clause matching {classes!r}")
    tx.push(V.ConstantVariable(issubclass(exc.cls, classes.as_constant())))


def POP_EXCEPT(tx, inst):
    tx.pop()


def RERAISE(tx, inst):
    exc = tx.pop()
    if not isinstance(exc, V.ExceptionVariable):
        raise Unsupported("re-raise of an exception that is not traced")
    raise TracedRaise(exc)


def RAISE_VARARGS(tx, inst):
    if inst.arg != 1:
        raise Unsupported("raise without an exception, or raise ... from ...")
    exc = tx.pop()
    if exc.is_constant() and isinstance(exc.as_constant(), type) \
            and issubclass(exc.as_constant(), BaseException):
        exc = V.ExceptionVariable(exc.as_constant(), [])
    if not isinstance(exc, V.ExceptionVariable):
        raise Unsupported(f"raise of {exc!r}")
    raise TracedRaise(exc)


OPCODES = {"PUSH_EXC_INFO": PUSH_EXC_INFO, "CHECK_EXC_MATCH": CHECK_EXC_MATCH,
           "POP_EXCEPT": POP_EXCEPT, "RERAISE": RERAISE, "RAISE_VARARGS": RAISE_VARARGS}


def exception_class(cls) -> bool:
    """Exception classes we model: builtin ones, and user subclasses that keep BaseException's
    construction (no __init__/__new__ of their own)."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        return False
    if cls.__module__ == "builtins":
        return True
    return all(k.__module__ == "builtins" or ("__init__" not in vars(k) and "__new__" not in vars(k))
               for k in cls.__mro__)


def construct(tx, cls, args, kwargs):
    if kwargs:
        raise Unsupported(f"{cls.__name__}() with keyword arguments")
    return V.ExceptionVariable(cls, list(args))


def get_attr(tx, exc, name):
    if name == "args":
        return V.TupleVariable(list(exc.args))
    if name == "__class__":
        return V.ConstantVariable(exc.cls)
    raise Unsupported(f"attribute {name} of a traced {exc.cls.__name__}")


def as_string(exc):
    """str(exc) when its arguments are constants, else None."""
    if all(a.is_constant() for a in exc.args):
        return str(exc.cls(*[a.as_constant() for a in exc.args]))
    return None
