"""Merging adjacent loop dimensions of pointwise kernels (fewer, longer loops vectorise better).

Dims k and k+1 merge when every load/store index of the kernel depends on them only through
`size[k+1] * x_k + x_{k+1}` (times a common coefficient): then one loop variable y over
size[k] * size[k+1] stands for both, and an index is rewritten by x_{k+1} -> y, x_k -> 0.
Kernels using index values as data (index_expr, masks, indirect indexing) are left alone.
"""

from __future__ import annotations

import sympy

from tracetorch.compiler.backend import ir


def _indices(group):
    xs = [ir.index_var("x", k) for k in range(len(group.ranges))]
    out = []
    for n in group.nodes:
        deps = n.read_deps()
        if n.index_exprs or n.indirect_symbols:
            return None, xs
        m = dict(zip(n.data.index_vars(), xs))
        out += [sympy.expand(e.xreplace(m)) for _, e in deps]
        out.append(sympy.expand(n.store_index(xs)))
    return out, xs


def merge_plan(group):
    """(new ranges, {old var: replacement}) or None when nothing merges."""
    if group.reduction_ranges or len(group.ranges) < 2:
        return None
    exprs, xs = _indices(group)
    if exprs is None:
        return None
    if any(e.has(ir.FloorDiv, ir.ModularIndexing) for e in exprs):
        return None
    ranges = list(group.ranges)
    # dims as [first var, last var, size]; merge from the innermost outwards
    dims = [[k, k, ranges[k]] for k in range(len(ranges))]
    subst = {}
    k = len(dims) - 2
    while k >= 0:
        outer, inner = dims[k], dims[k + 1]
        xo, xi = xs[outer[1]], xs[inner[1]]
        ok = all(sympy.expand(e.coeff(xo) - inner[2] * e.coeff(xi)) == 0 for e in exprs)
        if ok:
            # x_outer's contribution folds into x_inner's: x_inner becomes the merged variable
            exprs = [sympy.expand(e.xreplace({xo: 0})) for e in exprs]
            subst[xo] = 0
            dims[k + 1] = [outer[0], inner[1], outer[2] * inner[2]]
            del dims[k]
        k -= 1
    if len(dims) == len(ranges):
        return None
    new_vars = [xs[d[1]] for d in dims]
    return [d[2] for d in dims], subst, new_vars
