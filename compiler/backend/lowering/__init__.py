"""Lowering: aten ops of the post-aot FX graph -> the loop-level IR (compiler/backend/ir.py).

Split by op family: pointwise.py, views.py, reductions.py, misc.py (factories, cat, pad,
indexing), scatter.py (scatter / index_put, in place into a copy of self), extern.py (ops kept
whole + the ATen fallback). graph.py walks the FX graph.
"""

from tracetorch.compiler.backend.lowering import extern, misc, pointwise, pooling, reductions, scan, search, sort, special, views  # noqa: F401
from tracetorch.compiler.backend.lowering import embedding_bag, scatter  # noqa: F401
from tracetorch.compiler.backend.lowering import special_extra, special_polynomials  # noqa: F401
from tracetorch.compiler.backend.lowering.graph import GraphFallback, GraphLowering, user_location
from tracetorch.compiler.backend.lowering.registry import LOWERINGS, NotLowerable, register_lowering


def lower_graph(gm, example_inputs) -> GraphLowering:
    return GraphLowering(gm, example_inputs).run()


__all__ = ["lower_graph", "GraphLowering", "GraphFallback", "LOWERINGS", "NotLowerable", "register_lowering",
           "user_location"]
