"""Functionalization for the inference path: no mutation inside the traced graph.

`functional_flat_fn(gm)` returns a function of the graph inputs that runs `gm` under
torch.func.functionalize (remove="mutations"): in-place ops become their functional variants, and
a mutated graph input gets a `copy_` from its final value at the very end of the traced graph
(the write-back). The function returns the flattened outputs; `spec` (filled when traced) is
the pytree spec to rebuild the original output structure. While it runs, each FX node's meta
(stack_trace, ...) is made current, so every aten node traced from it inherits its provenance.

Inputs whose elements share memory (expanded: stride 0) are the one place where the functional
model differs from eager's memory: functionalization treats each element as its own value, so
`x[-1:].fill_(v)` on `x = b.expand(4, 3)` changes only the last row, while eager's write reaches
every row (they are one row of memory). After any node that changed such an input, the input is
re-synchronized (`_resync`): each memory location takes the value written to one of its
elements, so later reads and the final write-back see eager's values.
"""

from __future__ import annotations

import torch
import torch.fx.traceback as fx_traceback
from torch.utils import _pytree as pytree

from tracetorch import logs

_log = logs.get_logger(__name__)


_SDPA = {torch.nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}


def _shared_dims(t) -> list[int]:
    """Dims along which a tensor's elements share memory (a static stride 0 and size > 1)."""
    return [d for d, (n, st) in enumerate(zip(t.shape, t.stride()))
            if type(st) is int and st == 0 and not (type(n) is int and n <= 1)]


def _resync(new: torch.Tensor, old: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """`new` with the elements that share a location (along `dims`) made equal: each location
    takes the last element along the dims that differs from its old value (`old`, consistent
    already), or the old value if none does. Eager's last write wins; the functional value does
    not record the order of writes, so this matches eager when one element per location was
    written or all were written with one value (zero_, fill_, a write along another dim)."""
    shape = new.shape
    for d in dims:
        base = old.narrow(d, 0, 1)
        changed = new != base
        if new.dtype.is_floating_point or new.dtype.is_complex:
            changed = changed & ~(torch.isnan(new) & torch.isnan(base))
        view = [1] * new.dim()
        view[d] = -1
        order = torch.arange(1, new.shape[d] + 1, device=new.device).view(view)
        last = (changed.to(torch.int64) * order).amax(d, keepdim=True)
        picked = torch.gather(new, d, (last - 1).clamp(min=0))
        new = torch.where(last > 0, picked, base)
        old = base
    return new.expand(shape)


class _Interp(torch.fx.Interpreter):
    def run(self, *args, **kwargs):
        # functional input -> (shared dims, its last synchronized inner tensor, its value then)
        self._shared = {}
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and torch._is_functional_tensor(a) and _shared_dims(a):
                self._shared[i] = (a, _shared_dims(a), torch._from_functional_tensor(a), a.clone())
        return super().run(*args, **kwargs)

    def run_node(self, n):
        with fx_traceback.set_current_meta(n):
            out = super().run_node(n)
            if self._shared and n.op not in ("placeholder", "output"):
                self._resync_shared(n)
            return out

    def _resync_shared(self, n):
        for i, (x, dims, inner, old) in list(self._shared.items()):
            if not torch._functionalize_has_data_mutation(x):
                continue
            torch._sync(x)
            if torch._from_functional_tensor(x) is inner:
                continue           # nothing changed since the last synchronization
            with torch.no_grad():
                value = _resync(x.clone(), old, dims)
                x.copy_(value)
            torch._sync(x)
            self._shared[i] = (x, dims, torch._from_functional_tensor(x), value.clone())
            _log.debug("aot_shared_input_resync", node=n.name, input=i,
                       reason="an input whose elements share memory was written: one value per location")

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
