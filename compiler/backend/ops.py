"""The op vocabulary of define-by-run inner functions and the virtual `ops` object.

Inner functions call `ops.load(...)`, `ops.exp(...)`, ...; whoever installed the current handler
(`set_ops_handler`) decides what that means: printing (PrintHandler), dependency collection
(DependencyHandler), C++ or Triton code generation."""

from __future__ import annotations

import contextlib
import itertools
import threading

import sympy
import torch

Expr = sympy.Expr

# --------------------------------------------------------------------------------------------
# The op vocabulary and the virtual `ops` handler.
# --------------------------------------------------------------------------------------------

#: name -> one-line meaning. Values are whatever the current handler returns (strings in printers
#: and code generators). `dtype` arguments are torch dtypes.
OPS_VOCABULARY: dict[str, str] = {
    # memory and constants
    "load": "load(name, index) -> value of buffer `name` at sympy flat index `index`",
    "store": "store(name, index, value) -> write value at buffer `name`[index] (codegen only)",
    "constant": "constant(value, dtype) -> a Python number as a value of dtype (inf/nan allowed)",
    "index_expr": "index_expr(expr, dtype) -> the sympy integer expression as a value of dtype",
    "to_dtype": "to_dtype(x, dtype) -> conversion (C/torch semantics, float->int truncates)",
    "masked": "masked(mask, body, other) -> body() where mask else the constant `other`; body may load "
    "out-of-bounds where mask is false, so it must not be evaluated there",
    "indirect_indexing": "indirect_indexing(x, size, wrap_neg=True) -> a sympy symbol standing for the "
    "integer value x (wrapped: negative values + size, unless wrap_neg is False, as for scatter "
    "indices, which ATen rejects when negative), usable in load and store indices; out-of-range values are "
    "an error the kernel reports (C++ status word; Triton: scatter stores are masked and flagged)",
    "where": "where(cond, a, b)",
    # unary math
    **{n: f"{n}(x)" for n in (
        "neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh "
        "cosh tanh asinh acosh atanh sigmoid relu erf erfc erfinv lgamma floor ceil trunc round sign "
        "reciprocal square logical_not bitwise_not isnan isinf signbit").split()},
    # binary
    **{n: f"{n}(a, b)" for n in (
        "add sub mul truediv floordiv fmod remainder pow maximum minimum atan2 copysign hypot "
        "eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
        "left_shift right_shift").split()},
}


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


