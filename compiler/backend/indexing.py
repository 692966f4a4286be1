"""Index arithmetic of the loop IR: sympy loop variables, integer floor division and "take
digits" functions, and their simplification using the loop ranges (all indices are >= 0)."""

from __future__ import annotations

from typing import Optional, Sequence

import sympy

Expr = sympy.Expr

# --------------------------------------------------------------------------------------------
# Index arithmetic: integer floor division and "take digits" with simplification rules that
# use the ranges of loop variables (non-negative integers).
# --------------------------------------------------------------------------------------------


class FloorDiv(sympy.Function):
    """floor(a / b) for non-negative integer index expressions (printed `a // b`)."""

    is_integer = True
    nargs = (2,)

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if isinstance(base, sympy.Integer) and isinstance(divisor, sympy.Integer):
            return sympy.Integer(int(base) // int(divisor))
        # (k*d) // d == k when d divides every term of base
        if all(_divides(divisor, t) for t in sympy.Add.make_args(base)):
            return sympy.expand(base / divisor)
        return None

    def _sympystr(self, printer):
        return f"({printer.doprint(self.args[0])} // {printer.doprint(self.args[1])})"


class ModularIndexing(sympy.Function):
    """(a // div) % mod for non-negative integer index expressions."""

    is_integer = True
    nargs = (3,)

    @classmethod
    def eval(cls, base, divisor, modulus):
        if modulus == 1 or base == 0:
            return sympy.Integer(0)
        if all(isinstance(a, sympy.Integer) for a in (base, divisor, modulus)):
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        return None

    def _sympystr(self, printer):
        a, d, m = (printer.doprint(x) for x in self.args)
        return f"(({a} // {d}) % {m})" if self.args[1] != 1 else f"({a} % {m})"


def index_var(prefix: str, i: int) -> sympy.Symbol:
    """Loop variables are non-negative integers: i0, i1 for ranges, r0, r1 for reductions."""
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def size_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


def float_symbol(name: str) -> sympy.Symbol:
    """A runtime float scalar (a SymFloat/float graph input, or a float computed from scalars in
    the wrapper): the wrapper holds it as a Python float, kernels take it as a double argument."""
    return sympy.Symbol(name, real=True)


def is_float_symbol(s) -> bool:
    """A float scalar symbol (every size, index and indirect symbol is an integer symbol)."""
    return isinstance(s, sympy.Symbol) and s.is_integer is not True


def has_float_symbols(e) -> bool:
    """Does this sympy expression read a float scalar symbol?"""
    return isinstance(e, sympy.Basic) and any(is_float_symbol(s) for s in e.free_symbols)


def _upper_bound(expr: Expr, var_ranges: dict) -> Optional[Expr]:
    """An upper bound of a sum of non-negative terms given var -> range (exclusive), or None."""
    expr = sympy.expand(expr)
    total = sympy.Integer(0)
    for term in sympy.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        if coeff < 0:
            return None
        factors = sympy.Mul.make_args(rest)
        bound = coeff
        for f in factors:
            if f in var_ranges:
                bound = bound * (var_ranges[f] - 1)
            elif isinstance(f, sympy.Symbol) and f.is_positive:
                bound = bound * f
            elif isinstance(f, ModularIndexing):
                bound = bound * (f.args[2] - 1)
            elif f == 1:
                pass
            else:
                return None
        total = total + bound
    return sympy.expand(total)


def _nonnegative_terms(expr: Expr) -> bool:
    """Is every term of the sum non-negative (a positive coefficient times non-negative factors)?"""
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, _ = term.as_coeff_Mul()
        if coeff < 0 or term.is_negative:
            return False
    return True


def _definitely_less(a: Expr, b: Expr) -> bool:
    diff = sympy.expand(a - b)
    if diff.is_number:
        return bool(diff < 0)
    return bool(diff.is_negative)


def _factors(e: Expr):
    """(integer coefficient, {factor: power}) of a product, or None if not a plain product."""
    coeff, rest = sympy.sympify(e).as_coeff_Mul()
    if not coeff.is_Integer:
        return None
    powers: dict = {}
    for f in sympy.Mul.make_args(rest):
        if f == 1:
            continue
        base, exp = f.as_base_exp()
        if not exp.is_Integer or exp < 0:
            return None
        powers[base] = powers.get(base, 0) + int(exp)
    return int(coeff), powers


def _divides(d: Expr, e: Expr) -> bool:
    """Does d divide the single term e (structurally: integer coefficient and factor powers)?"""
    fd, fe = _factors(d), _factors(e)
    if fd is None or fe is None:
        return False
    (cd, pd), (ce, pe) = fd, fe
    if cd == 0 or ce % cd != 0:
        return False
    return all(pe.get(b, 0) >= k for b, k in pd.items())


def simplify_index(expr: Expr, var_ranges: dict) -> Expr:
    """Simplify FloorDiv/ModularIndexing using the loop variable ranges (var -> exclusive end)."""
    if not isinstance(expr, sympy.Basic) or not expr.has(FloorDiv, ModularIndexing):
        return sympy.expand(expr) if isinstance(expr, sympy.Basic) else expr

    def floordiv(base, div):
        base = sympy.expand(base)
        keep, rest = [], []
        for t in sympy.Add.make_args(base):
            (keep if _divides(div, t) else rest).append(t)
        rest_sum = sympy.Add(*rest)
        ub = _upper_bound(rest_sum, var_ranges)
        if ub is not None and _definitely_less(ub, div):
            return sympy.expand(sympy.Add(*keep) / div)
        return FloorDiv(base, div)

    def modular(base, div, mod):
        q = floordiv(base, div) if div != 1 else sympy.expand(base)
        if isinstance(q, FloorDiv):
            ub = _upper_bound(q.args[0], var_ranges)
            if ub is not None and _definitely_less(ub, div * mod):
                return FloorDiv(q.args[0], div)
            return ModularIndexing(base, div, mod)
        terms = [t for t in sympy.Add.make_args(q) if not _divides(mod, t)]
        q2 = sympy.Add(*terms)
        if not _nonnegative_terms(q2):
            # dropping the multiples of mod would leave a negative argument (2*s*t - 1 - x -> -1 - x),
            # whose C/Triton remainder is negative: keep the whole (non-negative) index
            q2 = q
        ub = _upper_bound(q2, var_ranges)
        if ub is not None and _definitely_less(ub, mod):
            return q2
        return ModularIndexing(q2 if div == 1 else base, 1 if div == 1 else div, mod)

    def visit(e):
        if isinstance(e, FloorDiv):
            return floordiv(visit(e.args[0]), visit(e.args[1]))
        if isinstance(e, ModularIndexing):
            return modular(visit(e.args[0]), visit(e.args[1]), visit(e.args[2]))
        if e.args:
            return e.func(*[visit(a) for a in e.args])
        return e

    return sympy.expand(visit(expr))


def contiguous_strides(size: Sequence[Expr]) -> list[Expr]:
    strides, acc = [], sympy.Integer(1)
    for s in reversed(list(size)):
        strides.append(acc)
        acc = acc * s
    return list(reversed(strides))


def product(xs: Sequence[Expr]) -> Expr:
    out = sympy.Integer(1)
    for x in xs:
        out = out * x
    return out




def from_shape_env(expr):
    """A ShapeEnv expression (torch.utils._sympy functions: FloorDiv, CeilDiv, PythonMod, ...) in
    this module's vocabulary, so the index printers and simplifier know every node of it (`x[::3]`
    has size (s0 + 2) // 3; printing torch's FloorDiv made the whole graph run eagerly)."""
    if not isinstance(expr, sympy.Basic) or expr.is_Atom:
        if isinstance(expr, sympy.Float) and expr == int(expr):
            return sympy.Integer(int(expr))
        return expr
    from torch.utils._sympy import functions as tf
    args = [from_shape_env(a) for a in expr.args]
    name = type(expr).__name__
    rule = _SHAPE_ENV_RULES.get(name) if type(expr).__module__ == tf.__name__ else None
    if rule is not None:
        return rule(*args)
    return expr.func(*args) if args else expr


#: torch.utils._sympy.functions class name -> builder over converted arguments
_SHAPE_ENV_RULES = {
    "FloorDiv": lambda a, b: FloorDiv(a, b),
    "CleanDiv": lambda a, b: FloorDiv(a, b),
    "CeilDiv": lambda a, b: FloorDiv(a + b - 1, b),
    "ModularIndexing": lambda a, d, m: ModularIndexing(a, d, m),
    "PythonMod": lambda a, b: ModularIndexing(a, 1, b),
    "Mod": lambda a, b: ModularIndexing(a, 1, b),
    "Max": lambda *xs: sympy.Max(*xs),
    "Min": lambda *xs: sympy.Min(*xs),
    "PowByNatural": lambda a, b: a ** b,
    "Identity": lambda x: x,
}


def access_kind(index, xs, xranges, rs, rranges) -> str | None:
    """How a reduction's load at `index` (over output vars `xs`, reduction vars `rs`) walks
    memory: "row" when it steps one element along the innermost reduction dim, "outer" when
    along the innermost output dim instead (per-channel statistics of a channels_last tensor),
    None otherwise (broadcast along the rows, gathers, no reduction dims). A load that no output
    var moves is the same row for every output (a LayerNorm's per-token mean and rstd in its
    weight gradient's sum over tokens): None too, it does not say how the outputs' data lies;
    counted as "row" it outvoted the gradient's own "outer" loads."""
    x = next((v for v, n in zip(reversed(xs), reversed(xranges)) if n != 1), None)
    r = next((v for v, n in zip(reversed(rs), reversed(rranges)) if n != 1), None)
    if x is None or r is None:
        return None
    expr = sympy.sympify(index)
    moving = {v for v, n in zip(xs, xranges) if n != 1}
    if not (expr.free_symbols & moving):
        return None
    zero = {v: sympy.Integer(0) for v in list(xs) + list(rs)}
    at_zero = expr.xreplace(zero)

    def step(v):
        # every loop var at 0 but v at 1 (xreplace: one structural pass, subs re-simplified each)
        d = expr.xreplace({**zero, v: sympy.Integer(1)}) - at_zero
        return d if d.is_number else None
    sr = step(r)
    if sr == 1:
        return "row"
    if sr != 0 and step(x) == 1:
        return "outer"
    return None
