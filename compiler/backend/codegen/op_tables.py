"""The op dispatcher both code generators share; each language gives only its op tables.

A language's handler (cpp_ops.CppOpsHandler, triton_ops.TritonOpsHandler) subclasses
TableOpsHandler and provides
  * op tables: op name -> the one expression computing it, as a template over the operands
    (`{x}`; `{a}`, `{b}`; `{t}` the operand dtype's type name in the language) or a function of
    the operand values returning the text (where the text depends on their dtype). UNARY and
    BINARY apply to any operand dtype; the _FLOAT and _INT tables to floating-point and to
    integer/bool operands, and take precedence; LOGICAL gives the operator combining the truth
    values of logical_and/or/xor;
  * `value(expr, dtype, *operands)`: emit one temporary holding `expr`;
  * methods for the ops that are more than one expression (memory, masked bodies, indirect
    indexing, conversions, where, constants); a method always wins over the tables.
What does not depend on the language lives here (tinygrad's `code_for_op` and inductor's typed
OpsHandler are the model): which table serves which operand dtype, the result dtype
(ops.BOOL_RESULT), comparisons, integer operands of rounding ops, abs/bitwise_not of bools, and
the relu bug injected for tests (config.testing.inject_relu_bug).
"""
from __future__ import annotations

import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported
from tracetorch.compiler.backend.ops import BOOL_RESULT, OPS_VOCABULARY

COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# integer (and bool) values are already whole: these ops return them unchanged
ROUNDING = frozenset({"floor", "ceil", "trunc", "round"})


class TableOpsHandler(ir.OpsHandler):
    """Dispatches every op that is one expression over its operands to the language's tables."""

    UNARY: dict = {}
    UNARY_FLOAT: dict = {}
    UNARY_INT: dict = {}
    BINARY: dict = {}
    BINARY_FLOAT: dict = {}
    BINARY_INT: dict = {}
    LOGICAL: dict = {}
    #: relu under inject_relu_bug="compile_error": text the language's compiler rejects
    RELU_COMPILE_ERROR = ""

    def __init__(self, kernel):
        self.kernel = kernel  # the kernel being generated (owns temporaries, CSE, buffers, masks)

    # what a language provides -------------------------------------------------------------
    def value(self, expr: str, dtype: torch.dtype, *operands):
        raise NotImplementedError

    def type_name(self, dtype: torch.dtype) -> str:
        raise NotImplementedError

    def check_float_op(self, name: str) -> None:
        """Called before a floating-point table entry is used (may raise CodegenUnsupported)."""

    def report_injected_error(self, x) -> None:
        """inject_relu_bug="runtime_error": make the kernel report failure when it runs."""
        raise NotImplementedError

    # memory and masked bodies: the kernel builder owns them --------------------------------
    def load(self, name, index):
        return self.kernel.load(name, index)

    def store(self, name, index, value):
        self.kernel.store(name, index, value)

    def masked(self, mask, body, other):
        return self.kernel.masked(mask, body, other)

    # the tables ---------------------------------------------------------------------------
    def implements(self, name: str) -> bool:
        """Has this language code for ops.`name` (a method or a table entry)?"""
        return (name in _KERNEL_OPS or name in COMPARE or name in self.LOGICAL or _own_method(type(self), name)
                or any(name in t for t in (self.UNARY, self.UNARY_FLOAT, self.UNARY_INT,
                                           self.BINARY, self.BINARY_FLOAT, self.BINARY_INT)))

    def __getattr__(self, name):
        if name in COMPARE:
            return lambda a, b: self.value(f"({a} {COMPARE[name]} {b})", torch.bool, a, b)
        if name in self.LOGICAL:
            return lambda a, b: self.value(f"(({a} != 0) {self.LOGICAL[name]} ({b} != 0))", torch.bool, a, b)
        if name in self.UNARY or name in self.UNARY_FLOAT or name in self.UNARY_INT:
            return lambda x: self.unary(name, x)
        if name in self.BINARY or name in self.BINARY_FLOAT or name in self.BINARY_INT:
            return lambda a, b: self.binary(name, a, b)
        return super().__getattr__(name)

    def unary(self, name: str, x):
        if x.dtype == torch.bool and name == "abs":
            return x
        if x.dtype == torch.bool and name == "bitwise_not":   # ~True would be -2 in C and Triton
            name = "logical_not"
        template = self._template(name, x.dtype, self.UNARY_FLOAT, self.UNARY_INT, self.UNARY)
        if template is None:
            if not x.dtype.is_floating_point and name in ROUNDING:
                return x
            raise CodegenUnsupported(f"ops.{name} on {x.dtype}")
        text = template(x) if callable(template) else template.format(
            x=x, t=self.type_name(x.dtype) if "{t}" in template else "")
        return self.value(text, torch.bool if name in BOOL_RESULT else x.dtype, x)

    def binary(self, name: str, a, b):
        template = self._template(name, a.dtype, self.BINARY_FLOAT, self.BINARY_INT, self.BINARY)
        if template is None:
            raise CodegenUnsupported(f"ops.{name} on {a.dtype}")
        text = template(a, b) if callable(template) else template.format(a=a, b=b)
        return self.value(text, a.dtype, a, b)

    def _template(self, name, dtype, floats, ints, any_dtype):
        """The entry for ops.`name` on an operand of `dtype`: the dtype's own table first."""
        if dtype.is_floating_point and name in floats:
            self.check_float_op(name)
            return floats[name]
        if not dtype.is_floating_point and name in ints:
            return ints[name]
        return any_dtype.get(name)

    def relu(self, x):
        from tracetorch.compiler import config
        bug = getattr(config.testing, "inject_relu_bug", None)
        if bug == "compile_error":
            return self.value(self.RELU_COMPILE_ERROR.format(x=x), x.dtype, x)
        if bug == "runtime_error":
            self.report_injected_error(x)
        if bug == "accuracy":
            return self.value(f"({x} + 1)", x.dtype, x)
        return self.unary("relu", x)


_KERNEL_OPS = frozenset({"load", "store", "masked"})


def _own_method(cls, name: str) -> bool:
    """Does the language implement ops.`name` as a method? (relu, a method here, still needs
    the language's table entry.)"""
    return name in OPS_VOCABULARY and any(name in vars(c) for c in cls.__mro__
                                          if issubclass(c, TableOpsHandler) and c is not TableOpsHandler)
