"""Ops kept whole (matmul, convolution, attention) and the generic ATen fallback.

Both become nodes the wrapper calls directly with realized tensors: ir.ExternKernel for the
ops we choose not to generate (vendor libraries are better at them), ir.FallbackKernel for
everything without a lowering (logged as a perf hint by the graph lowering).
"""

from __future__ import annotations

import torch

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops
from tracetorch.compiler.backend.lowering.registry import aten, register_lowering, to_sympy

log = logs.get_logger(__name__)

#: ops the aot stage keeps whole and the backend calls as extern kernels
EXTERN_OPS = [
    aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
    aten.convolution.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
]


def layout_from_meta(v) -> ir.Layout:
    """Layout of a tensor the wrapper holds (input, constant, ATen result). Offsets in the IR are
    relative to the tensor's data_ptr() (what kernels receive), so the storage offset is 0 here;
    views of it (ReinterpretView) carry offsets relative to it."""
    return ir.Layout([to_sympy(s) for s in v.shape], [to_sympy(s) for s in v.stride()], v.dtype, v.device, 0)


def op_name(target) -> str:
    """`aten.mm.default` for an OpOverload (what the wrapper writes)."""
    if isinstance(target, torch._ops.OpOverload):
        ns = target.namespace
        return f"{ns if ns != 'aten' else 'aten'}.{target._schema.name.split('::')[-1]}.{target._overloadname}" \
            if ns == "aten" else f"torch.ops.{ns}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', str(target))}"


def _fresh_allocation(graph, fx_arg: torch.fx.Node, origins) -> ir.ExternKernel:
    """torch.empty_strided in the eager tensor's layout: an empty_* value for an ATen call (its
    values are undefined, so no kernel fills them)."""
    val = fx_arg.meta["val"]
    layout = layout_from_meta(val)
    node = ir.ExternKernel(graph.new_name(), layout, "aten.empty_strided.default",
                           [list(layout.size), list(layout.stride)],
                           {"dtype": val.dtype, "device": val.device}, origins=origins)
    graph.register_buffer(node)
    return node


def make_extern(ctx, args, kwargs, *, cls=ir.ExternKernel, reason=None):
    """An extern/fallback call of ctx.node.target on realized inputs; returns the IR value(s)
    matching the node's output (a buffer, or a tuple of buffers / sympy ints / None)."""
    graph = ctx.graph
    # one value read by several extern calls (GPT-2's attention mask, by all 12 layers) is
    # stored once: each realize of the same lazy value made a buffer (and a kernel) of its own.
    # Not for an op that writes its arguments (the stored value would change under the others)
    shared = graph.extern_realized
    schema = getattr(ctx.node.target, "_schema", None)
    writes = schema is None or schema.is_mutable

    def realize(a, fx_arg=None):
        if getattr(a, "uninitialized", False) and isinstance(fx_arg, torch.fx.Node) \
                and isinstance(fx_arg.meta.get("val"), torch.Tensor):
            return _fresh_allocation(graph, fx_arg, ctx.origins)
        if isinstance(a, ir.IRNode):
            done = shared.get(id(a))
            if done is not None and done[0] is a and not writes:
                return done[1]
            # stored with the strides eager's tensor has (when dense), as ATen ops may care;
            # once for every reader of the node (an op that writes it gets a copy of its own)
            node = fx_arg if isinstance(fx_arg, torch.fx.Node) else None
            buf = graph.realize(a, node) if writes else graph.store_for_readers(a, node)
            if not writes:
                shared[id(a)] = (a, buf)
            return buf
        if isinstance(a, (list, tuple)):
            subs = fx_arg if isinstance(fx_arg, (list, tuple)) and len(fx_arg) == len(a) else [None] * len(a)
            return type(a)(realize(x, f) for x, f in zip(a, subs))
        return a

    fx_args = list(ctx.node.args) + [None] * max(0, len(args) - len(ctx.node.args))
    args = [realize(a, f) for a, f in zip(args, fx_args)]
    kwargs = {k: realize(v, ctx.node.kwargs.get(k)) for k, v in kwargs.items()}
    val = ctx.val
    kernel = op_name(ctx.node.target)
    extra = {"reason": reason} if cls is ir.FallbackKernel else {}
    if isinstance(val, torch.Tensor):
        node = cls(graph.new_name(), layout_from_meta(val), kernel, args, kwargs, origins=ctx.origins, **extra)
        graph.register_buffer(node)
        return node
    if isinstance(val, (list, tuple)):
        parent = cls(graph.new_name(), None, kernel, args, kwargs, origins=ctx.origins, **extra)
        graph.register_buffer(parent)
        outs = []
        for i, v in enumerate(val):
            if isinstance(v, torch.Tensor):
                mo = ir.MultiOutput(graph.new_name(), layout_from_meta(v), parent, i, origins=ctx.origins)
                graph.register_buffer(mo)
                outs.append(mo)
            elif isinstance(v, (int, torch.SymInt)):
                outs.append(to_sympy(v))
            else:
                outs.append(v)
        return tuple(outs)
    if val is None:
        # called for its effect only (e.g. _linalg_check_errors, which raises on a singular
        # input as eager does): the wrapper still makes the call, in graph order
        node = cls(graph.new_name(), None, kernel, args, kwargs, origins=ctx.origins, **extra)
        graph.register_buffer(node)
        graph.side_effects.append(node.name)     # no reader: dead-code elimination must keep it
        return None
    raise NotImplementedError(f"extern call with output {type(val).__name__}")


def _extern(ctx, *args, **kwargs):
    return make_extern(ctx, list(args), kwargs)


def convolution(ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """A convolution on CUDA with its bias added in our kernels: ATen's cuDNN path adds the bias
    in a kernel of its own after every convolution (`add_`: ConvNeXt-T's 22 convolutions spent
    0.23 ms per call there, and a launch each); as a pointwise add it fuses into the consumer
    (the LayerNorm after a depthwise convolution). Elsewhere (CPU: oneDNN adds it inside) the
    call is kept whole (config backend.conv_bias)."""
    rest = [stride, padding, dilation, transposed, output_padding, groups]
    val = ctx.val
    mode = config.backend.conv_bias
    in_kernel = mode == "kernel" or (mode == "auto" and isinstance(val, torch.Tensor) and val.device.type == "cuda")
    if bias is None or not in_kernel or not isinstance(val, torch.Tensor) or val.dim() < 3 \
            or not isinstance(bias, ir.IRNode) or len(bias.get_size()) != 1:
        if bias is not None:
            log.debug("conv_bias", node=ctx.node.name, where="extern", mode=mode,
                      reason="kept inside the ATen call (backend.conv_bias, device or bias shape)")
        return make_extern(ctx, [x, weight, bias] + rest, {})
    log.debug("conv_bias", node=ctx.node.name, where="kernel", mode=mode,
              reason="added by a pointwise op that fuses into the consumer (cuDNN would add it in a kernel of its own)")
    conv = make_extern(ctx, [x, weight, None] + rest, {})
    conv_ld, bias_ld = conv.make_loader(), bias.make_loader()
    dtype = val.dtype

    def add_bias(idx):
        b = bias_ld([idx[1]])
        if bias.get_dtype() != dtype:
            b = ops.to_dtype(b, dtype)
        return ops.add(conv_ld(idx), b)

    return ir.Pointwise(conv.get_size(), add_bias, dtype, val.device, origins=ctx.origins, cost=2)


import tracetorch.compiler.aot.decompose  # noqa: E402,F401  (registers tracetorch::sdpa)

EXTERN_OPS.append(torch.ops.tracetorch.sdpa.default)

for _op in EXTERN_OPS:
    register_lowering(_op)(convolution if _op is aten.convolution.default else _extern)
