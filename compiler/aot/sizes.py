"""Reading symbolic sizes without guarding them.

`int()` or `==` on a SymInt asks the ShapeEnv for a decision, which records a guard: the graph
is then compiled for the example's value only (a dynamic batch turned static). Passes that only
need to know whether a size is a constant, or an example value for a cost estimate, read it
with these instead.
"""
from __future__ import annotations

import sympy
import torch
from torch._decomp import decomposition_table
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

aten = torch.ops.aten


def static_size(n) -> int | None:
    """The size's value where it is a constant, else None."""
    if isinstance(n, torch.SymInt):
        expr = n.node.expr
        return int(expr) if expr.is_number else None
    return int(n)


def example_size(n) -> int:
    """The size's example value (a symbolic size's hint): for choices that change speed only.
    TypeError where a symbolic size has none (an unbacked one)."""
    if isinstance(n, torch.SymInt):
        hint = n.node.hint
        if hint is None:
            raise TypeError(f"size {n.node.expr} has no example value")
        return int(hint)
    return int(n)


def size_expr(n) -> sympy.Expr:
    """The size as a sympy expression (comparable structurally, without a guard)."""
    return n.node.expr if isinstance(n, torch.SymInt) else sympy.Integer(int(n))


#: ops whose fake value comes from their Python decomposition: their C++ kernels read plain
#: sizes (ATen's constant_pad_nd: every size int()-ed, a dynamic batch guarded to its example
#: value; MobileNetV2's and EfficientNet's padding, GPT-2's padded products)
FAKE_BY_DECOMPOSITION = (aten.constant_pad_nd.default,)


def fake_call(target, *args, **kwargs):
    """target(*args, **kwargs) on fake values (under their fake mode), guarding no size."""
    if target in FAKE_BY_DECOMPOSITION:
        target = decomposition_table[target]
    return target(*args, **kwargs)


class GuardFreeFakeProp(FakeTensorProp):
    """FakeTensorProp whose ops run through fake_call."""

    def call_function(self, target, args, kwargs):
        return fake_call(target, *args, **kwargs)
