"""Functionalization for the inference path: no mutation inside the traced graph.

`functional_flat_fn(gm)` returns a function of the graph inputs that runs `gm` under
torch.func.functionalize (remove="mutations"): in-place ops become their functional variants, and
a mutated graph input gets a `copy_` from its final value at the very end of the traced graph
(the write-back). The function returns the flattened outputs; `spec` (filled when traced) is
the pytree spec to rebuild the original output structure. While it runs, each FX node's meta
(stack_trace, ...) is made current, so every aten node traced from it inherits its provenance.
"""

from __future__ import annotations

import torch
import torch.fx.traceback as fx_traceback
from torch.utils import _pytree as pytree


_SDPA = {torch.nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}


class _Interp(torch.fx.Interpreter):
    def run_node(self, n):
        with fx_traceback.set_current_meta(n):
            return super().run_node(n)

    def call_function(self, target, args, kwargs):
        # attention is kept whole: one tracetorch::sdpa node (torch picks its fused kernel at run
        # time) instead of the decomposition scaled_dot_product_attention would trace into
        if target in _SDPA and not kwargs.get("enable_gqa", False):
            from tracetorch.compiler.aot.decompose import sdpa_call
            out = sdpa_call(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return super().call_function(target, args, kwargs)


class FlatFunction:
    """Callable f(*inputs) -> flat list of outputs, recording the output spec when traced."""

    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.spec = None

    def __call__(self, *args):
        out = _Interp(self.gm).run(*args)
        flat, self.spec = pytree.tree_flatten(out)
        return flat


def functional_flat_fn(gm: torch.fx.GraphModule):
    flat = FlatFunction(gm)
    return torch.func.functionalize(flat, remove="mutations"), flat


def count_mutations(traced: torch.fx.GraphModule) -> int:
    """Input write-backs (copy_ into a placeholder) in a functionalized trace."""
    return sum(1 for n in traced.graph.nodes
               if n.op == "call_function" and n.target is torch.ops.aten.copy_.default)
