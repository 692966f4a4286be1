"""The decomposition table: aten ops -> a small primitive set (PrimTorch-style).

Base: torch._decomp's core ATen decompositions, plus the composite ops that table leaves whole
(softmax, layer norm, gelu, ...), so the backend sees pointwise ops and simple reductions it can
fuse. Kept whole on purpose (KEEP_WHOLE): matmuls, convolution and attention, which the backend
calls as extern kernels (vendor libraries beat generated code there). `decomposition_table()` is
shared with the training path (compiler/aot/joint.py).
"""

from __future__ import annotations

import contextlib

import functools
import weakref
from typing import Optional

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from tracetorch import logs
from tracetorch.compiler.aot.sizes import example_size, size_expr

log = logs.get_logger(__name__)
aten = torch.ops.aten


def _ops(*names):
    out = []
    for name in names:
        packet, _, overload = name.partition(".")
        p = getattr(aten, packet, None)
        if p is None:
            continue
        if overload:
            if overload in p.overloads():
                out.append(getattr(p, overload))
        else:
            out.append(p)
    return out


#: decomposed although core ATen keeps them (our lowering handles their pieces and fuses them)
EXTRA = _ops("_softmax", "_log_softmax", "native_layer_norm", "gelu", "native_group_norm",
             "_native_batch_norm_legit_no_training", "hardtanh", "leaky_relu", "silu", "hardswish",
             "hardsigmoid", "mish", "softplus", "logsumexp", "addcmul", "addcdiv", "lerp", "elu", "celu",
             "selu", "threshold", "log_sigmoid_forward", "glu", "nll_loss_forward",
             "mse_loss", "huber_loss", "smooth_l1_loss", "rsub", "xlogy", "logit", "sinc", "frac", "deg2rad",
             "rad2deg", "linalg_vector_norm", "_log_softmax_backward_data", "_adaptive_avg_pool2d",
             "unfold", "upsample_nearest2d", "upsample_bilinear2d", "repeat",
             "addmv", "dist", "ldexp", "_native_batch_norm_legit_functional", "_batch_norm_with_update_functional",
             "native_batch_norm", "_native_batch_norm_legit", "narrow_copy",
             "permute_copy", "view_copy", "unbind_copy", "as_strided_copy", "aminmax",
             "nan_to_num", "max_pool3d_with_indices",
             "upsample_bicubic2d", "upsample_trilinear3d", "grid_sampler_2d")
# (not: the *_scatter decompositions write into a view with copy_, which the traced graph keeps
# as an in-place op; fmin/fmax/round/special functions decompose into prims we do not lower;
# bucketize's reference decomposition has data-dependent sizes, which would make aot tracing of the
# whole graph fail; max_pool2d_with_indices_backward's unrolls into a huge graph;
# max_pool2d_with_indices is lowered whole (lowering/pooling.py: its outputs keep eager's
# channels_last layout, which the decomposition's contiguous max lost). index_put,
# which index_add/index_copy/index_fill become, is lowered: compiler/backend/lowering/scatter.py)

#: never decomposed: called as extern kernels (or kept as one op we lower ourselves)
KEEP_WHOLE = _ops("mm", "bmm", "addmm", "baddbmm", "convolution",
                  "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
                  "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention",
                  "var_mean.correction", "var.correction", "std.correction", "std_mean.correction",
                  "mean.dim", "embedding", "cumsum", "linspace", "logspace")
# (linspace/logspace run as ATen's own kernel: its rounding of start + step * i depends on the
# kernel's vector width and fused multiply-adds, which no decomposition reproduces; one ulp off
# turned `1.5 // (v % v.flip(0))` into 8 instead of 9, fuzz 350079. std/std_mean are lowered
# whole: their square root is taken in the accumulation type, as ATen does, before the cast;
# sqrt(var) overflowed where var exceeds float32 and std does not)


@torch.library.custom_op("tracetorch::sdpa", mutates_args=())
def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
         dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None) -> torch.Tensor:
    """scaled_dot_product_attention kept whole: one graph node that, at run time, lets torch pick
    its fused kernel (flash / memory-efficient on CUDA, the flash CPU kernel, or math)."""
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                                            dropout_p=dropout_p, is_causal=is_causal, scale=scale)


@sdpa.register_fake
def _sdpa_fake(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """The output's memory order follows the query's, as ATen's fused kernels allocate it: a GPT's
    query is a (B, S, H, D) buffer seen as (B, H, S, D), and so is the output. Planning it
    contiguous made the output code copy every attention result into the planned strides."""
    shape = (*query.shape[:-1], value.shape[-1])
    strides = query.stride()
    if all(isinstance(s, int) for s in strides) and all(isinstance(n, int) for n in query.shape):
        order = sorted(range(query.dim()), key=lambda d: (strides[d], d), reverse=True)
        if order[-1] == query.dim() - 1:
            out = query.new_empty([shape[d] for d in order])
            inverse = [order.index(d) for d in range(query.dim())]
            return out.permute(inverse)
    return query.new_empty(shape)


def torch_would_run_math(query, key, value, attn_mask, dropout_p, is_causal, scale) -> bool:
    """Would scaled_dot_product_attention take ATen's unfused math path on these inputs?

    ATen's own choice (`_fused_sdp_choice`), asked on real tensors with the traced values' sizes,
    strides, dtypes and devices, outside the trace. Asked on the traced (fake) values it answered
    MATH where the real call takes cuDNN attention (ViT-B/16 on the H100: its attention then ran
    as float32 batched products, 30% of the call), and the question itself was recorded into the
    graph as a node tagged random, which kept CUDA graphs off. CPU is never asked: only CUDA has
    fused kernels worth keeping whole and a math path worth fusing. Where the sizes are symbolic
    or the inputs large, the op stays whole and ATen picks at run time."""
    if query.device.type != "cuda":
        return False
    choice = aten_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return choice == int(torch.nn.attention.SDPBackend.MATH)


def aten_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, *,
                    mask_contiguous=False, at_example_sizes=False) -> int | None:
    """ATen's kernel choice for attention on tensors like these (fake or real, traced or not),
    asked on real, unfilled tensors of the same sizes, strides, dtypes and devices outside any
    trace; None where it cannot be asked (inputs over the probe limit, an error; symbolic sizes,
    unless at_example_sizes: then asked at their example values, read without a guard, for
    choices that change speed only). mask_contiguous: ask as if the mask were a contiguous
    tensor of its sizes."""
    tensors = [t for t in (query, key, value, attn_mask) if t is not None]
    symbolic = not all(type(n) is int for t in tensors for n in (*t.shape, *t.stride()))
    if symbolic and not at_example_sizes:
        return None                 # symbolic sizes: asking would specialise them
    try:
        shapes = [(tuple(map(example_size, t.shape)), tuple(map(example_size, t.stride()))) for t in tensors]
    except TypeError:               # a size without an example value (an unbacked one)
        return None
    from torch._prims_common import compute_required_storage_length as extent, make_contiguous_strides_for
    if mask_contiguous and attn_mask is not None:
        shapes[-1] = (shapes[-1][0], tuple(make_contiguous_strides_for(shapes[-1][0])))
    nbytes = sum(extent(size, stride, 0) * t.element_size() for (size, stride), t in zip(shapes, tensors))
    if nbytes > _MAX_PROBE_BYTES:
        log.debug("sdpa_choice_not_probed", bytes=nbytes, reason="inputs larger than the probe limit")
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing
    try:
        with unset_fake_temporarily(), disable_proxy_modes_tracing():
            real = [_unfilled(size, stride, t) for (size, stride), t in zip(shapes, tensors)]
            mask = real[3] if attn_mask is not None else None
            choice = int(torch._fused_sdp_choice(real[0], real[1], real[2], mask, dropout_p, is_causal, scale=scale))
    except Exception as exc:   # an input it cannot judge: keep the whole op (torch picks at run time)
        log.debug("sdpa_choice_not_probed", reason=f"{type(exc).__name__}: {exc}"[:300])
        return None
    log.debug("sdpa_choice", choice=choice, inputs=[f"{size}{stride}" for size, stride in shapes])
    return choice


def _mask_for_a_fused_kernel(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The mask as given, or a contiguous copy of it where ATen would run its unfused math path
    for the mask's layout alone. A mask computed in the graph is stored by the backend anyway;
    its traced layout (an expand over batch and keys in BERT, (0, 384, 1, 0); heads innermost in
    T5) made ATen's choice MATH, which the trace then follows into float32 batched products (BERT
    on the H200: 1.5 ms of device time per call), where the same attention on a contiguous mask
    runs cuDNN's kernel."""
    if attn_mask is None or query.device.type != "cuda" or attn_mask.dim() != 4:
        return attn_mask
    from torch._prims_common import make_contiguous_strides_for
    # compared as expressions: comparing symbolic sizes would guard them
    if list(map(size_expr, attn_mask.stride())) == list(map(size_expr, make_contiguous_strides_for(attn_mask.shape))):
        return attn_mask
    # Symbolic sizes (a dynamic batch) are asked at their example values: the copy is right at
    # any size, only its speed depends on the choice (BERT with a dynamic batch kept the expanded
    # mask, and ATen's math path took 12.8 of 13.8 ms per call on the H100)
    math = int(torch.nn.attention.SDPBackend.MATH)
    if aten_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, at_example_sizes=True) != math:
        return attn_mask
    fused = aten_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, mask_contiguous=True,
                            at_example_sizes=True)
    if fused is None or fused == math:
        return attn_mask
    log.debug("sdpa_mask_made_contiguous", mask=list(attn_mask.shape), stride=list(attn_mask.stride()),
              choice=fused, reason="ATen's fused kernels take this attention with a contiguous mask")
    return aten.clone.default(attn_mask, memory_format=torch.contiguous_format)


def _unfilled(size, stride, like):
    t = torch.empty_strided(size, stride, dtype=like.dtype, device=like.device)
    if like.requires_grad and t.is_floating_point():
        # requires_grad_ raises under the trace's functionalization: leave it for a moment
        with _no_functorch():
            t.requires_grad_(True)
    return t


def _no_functorch():
    exclude = getattr(torch._C, "_DisableFuncTorch", None)
    return exclude() if exclude is not None else contextlib.nullcontext()


#: the real tensors ATen's choice is asked on are allocated (not filled) at compile time
_MAX_PROBE_BYTES = 1 << 30


def _additive_mask(attn_mask, dtype, masked_value=float("-inf")):
    """The mask as ATen's kernels take it. scaled_dot_product_attention turns a boolean mask
    (True = attend) into an additive one (0 or -inf, in the query's dtype; -65504 for cuDNN's
    kernel) after it picks a kernel; the math op itself adds whatever mask it gets, so a boolean
    one would add 0 or 1 (Llama's causal mask, on the H100: relative error 1.2)."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    return torch.where(attn_mask, torch.zeros((), dtype=dtype, device=attn_mask.device),
                       torch.full((), masked_value, dtype=dtype, device=attn_mask.device))


#: the value ATen's cuDNN attention gives masked-out positions of a boolean mask (its other
#: kernels use -inf): convert_boolean_attn_mask_cudnn in ATen's attention.cpp
_CUDNN_MASKED = -65504.0


def _kernel_mask(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """A boolean mask converted here, as ATen would convert it for the kernel it picks on these
    inputs: the conversion then fuses into the kernel that computes the mask, where ATen spends
    a `where` and two scalar fills per attention call at run time (on the H200, GPT-2 4x512:
    one attention with the boolean mask 0.042 ms, with the additive one 0.025 ms, both cuDNN).
    Unchanged where the kernel is unknown (CPU, symbolic sizes): ATen converts at run time."""
    if attn_mask is None or attn_mask.dtype != torch.bool or query.device.type != "cuda":
        return attn_mask
    choice = aten_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if choice is None:
        return attn_mask
    cudnn = getattr(torch.nn.attention.SDPBackend, "CUDNN_ATTENTION", None)
    masked = _CUDNN_MASKED if cudnn is not None and choice == int(cudnn) else float("-inf")
    # every layer of a model gets the same mask tensor: converted once, one node for all
    return once_per_tensor(attn_mask, (query.dtype, masked),
                           lambda: _additive_mask(attn_mask, query.dtype, masked))


#: id(traced tensor) -> (a weak reference to it, {key: value made from it}). Not a
#: WeakKeyDictionary: its lookups compare tensors with ==, which is elementwise (a traced mask
#: raised "Boolean value of Tensor with more than one value is ambiguous" and GPT-2 ran eagerly)
_PER_TENSOR: dict = {}


def once_per_tensor(t: torch.Tensor, key, make):
    """make(), once per (tensor object, key) while the tensor lives."""
    entry = _PER_TENSOR.get(id(t))
    if entry is None or entry[0]() is not t:
        if len(_PER_TENSOR) > 256:       # entries of tensors that died (their traces ended)
            for k in [k for k, (ref, _) in _PER_TENSOR.items() if ref() is None]:
                del _PER_TENSOR[k]
        entry = _PER_TENSOR[id(t)] = (weakref.ref(t), {})
    done = entry[1]
    if key not in done:
        done[key] = make()
    return done[key]


def sdpa_call(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """Attention kept whole, unless ATen would run its math path: that path is a chain of unfused
    ATen kernels (measured on an H100, T5-small bf16 8x256, torch.profiler: float32 adds, copies,
    softmax, isneginf and bool reductions, about 1.3 ms of device time per call where inductor,
    which traces the math path into fused kernels, spends about 0.3), so it is traced into its
    decomposition here too, and the backend fuses it."""
    if enable_gqa:
        return NotImplemented
    attn_mask = _mask_for_a_fused_kernel(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if torch_would_run_math(query, key, value, attn_mask, dropout_p, is_causal, scale):
        # ATen's math path itself (a composite of matmuls, softmax and masking), traced through
        log.info("sdpa_math_path_traced", query=list(query.shape), dtype=str(query.dtype),
                 reason="ATen would run its unfused math path on these inputs; traced for fusion")
        return aten._scaled_dot_product_attention_math.default(
            query, key, value, _additive_mask(attn_mask, query.dtype), dropout_p, is_causal, None, scale=scale)[0]
    mask = _kernel_mask(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return torch.ops.tracetorch.sdpa.default(query, key, value, mask, dropout_p, is_causal, scale)


def _addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """addbmm = beta * input + alpha * (sum over the batch of batch1[i] @ batch2[i]): the bmm stays
    an extern kernel and the batch sum plus the scaling fuse into one reduction kernel. (torch's
    decomposition tables have none for it.) Like ATen, beta == 0 ignores input (NaN included)."""
    summed = aten.bmm.default(batch1, batch2).sum(0)
    if alpha != 1:
        summed = summed * alpha
    if beta == 0:
        return summed
    scaled = input if beta == 1 else input * beta
    return scaled + summed


def _baddbmm_with_full_input(input, batch1, batch2, *, beta=1, alpha=1):
    """baddbmm kept whole, its input expanded to the product's shape first (a view). ATen's meta
    kernel expands a broadcast input itself, and with a dynamic batch that expand raised
    "SymIntArrayRef expected to contain only concrete integers" under the fake mode (Bloom's
    attention scores over its ALiBi bias, [b*h, 1, k]: the whole graph ran eagerly). The
    comparison is of expressions: comparing symbolic sizes would guard them."""
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    if input.dim() == 3 and list(map(size_expr, input.shape)) == list(map(size_expr, shape)):
        return NotImplemented                     # already full: ATen's own op, traced as is
    return aten.baddbmm.default(input.expand(shape), batch1, batch2, beta=beta, alpha=alpha)


def _log_sigmoid_forward(self):
    """torch's decomposition, its output made contiguous: ATen's CPU kernel allocates a
    contiguous result whatever the input's layout, where the decomposed pointwise ops (and their
    fake values, which set our output layout) follow a transposed input's order (fuzz 331719,
    331815). The clone fuses into the same kernel."""
    out, buffer = _TORCH_LOG_SIGMOID(self)
    return aten.clone.default(out, memory_format=torch.contiguous_format), buffer


_TORCH_LOG_SIGMOID = get_decompositions([aten.log_sigmoid_forward])[aten.log_sigmoid_forward.default]


def _repeat(self, repeats):
    """torch's decomposition, its output made contiguous: ATen's repeat allocates a contiguous
    result, where the decomposition clones the expanded input in the input's own order (a
    transposed input came back transposed: fuzz 340142). The clone fuses into the same kernel."""
    out = _TORCH_REPEAT(self, repeats)
    return aten.clone.default(out, memory_format=torch.contiguous_format)


_TORCH_REPEAT = get_decompositions([aten.repeat])[aten.repeat.default]


def _addcmul(self, tensor1, tensor2, *, value=1):
    """torch's decomposition, except that an integer (or bool) result takes `value` in its own
    type first, as ATen's kernel does (value.to<scalar_t>()): the decomposition's fma multiplied
    by the float value, so uint8 `a.addcmul_(a, a, value=0.5)` gave a + a*a/2, eager a + 0."""
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
    _, dtype = elementwise_dtypes(self, tensor1, tensor2,
                                  type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    if not (dtype.is_floating_point or dtype.is_complex):
        value = bool(value) if dtype == torch.bool else int(value)
        return self + value * tensor1 * tensor2
    return _TORCH_ADDCMUL(self, tensor1, tensor2, value=value)


def _silu(self):
    """ATen's formula, x / (1 + exp(-x)), in float32 for half-precision inputs and rounded once:
    torch's decomposition x * sigmoid(x) rounds twice (and bf16 sigmoid once more), 2-4 ulps
    from eager where eager is within 2 (a later pow(silu, 50) made that 13 ulps: fuzz 391419)."""
    x = self.float() if self.dtype in (torch.float16, torch.bfloat16) else self
    return (x / (1 + torch.exp(-x))).to(self.dtype)


def _addcmul_(self, tensor1, tensor2, *, value=1):
    """The in-place form through _addcmul (torch's own in-place decomposition used the fma)."""
    return self.copy_(_addcmul(self, tensor1, tensor2, value=value))


_TORCH_ADDCMUL = get_decompositions([aten.addcmul])[aten.addcmul.default]

#: decompositions of our own, for ops torch's tables leave whole (or whose result layout differs
#: from eager's)
OWN = {aten.addbmm.default: _addbmm, aten.log_sigmoid_forward.default: _log_sigmoid_forward,
       aten.repeat.default: _repeat, aten.addcmul.default: _addcmul,
       aten.addcmul_.default: _addcmul_, aten.silu.default: _silu}


#: ops kept whole whose arguments are rewritten before the op is traced (each returns
#: NotImplemented where nothing needs rewriting)
KEPT_WHOLE_REWRITES = {aten.baddbmm.default: _baddbmm_with_full_input}


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA))
    table.update(OWN)
    keep = set()
    for op in KEEP_WHOLE:
        keep |= set(op.overloads() and [getattr(op, o) for o in op.overloads()]) \
            if isinstance(op, torch._ops.OpOverloadPacket) else {op}
    for op in list(table):
        if op in keep:
            del table[op]
    table.update(KEPT_WHOLE_REWRITES)
    return table


def decomposition_table() -> dict:
    """A fresh copy of the inference decomposition table (callers may edit their copy)."""
    return dict(_table())


def sdpa_decompositions() -> dict:
    """Extra entries that keep scaled_dot_product_attention whole (as tracetorch::sdpa)."""
    return {aten.scaled_dot_product_attention.default: sdpa_call}
