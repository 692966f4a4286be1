"""Reading symbolic sizes without guarding them.

`int()` or `==` on a SymInt asks the ShapeEnv for a decision, which records a guard: the graph
is then compiled for the example's value only (a dynamic batch turned static). Passes that only
need to know whether a size is a constant, or an example value for a cost estimate, read it
with these instead.
"""
from __future__ import annotations

import sympy
import torch


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
