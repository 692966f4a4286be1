"""The op vocabulary of define-by-run inner functions and the virtual `ops` object.

Inner functions call `ops.load(...)`, `ops.exp(...)`, ...; whoever installed the current handler
(`set_ops_handler`) decides what that means: printing (PrintHandler), dependency collection
(DependencyHandler), C++ or Triton code generation (codegen/op_tables.py). `OpsProtocol` lists
every op with its signature; OPS_VOCABULARY is derived from it."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import threading
from typing import Callable, Protocol, TypeVar, runtime_checkable

import sympy
import torch

Expr = sympy.Expr

# --------------------------------------------------------------------------------------------
# The op vocabulary: a typed Protocol (every handler's interface) and the virtual `ops` handler.
# --------------------------------------------------------------------------------------------

V = TypeVar("V")    # a handler's value: str in printers, CppVar / TVar in the code generators


@runtime_checkable
class OpsProtocol(Protocol[V]):
    """Every op an inner function may call, with its signature. `dtype` arguments are torch
    dtypes; a docstring is the op's meaning where the name does not say it. OPS_VOCABULARY is
    derived from this class, so an op is added here and nowhere else in this module."""

    # memory and constants
    def load(self, name: str, index: Expr) -> V:
        """value of buffer `name` at sympy flat index `index`"""

    def store(self, name: str, index: Expr, value: V) -> None:
        """write value at buffer `name`[index] (codegen only)"""

    def constant(self, value: float | int | bool, dtype: torch.dtype) -> V:
        """a Python number as a value of dtype (inf/nan allowed)"""

    def index_expr(self, expr: Expr, dtype: torch.dtype) -> V:
        """the sympy integer expression as a value of dtype"""

    def to_dtype(self, x: V, dtype: torch.dtype) -> V:
        """conversion (C/torch semantics, float->int truncates)"""

    def masked(self, mask: V, body: Callable[[], V], other: float | int | bool) -> V:
        """body() where mask else the constant `other`; body may load out-of-bounds where mask is
        false, so it must not be evaluated there"""

    def indirect_indexing(self, x: V, size: Expr, wrap_neg: bool = True, check: bool = False) -> sympy.Symbol:
        """a sympy symbol standing for the integer value x (wrapped: negative values + size,
        unless wrap_neg is False, as for scatter indices, which ATen rejects when negative),
        usable in load and store indices; out-of-range values are an error the kernel reports
        (C++ status word; Triton: in a scatter kernel, or anywhere with check=True: the index
        reads as 0 and the status word is flagged)"""

    def where(self, cond: V, a: V, b: V) -> V: ...

    def fma(self, a: V, b: V, c: V) -> V:
        """a * b + c rounded once (a fused multiply-add); operands of one float dtype"""

    # unary math (torch semantics; the result has x's dtype unless the op is in BOOL_RESULT)
    def neg(self, x: V) -> V: ...
    def abs(self, x: V) -> V: ...
    def exp(self, x: V) -> V: ...
    def exp2(self, x: V) -> V: ...
    def expm1(self, x: V) -> V: ...
    def log(self, x: V) -> V: ...
    def log2(self, x: V) -> V: ...
    def log10(self, x: V) -> V: ...
    def log1p(self, x: V) -> V: ...
    def sqrt(self, x: V) -> V: ...
    def rsqrt(self, x: V) -> V: ...
    def sin(self, x: V) -> V: ...
    def cos(self, x: V) -> V: ...
    def tan(self, x: V) -> V: ...
    def asin(self, x: V) -> V: ...
    def acos(self, x: V) -> V: ...
    def atan(self, x: V) -> V: ...
    def sinh(self, x: V) -> V: ...
    def cosh(self, x: V) -> V: ...
    def tanh(self, x: V) -> V: ...
    def asinh(self, x: V) -> V: ...
    def acosh(self, x: V) -> V: ...
    def atanh(self, x: V) -> V: ...
    def sigmoid(self, x: V) -> V: ...
    def relu(self, x: V) -> V: ...
    def erf(self, x: V) -> V: ...
    def erfc(self, x: V) -> V: ...
    def erfinv(self, x: V) -> V: ...
    def lgamma(self, x: V) -> V: ...
    def floor(self, x: V) -> V: ...
    def ceil(self, x: V) -> V: ...
    def trunc(self, x: V) -> V: ...
    def round(self, x: V) -> V: ...
    def sign(self, x: V) -> V: ...
    def reciprocal(self, x: V) -> V: ...
    def square(self, x: V) -> V: ...
    def logical_not(self, x: V) -> V: ...
    def bitwise_not(self, x: V) -> V: ...
    def isnan(self, x: V) -> V: ...
    def isinf(self, x: V) -> V: ...
    def signbit(self, x: V) -> V: ...

    # binary (the result has a's dtype unless the op is in BOOL_RESULT)
    def add(self, a: V, b: V) -> V: ...
    def sub(self, a: V, b: V) -> V: ...
    def mul(self, a: V, b: V) -> V: ...
    def truediv(self, a: V, b: V) -> V: ...
    def floordiv(self, a: V, b: V) -> V: ...
    def fmod(self, a: V, b: V) -> V: ...
    def remainder(self, a: V, b: V) -> V: ...
    def pow(self, a: V, b: V) -> V: ...
    def maximum(self, a: V, b: V) -> V: ...
    def minimum(self, a: V, b: V) -> V: ...
    def atan2(self, a: V, b: V) -> V: ...
    def copysign(self, a: V, b: V) -> V: ...
    def hypot(self, a: V, b: V) -> V: ...
    def eq(self, a: V, b: V) -> V: ...
    def ne(self, a: V, b: V) -> V: ...
    def lt(self, a: V, b: V) -> V: ...
    def le(self, a: V, b: V) -> V: ...
    def gt(self, a: V, b: V) -> V: ...
    def ge(self, a: V, b: V) -> V: ...
    def logical_and(self, a: V, b: V) -> V: ...
    def logical_or(self, a: V, b: V) -> V: ...
    def logical_xor(self, a: V, b: V) -> V: ...
    def bitwise_and(self, a: V, b: V) -> V: ...
    def bitwise_or(self, a: V, b: V) -> V: ...
    def bitwise_xor(self, a: V, b: V) -> V: ...
    def left_shift(self, a: V, b: V) -> V: ...
    def right_shift(self, a: V, b: V) -> V: ...


#: ops whose result is a bool whatever their operands' dtype
BOOL_RESULT = frozenset("eq ne lt le gt ge logical_and logical_or logical_xor logical_not isnan isinf "
                        "signbit".split())


def _vocabulary() -> dict[str, str]:
    out = {}
    for name, fn in vars(OpsProtocol).items():
        if name.startswith("_") or not callable(fn):
            continue
        params = list(inspect.signature(fn).parameters.values())[1:]
        sig = f"{name}(" + ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                                     for p in params) + ")"
        doc = " ".join((fn.__doc__ or "").split())
        out[name] = f"{sig} -> {doc}" if doc else sig
    return out


#: name -> its signature and one-line meaning. Values are whatever the current handler returns
#: (strings in printers and code generators).
OPS_VOCABULARY: dict[str, str] = _vocabulary()


class OpsHandler:
    """Base handler: every op raises; subclasses implement what they understand."""

    def __getattr__(self, name):
        if name in OPS_VOCABULARY:
            def missing(*args, **kwargs):
                raise NotImplementedError(f"{type(self).__name__} does not implement ops.{name}")
            return missing
        raise AttributeError(name)


_handler_state = threading.local()


def current_ops_handler() -> OpsHandler:
    h = getattr(_handler_state, "handler", None)
    if h is None:
        raise RuntimeError("no ops handler installed: call inner functions under set_ops_handler()")
    return h


@contextlib.contextmanager
def set_ops_handler(handler: OpsHandler):
    prior = getattr(_handler_state, "handler", None)
    _handler_state.handler = handler
    try:
        yield handler
    finally:
        _handler_state.handler = prior


class _OpsProxy:
    """`ops.add(a, b)` forwards to the handler installed by set_ops_handler."""

    def __getattr__(self, name):
        if name not in OPS_VOCABULARY:
            raise AttributeError(f"ops.{name} is not in the op vocabulary (ir.OPS_VOCABULARY)")

        def dispatch(*args, **kwargs):  # looked up at call time: lowerings hold `ops.sin` early
            return getattr(current_ops_handler(), name)(*args, **kwargs)
        dispatch.__name__ = name
        return dispatch


ops = _OpsProxy()


class PrintHandler(OpsHandler):
    """Records each op as a line `tmpN = ops.name(args)`; used by every IR printer."""

    def __init__(self):
        self.lines: list[str] = []
        self._n = itertools.count()

    def _emit(self, text: str) -> str:
        name = f"tmp{next(self._n)}"
        self.lines.append(f"{name} = {text}")
        return name

    def __getattr__(self, name):
        if name not in OPS_VOCABULARY:
            raise AttributeError(name)

        def op(*args, **kwargs):
            if name == "masked":
                mask, body, other = args
                self.lines.append(f"# masked by {mask}:")
                inner = body()
                return self._emit(f"ops.masked({mask}, {inner}, {other!r})")
            if name == "indirect_indexing":
                sym = sympy.Symbol(f"ind{next(self._n)}", integer=True)
                wrap = "" if kwargs.get("wrap_neg", True) else ", wrap_neg=False"
                wrap += ", check=True" if kwargs.get("check") else ""
                self.lines.append(f"{sym} = ops.indirect_indexing({args[0]}, {args[1]}{wrap})")
                return sym
            if name == "store":
                self.lines.append(f"ops.store({args[0]}, {args[1]}, {args[2]})")
                return None
            parts = [_fmt_arg(a) for a in args] + [f"{k}={_fmt_arg(v)}" for k, v in kwargs.items()]
            return self._emit(f"ops.{name}({', '.join(parts)})")

        return op


def _fmt_arg(a) -> str:
    if isinstance(a, torch.dtype):
        return str(a).replace("torch.", "")
    return str(a)


class DependencyHandler(OpsHandler):
    """Collects (buffer name, index) for every load and store, the expressions of index_expr /
    indirect_indexing sizes (for the size symbols a kernel needs), and the indirect symbols."""

    def __init__(self):
        self.loads: list[tuple[str, Expr]] = []
        self.stores: list[tuple[str, Expr]] = []
        self.exprs: list[Expr] = []
        self.indirect_symbols: set = set()

    @property
    def indirect(self) -> bool:
        return bool(self.indirect_symbols)

    def __getattr__(self, name):
        if name not in OPS_VOCABULARY:
            raise AttributeError(name)

        def op(*args, **kwargs):
            if name == "load":
                self.loads.append((args[0], sympy.sympify(args[1])))
            elif name == "store":
                self.stores.append((args[0], sympy.sympify(args[1])))
            elif name == "index_expr":
                self.exprs.append(sympy.sympify(args[0]))
            elif name == "masked":
                return args[1]()
            elif name == "indirect_indexing":
                self.exprs.append(sympy.sympify(args[1]))
                sym = sympy.Symbol(f"ind{len(self.indirect_symbols)}", integer=True)
                self.indirect_symbols.add(sym)
                return sym
            return "v"

        return op


