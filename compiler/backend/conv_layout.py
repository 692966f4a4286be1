"""Channels-last activations for convolution graphs (Inductor's layout_optimization).

cuDNN's fast bfloat16/float16 convolutions work on NHWC data. Eager PyTorch keeps NCHW tensors,
so every convolution pays a transpose in and out of NHWC inside cuDNN. Here the graph's first
convolution input is converted to channels_last once; after that, convolution outputs are
channels_last, the pointwise ops between convolutions (batch norm, activations, residual adds)
keep that layout (their fake values say so after re-propagation, and our kernels write what the
values say), and so every later convolution gets NHWC input with no transpose at all.

Graph outputs keep the strides eager gives them: an output whose layout changed gets a clone back
to its original (contiguous) format, which fuses into the kernel producing it. Outputs nobody but
our own backward graph reads (a training forward's saved activations, from the position in
`gm.meta[FREE_LAYOUT_OUTPUTS]`) stay channels_last: the backward is compiled for the layouts that
arrive (aot/autograd_function.py), so its convolution gradients get NHWC data too. When anything
does not fit (an op that needs the old strides, say a view that is only valid on NCHW data, or an
output whose eager strides are not contiguous) the graph is left exactly as it was. Every
decision is logged (`conv_layout_*` events on the backend logger).

config.backend.conv_layout: "auto" (the default: channels_last for CUDA graphs with a 4-d
convolution), "channels_last" (also on CPU: tests use it to check the pass), "off". CPU
convolutions in channels_last are slower than NCHW, hence CUDA only. On the H200 (bf16, batch 32,
2026-11-26) cuDNN spent 0.57 ms of ResNet-50's 2.5 ms per call transposing NCHW data around its
convolutions without it. Measure with scripts/ab_frontends.py and TRACE_BACKEND_CONV_LAYOUT=auto|off
before changing it.
"""
from __future__ import annotations

import torch

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.aot.output_layouts import (FREE_LAYOUT_OUTPUTS, fake_mode_of, graph_outputs, repropagate,
                                                    restore_output_strides)

log = logs.get_logger(__name__)
aten = torch.ops.aten

#: re-propagations that each convert one more convolution input before the rest go at once
MAX_ROUNDS = 4


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is_4d(v) -> bool:
    return isinstance(v, torch.Tensor) and v.dim() == 4


def _wanted(gm, convs) -> str | None:
    """None when the pass should run, else why not."""
    mode = config.backend.conv_layout
    if mode == "off":
        return "config.backend.conv_layout is off"
    if not convs:
        return "no 4-d convolution"
    if mode == "auto" and _val(convs[0]).device.type != "cuda":
        return "not a CUDA graph (conv_layout 'auto' changes CUDA graphs only)"
    return None


def use_channels_last(gm: torch.fx.GraphModule) -> bool:
    """Rewrite `gm` in place as described above; True when it changed."""
    graph = gm.graph
    convs = [n for n in graph.nodes
             if n.target is aten.convolution.default and _is_4d(_val(n.args[0])) and _is_4d(_val(n))]
    why_not = _wanted(gm, convs)
    if why_not is not None:
        if convs:
            log.debug("conv_layout_unchanged", reason=why_not, convolutions=len(convs))
        return False
    fake_mode = fake_mode_of(gm)
    if fake_mode is None:
        log.debug("conv_layout_unchanged", reason="graph inputs carry no fake values")
        return False

    saved_vals = {n: n.meta.get("val") for n in graph.nodes}
    added = []

    def undo(reason):
        for n in reversed(added):
            n.replace_all_uses_with(n.args[0])
            graph.erase_node(n)
        for n, v in saved_vals.items():
            if n.graph is graph:
                n.meta["val"] = v
        log.info("conv_layout_unchanged", reason=reason, convolutions=len(convs))
        return False

    def propagate():
        repropagate(gm, fake_mode)

    def convert(conv):
        x = conv.args[0]
        with graph.inserting_before(conv):
            cl = graph.call_function(aten.clone.default, (x,), {"memory_format": torch.channels_last})
        added.append(cl)
        conv.replace_input_with(x, cl)

    def needing():
        return [c for c in convs if not _val(c.args[0]).is_contiguous(memory_format=torch.channels_last)]

    # Convert the first convolution's input and re-propagate: usually every later convolution's
    # input is channels_last by then. A few more rounds for inputs that are not (after a reshape,
    # say); past that, convert all that are left at once.
    try:
        for round_ in range(MAX_ROUNDS + 1):
            todo = needing()
            if not todo:
                break
            for conv in (todo if round_ == MAX_ROUNDS else todo[:1]):
                convert(conv)
            propagate()
    except Exception as e:         # an op that needs the NCHW strides (e.g. a view)
        return undo(f"re-propagating channels_last failed: {type(e).__name__}: {e}"[:300])
    converted = added[:]
    n_outs = len(graph_outputs(graph)[1])
    free_from = gm.meta.get(FREE_LAYOUT_OUTPUTS, n_outs)
    try:
        filters = _save_converted_filters(graph, convs, free_from, added)
        if filters and not _filters_propagated(added[-filters:], fake_mode):
            propagate()
    except Exception as e:
        return undo(f"re-propagating the saved channels_last filters failed: {type(e).__name__}: {e}"[:300])
    bad = restore_output_strides(gm, saved_vals, free_from, added)
    if bad is not None:
        return undo(bad)
    graph.lint()
    gm.recompile()
    log.info("conv_layout_channels_last", convolutions=len(convs), converted_inputs=len(converted),
             outputs_restored=len(added) - len(converted) - filters, filters_saved_channels_last=filters,
             outputs_kept_channels_last=max(0, n_outs - free_from))
    return True


def _filters_propagated(copies, fake_mode) -> bool:
    """Give the filter copies (_save_converted_filters) and the convolutions reading them their
    fake values without re-propagating the whole graph (a fake pass over ResNet-50's training
    forward: 0.4 s of its cold compile). True when every such convolution's value kept its sizes
    and strides (its input, channels_last already, decides them), so nothing later changes;
    False (the caller re-propagates) otherwise."""
    with fake_mode:
        for copy in copies:
            copy.meta["val"] = _val(copy.args[0]).clone(memory_format=torch.channels_last)
        for copy in copies:
            for conv in list(copy.users):
                if conv.op != "call_function":
                    continue
                old = _val(conv)
                args, kwargs = torch.fx.node.map_arg((conv.args, conv.kwargs), _val)
                new = conv.target(*args, **kwargs)
                if not isinstance(old, torch.Tensor) or not isinstance(new, torch.Tensor) \
                        or (new.shape, new.stride()) != (old.shape, old.stride()):
                    return False
                conv.meta["val"] = new
    return True


def _save_converted_filters(graph, convs, free_from: int, added: list) -> int:
    """A training forward that saves a spatial filter (a graph input) for its backward converts
    it to channels_last in the graph, convolves with the copy and saves the copy: the backward
    receives it in the layout its convolution gradient wants (ResNet-50: 17 filters that cuDNN
    converted again inside every convolution backward, besides the forward's own conversion in
    the output code's `channels_last_weight`). The number of filters converted so."""
    output, outs = graph_outputs(graph)
    saved = {o for o in outs[free_from:] if isinstance(o, torch.fx.Node)}
    copies: dict = {}          # filter -> its channels_last copy (a filter several convolutions share)
    for conv in convs:
        w = conv.args[1]
        if not (isinstance(w, torch.fx.Node) and w.op == "placeholder" and w in saved):
            continue
        wv, xv = _val(w), _val(conv.args[0])
        if wv.shape[2] == 1 and wv.shape[3] == 1:      # a 1x1 filter is channels_last already
            continue
        if not xv.is_contiguous(memory_format=torch.channels_last):
            continue
        if w not in copies:
            with graph.inserting_before(conv):
                copies[w] = graph.call_function(aten.clone.default, (w,), {"memory_format": torch.channels_last})
            added.append(copies[w])
        conv.replace_input_with(w, copies[w])
    if copies:
        outs = [copies.get(o, o) if k >= free_from and isinstance(o, torch.fx.Node) else o
                for k, o in enumerate(outs)]
        output.args = (type(output.args[0])(outs) if isinstance(output.args[0], (list, tuple)) else outs[0],)
    return len(copies)

