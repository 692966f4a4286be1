"""The edits the minifier makes to a failing graph. Each returns a new graph; none mutates its input.

Nodes are referred to by name (names survive `graph_copy`). Every edit ends with `normalize`:
dead-code elimination, then dropping placeholders nobody reads, so a candidate is always as
small as its edit allows. Each node carries `meta["repro_spec"]`, the metadata of its value
(computed once by running the original graph eagerly), which is what lets any tensor-valued node
become a fresh input.
"""

from __future__ import annotations

import torch.fx as fx

SPEC = "repro_spec"


def copy_graph(graph: fx.Graph) -> tuple[fx.Graph, dict]:
    g = fx.Graph()
    env: dict = {}
    out = g.graph_copy(graph, env)
    g.output(out)
    for old, new in env.items():
        if SPEC in old.meta:
            new.meta[SPEC] = old.meta[SPEC]
    by_name = {new.name: new for new in env.values()}
    return g, by_name


def compute_nodes(graph: fx.Graph) -> list[fx.Node]:
    return [n for n in graph.nodes if n.op not in ("placeholder", "output")]


def output_node(graph: fx.Graph) -> fx.Node:
    return next(n for n in reversed(graph.nodes) if n.op == "output")


def output_values(graph: fx.Graph) -> list:
    """The flat list of returned values (FX returns a tuple/list, or a single value)."""
    out = output_node(graph).args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def is_tensor_node(node: fx.Node) -> bool:
    spec = node.meta.get(SPEC)
    return spec is not None and spec.get("kind") == "tensor"


def _is_impure(node: fx.Node) -> bool:
    if node.op == "call_function":
        try:
            return node.is_impure()
        except Exception:
            return False
    return False


def normalize(graph: fx.Graph) -> fx.Graph:
    """Dead-code elimination, then unused placeholders removed."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(graph.nodes)):
            if node.op in ("placeholder", "output") or node.users or _is_impure(node):
                continue
            graph.erase_node(node)
            changed = True
    for node in list(graph.nodes):
        if node.op == "placeholder" and not node.users:
            graph.erase_node(node)
    return graph


def _set_outputs(graph: fx.Graph, values: list) -> None:
    out = output_node(graph)
    out.args = (tuple(values),)


def truncate(graph: fx.Graph, keep: int) -> fx.Graph | None:
    """Keep the first `keep` compute nodes; return every kept tensor with no kept user."""
    g, _ = copy_graph(graph)
    nodes = compute_nodes(g)
    if keep >= len(nodes) or keep <= 0:
        return None
    kept = set(nodes[:keep])
    frontier = [n for n in nodes[:keep] if is_tensor_node(n) and not any(u in kept for u in n.users)]
    if not frontier:
        return None
    _set_outputs(g, frontier)
    # Past the cut, every node's users are later nodes, so erasing backwards always succeeds.
    for node in reversed(nodes[keep:]):
        g.erase_node(node)
    return normalize(g)


def replace_with_inputs(graph: fx.Graph, names: list[str]) -> fx.Graph | None:
    """Every named node's result becomes a fresh input of the same metadata; its producers die."""
    g, by_name = copy_graph(graph)
    targets = [by_name[n] for n in names if n in by_name and is_tensor_node(by_name[n])]
    if not targets:
        return None
    # Inputs go before every compute node; all are created before any target is erased.
    first = next(n for n in g.nodes if n.op != "placeholder")
    fresh = []
    for node in targets:
        with g.inserting_before(first):
            ph = g.placeholder(f"{node.name}_input")
        ph.meta[SPEC] = node.meta[SPEC]
        fresh.append(ph)
    for node, ph in zip(targets, fresh):
        node.replace_all_uses_with(ph)
    for node in reversed(targets):
        if not node.users:
            g.erase_node(node)
    return normalize(g)


def keep_outputs(graph: fx.Graph, indices: list[int]) -> fx.Graph | None:
    g, _ = copy_graph(graph)
    values = output_values(g)
    if not indices or len(indices) >= len(values):
        return None
    _set_outputs(g, [values[i] for i in indices])
    return normalize(g)


def placeholder_specs(graph: fx.Graph) -> list[dict]:
    return [n.meta[SPEC] for n in graph.nodes if n.op == "placeholder"]


def replaceable(graph: fx.Graph) -> list[str]:
    """Names of compute nodes that can become inputs (tensor-valued), in graph order."""
    return [n.name for n in compute_nodes(graph) if is_tensor_node(n)]
