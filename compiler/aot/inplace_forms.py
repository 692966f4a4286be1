"""In-place calls rewritten as `x.copy_(x.<functional op>(...))` before functionalization.

Some in-place ops reach a Python reference whose in-place body calls another in-place op with
no symbolic-size kernel: `x.index_fill_(0, idx, v)` at dynamic sizes runs torch._refs'
index_fill_, which calls index_copy_ and fails with "SymIntArrayRef expected to contain only
concrete integers", so the whole graph ran eagerly. The functional op traces (it decomposes
through the table), and the copy_ back is what functionalization makes of any input mutation.
Same values, same result object (copy_ returns x).
"""

from __future__ import annotations

import copy

import torch

from tracetorch import logs

log = logs.get_logger(__name__)

#: in-place method -> its functional method (the in-place reference fails at symbolic sizes)
FUNCTIONAL_FORM = {"index_fill_": "index_fill"}


def functional_inplace_calls(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """gm with each listed in-place method call rewritten (a new GraphModule; gm is left as is)."""
    hits = [n.name for n in gm.graph.nodes if n.op == "call_method" and n.target in FUNCTIONAL_FORM]
    if not hits:
        return gm
    graph = copy.deepcopy(gm.graph)
    for n in list(graph.nodes):
        if n.name not in hits:
            continue
        with graph.inserting_before(n):
            value = graph.call_method(FUNCTIONAL_FORM[n.target], n.args, n.kwargs)
            value.meta = dict(n.meta)
            copied = graph.call_method("copy_", (n.args[0], value))
            copied.meta = dict(n.meta)
        n.replace_all_uses_with(copied)
        graph.erase_node(n)
    log.debug("aot_inplace_as_functional", nodes=hits,
              reason="the in-place reference fails at symbolic sizes; its functional op traces")
    return torch.fx.GraphModule(gm, graph)
