"""In-place calls rewritten as `x.copy_(x.<functional op>(...))` before functionalization.

An in-place method on a fake tensor runs its Meta kernel, which for many ops is a Python
reference (torch._refs) written around other in-place calls or `out=`; several of those have no
symbolic-size path or trip functionalization: `index_fill_` (via index_copy_), `clamp_`,
`clamp_min_`, `floor_divide_`, `nan_to_num_`, `masked_fill_` with a tensor value fail with
"SymIntArrayRef expected to contain only concrete integers" at dynamic sizes, `square_` with
"a custom (non-ATen) operator whose output has alias annotations" at any size, and the whole
graph ran eagerly. The functional op traces (it decomposes through the table), and the copy_
back is what functionalization makes of any in-place op anyway: the same values (the in-place
op computes in the promoted dtype and casts to x's, as copy_ does), the same result object
(copy_ returns x). Every in-place method with a functional twin is rewritten, except those that
change only metadata (squeeze_, t_, ..., run as ATen ops by the backend) and random ones (their
RNG use must stay eager's).
"""

from __future__ import annotations

import copy

import torch

from tracetorch import logs

log = logs.get_logger(__name__)

#: in-place methods kept as they are: metadata changes, random draws, copy_ itself
KEPT = {"as_strided_", "detach_", "resize_", "resize_as_", "squeeze_", "unsqueeze_", "swapaxes_", "swapdims_",
        "t_", "transpose_", "bernoulli_", "copy_", "set_", "requires_grad_", "share_memory_"}


def _functional_form(name) -> str | None:
    """The functional method of in-place method `name` (None: keep the call)."""
    if not isinstance(name, str) or not name.endswith("_") or name.startswith("_") or name in KEPT:
        return None
    return name[:-1] if callable(getattr(torch.Tensor, name[:-1], None)) else None


def functional_inplace_calls(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """gm with each listed in-place method call rewritten (a new GraphModule; gm is left as is)."""
    hits = [n.name for n in gm.graph.nodes if n.op == "call_method" and _functional_form(n.target)]
    if not hits:
        return gm
    graph = copy.deepcopy(gm.graph)
    for n in list(graph.nodes):
        if n.name not in hits:
            continue
        with graph.inserting_before(n):
            value = graph.call_method(_functional_form(n.target), n.args, n.kwargs)
            value.meta = dict(n.meta)
            copied = graph.call_method("copy_", (n.args[0], value))
            copied.meta = dict(n.meta)
        n.replace_all_uses_with(copied)
        graph.erase_node(n)
    log.debug("aot_inplace_as_functional", nodes=hits,
              reason="in-place references fail at symbolic sizes; the functional op traces")
    return torch.fx.GraphModule(gm, graph)
