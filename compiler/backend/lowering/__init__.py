"""Lowering: aten ops of the post-aot FX graph -> the loop-level IR (compiler/backend/ir.py).

Split by op family: pointwise.py, views.py, reductions.py, misc.py (factories, cat, pad,
indexing), scatter.py (scatter / index_put, in place into a copy of self), extern.py (ops kept
whole + the ATen fallback). graph.py walks the FX graph.

Modules, in the order data flows through them:
    graph                 walks the FX graph, builds the IR
    registry              the lowering table and shared helpers
    pointwise             elementwise ops
    views                 views as index expressions
    reductions            reductions
    split_reduction       long reductions in two stages
    misc                  factories, cat, pad, indexing
    scatter               the scatter family
    embedding_bag         embedding_bag as a scatter
    pooling               small-window pooling
    scan                  cumulative scans
    sort                  sort, topk, median
    search                searchsorted, bucketize
    special               special functions
    special_extra         more special functions
    special_polynomials   orthogonal polynomials
    special_coefficients  coefficient tables
    extern                ops kept whole and the per-op ATen fallback
"""

from tracetorch.compiler.backend.lowering import (  # noqa: F401
    extern, misc, pointwise, pooling, reductions, scan, search, sort, special, views)
from tracetorch.compiler.backend.lowering import embedding_bag, scatter  # noqa: F401
from tracetorch.compiler.backend.lowering import special_extra, special_polynomials  # noqa: F401
from tracetorch.compiler.backend.lowering.graph import GraphFallback, GraphLowering, user_location
from tracetorch.compiler.backend.lowering.registry import LOWERINGS, NotLowerable, register_lowering


def lower_graph(gm, example_inputs) -> GraphLowering:
    return GraphLowering(gm, example_inputs).run()


__all__ = ["lower_graph", "GraphLowering", "GraphFallback", "LOWERINGS", "NotLowerable", "register_lowering",
           "user_location"]
