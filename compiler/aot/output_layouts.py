"""Fake-value layouts of a graph whose input layouts changed after tracing.

Two stages change the strides a graph was traced with: the backend's channels-last pass
(backend/conv_layout.py) rewrites a convolution graph's activations, and a training backward
receives the saved activations in whatever layout the compiled forward produced
(aot/autograd_function.py). Both re-propagate fake values through the graph, so that the backend
reads the layouts that will really arrive (an ATen call whose output layout follows its input's,
a convolution's gradient say, would otherwise be copied back to the traced strides by the
wrapper's `ensure_layout` on every call), and both give the outputs that someone else reads
their traced strides back.
"""
from __future__ import annotations

import torch

from tracetorch.compiler.aot.sizes import GuardFreeFakeProp

aten = torch.ops.aten

#: gm.meta key: outputs from this position on are read only by our own backward graph, which is
#: compiled for whatever layout arrives (a training forward's saved activations)
FREE_LAYOUT_OUTPUTS = "tracetorch_free_layout_outputs_from"


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def graph_outputs(graph: torch.fx.Graph):
    """(the output node, its list of returned values)."""
    output = next(n for n in graph.nodes if n.op == "output")
    outs = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    return output, list(outs)


def fake_mode_of(gm: torch.fx.GraphModule):
    """The fake mode of the graph's own placeholder values (None when they carry none). Not
    torch._guards.detect_fake_mode: under torch.compile it answers the tracing context's mode
    (Dynamo's) first, while our aot stage traced these values in a mode of its own, and
    re-propagating in Dynamo's failed with "Mixing fake modes"."""
    for n in gm.graph.nodes:
        mode = getattr(_val(n), "fake_mode", None) if n.op == "placeholder" else None
        if mode is not None:
            return mode
    return None


def repropagate(gm: torch.fx.GraphModule, fake_mode) -> None:
    """Recompute every node's fake value from the placeholders' (which the caller set), guarding
    no symbolic size (sizes.fake_call)."""
    with fake_mode:
        GuardFreeFakeProp(gm, mode=fake_mode).propagate_dont_convert_inputs(
            *[_val(n) for n in gm.graph.nodes if n.op == "placeholder"])


def restore_output_strides(gm: torch.fx.GraphModule, saved_vals: dict, free_from: int, added: list) -> str | None:
    """Give each output before position `free_from` whose fake value's strides changed from
    `saved_vals[output]` a clone back to its saved (contiguous) format; new nodes go to `added`.
    None when done, else why an output cannot be restored (its saved strides are not
    contiguous). Nothing is recompiled here."""
    graph = gm.graph
    output, outs = graph_outputs(graph)
    for k, o in enumerate(outs):
        old, new = saved_vals.get(o), _val(o)
        if k >= free_from or not isinstance(old, torch.Tensor) or not isinstance(new, torch.Tensor) \
                or tuple(new.stride()) == tuple(old.stride()):
            continue
        if not old.is_contiguous():
            return f"output {o.name} had non-contiguous traced strides {tuple(old.stride())}"
        with graph.inserting_before(output):
            if _same_memory_order(o, new, outs):
                # strides that differ only where a size is 1 (a 1x1 convolution's weight
                # gradient in channels_last): the same bytes in the same order, so a view with
                # the traced strides instead of a copy kernel (ResNet-50's backward: 36 launches)
                back = graph.call_function(aten.as_strided.default,
                                           (o, list(old.size()), list(old.stride()), new.storage_offset()))
            else:
                back = graph.call_function(aten.clone.default, (o,), {"memory_format": torch.contiguous_format})
        back.meta["val"] = old
        added.append(back)
        output.replace_input_with(o, back)
    return None


def _same_memory_order(node, val, outs) -> bool:
    """`val` (node's new fake value) is contiguous already (torch ignores the strides of size-1
    dims) and node is returned once and read by nothing else, so a view of it aliases no other
    output and no input."""
    return (node.op == "call_function" and val.is_contiguous() and outs.count(node) == 1
            and all(u.op == "output" for u in node.users))
