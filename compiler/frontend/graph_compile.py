"""Turning the FX graph built so far into a GraphModule, logging it (graph, graph_code,
graph_sizes) and handing it to the backend."""
from __future__ import annotations

import itertools

import torch
import torch.fx

from tracetorch import logs
from tracetorch.compiler.aot.inference import INPUTS_GUARDED, guarded_signature
from tracetorch.compiler.frontend.codegen import collect_graph_values

_graph_counter = itertools.count()


def compile_graph(tx, values):
    """Make the graph return every tensor/symbolic value in `values`; call the backend.
    Returns (compiled callable or None, {node: output index}, GraphModule or None)."""
    out = tx.output
    needed = collect_graph_values(values, [])
    nodes = []
    for v in needed:
        if v.node not in nodes:
            nodes.append(v.node)
    if not out.has_ops() and not nodes:
        return None, {}, None
    graph = out.graph
    graph.output(tuple(nodes))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph, class_name="GraphModule")
    gm.graph.lint()
    k = next(_graph_counter)
    name = f"__compiled_fn_{_cid_text(tx.ctx.compile_id)}_{k}"
    _log_graph(gm, name)
    if all(map(_static_tensor, out.input_fakes)):
        # each input has a TENSOR_MATCH guard with every size and stride (output_graph.add_input),
        # checked before each call: the backend need not check the inputs again
        gm.meta[INPUTS_GUARDED] = guarded_signature(out.example_inputs)
    compiled = tx.ctx.backend(gm, list(out.example_inputs))
    compiled_named = _named(compiled, name)
    tx.ctx.graphs.append(gm)
    return compiled_named, {n: i for i, n in enumerate(nodes)}, gm


def _static_tensor(fake) -> bool:
    return isinstance(fake, torch.Tensor) and not any(
        isinstance(s, torch.SymInt) for s in (*fake.shape, *fake.stride()))


def _cid_text(cid):
    return str(cid).replace("/", "_") if cid is not None else "x"


def _named(fn, name):
    """A tiny wrapper whose repr names the graph (for the readable source and tracebacks)."""
    def call(*args):
        return fn(*args)
    call.__name__ = call.__qualname__ = name
    return call


def _log_graph(gm, name):
    logs.artifact("graph", lambda: f"TRACED GRAPH {name}\n{_tabular(gm)}")
    logs.artifact("graph_code", lambda: f"TRACED GRAPH {name}\n" + gm.print_readable(print_output=False))
    logs.artifact("graph_sizes", lambda: f"TRACED GRAPH TENSOR SIZES {name}\n{_sizes(gm)}")


def _tabular(gm):
    rows = [("opcode", "name", "target", "args", "kwargs")]
    for n in gm.graph.nodes:
        rows.append((n.op, n.name, _tname(n.target), str(n.args), str(n.kwargs)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _tname(t):
    if isinstance(t, str):
        return t
    return getattr(t, "__name__", str(t))


def _sizes(gm):
    lines = []
    for n in gm.graph.nodes:
        ex = n.meta.get("example_value")
        if isinstance(ex, torch.Tensor):
            lines.append(f"{n.name}: {tuple(ex.shape)}")
        elif ex is not None and n.op != "output":
            lines.append(f"{n.name}: {ex}")
    return "\n".join(lines)


