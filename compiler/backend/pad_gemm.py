"""Padding matrix products to sizes the GPU's tensor-core kernels take (Inductor's pad_mm).

cuBLAS's fast 16-bit kernels need every leading dimension to be a multiple of 8 elements (16
bytes). A GPT's output head multiplies by the token-embedding matrix with N = vocabulary =
50257: the product's rows are misaligned and cuBLAS falls back to an `align1` kernel. Measured
on an H100 (bf16, GPT-2 4x512, torch.profiler): 1.68 ms for that one product, where inductor,
which pads, spends 0.28 ms (0.23 for the product, 0.05 for the padded copy of the weight).

Here `mm`, `addmm` and `bmm` whose N or K is not a multiple of the alignment get their operands
padded with zeros to the next multiple (zero columns of A meet zero rows of B, so the sums are
unchanged) and the result sliced back to N columns; an A seen transposed (its leading dimension
is M: a weight gradient `grad.t() @ x`) with M misaligned gets its rows padded and the result's
rows sliced. The alignment is 16 bytes: 8 elements of a 16-bit dtype, 4 of float32 when float32
products run on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32, as training usually
sets it; GPT-2's output head and its two gradients took cuBLAS's sm80 align1 kernels, 3.9 ms of
a 26 ms step on the H100, where inductor, padding, took sm90 ones in 2.4 ms). A sliced result
that is a graph output is copied to eager's (contiguous) strides; inside the graph the slice is
a view the consumers read directly. Only products large enough for the padded copies to be cheap
beside them are padded (MIN_MACS, MAX_GROWTH).

config.backend.pad_gemm: "auto" (CUDA graphs with 16-bit products, or float32 ones under TF32),
"always" (any device: the tests use it on the CPU), "off". Every padded product is logged (`gemm_padded`).
"""
from __future__ import annotations

import torch

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.aot.sizes import example_size, fake_call, static_size

log = logs.get_logger(__name__)
aten = torch.ops.aten

ALIGN = 8                 # elements: 16 bytes of a 16-bit dtype
MIN_MACS = 1 << 24        # smaller products: launch-bound, the padding copies would cost more
MAX_GROWTH = 1.0 / 16     # most extra work padding may add (a dimension of at least 112)
_DTYPES = (torch.float16, torch.bfloat16)


def _align(dtype) -> int | None:
    """Elements per 16 bytes for products whose tensor-core kernels want that alignment, else None."""
    if dtype in _DTYPES:
        return ALIGN
    if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32:
        return 4
    return None

#: op -> (index of A, index of B) in its arguments
_OPERANDS = {aten.mm.default: (0, 1), aten.bmm.default: (0, 1), aten.addmm.default: (1, 2)}


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _pad_to(n: int, align: int = ALIGN) -> int:
    return -(-n // align) * align


def _wanted(node) -> tuple[int, int, int] | None:
    """(padding of M, of K, of N) for a product worth padding, else None."""
    ia, ib = _OPERANDS[node.target]
    a, b, out = _val(node.args[ia]), _val(node.args[ib]), _val(node)
    if not all(isinstance(v, torch.Tensor) for v in (a, b, out)):
        return None
    align = _align(out.dtype)
    if config.backend.pad_gemm == "auto" and (out.device.type != "cuda" or align is None):
        return None
    align = align or ALIGN
    # a symbolic size (a dynamic batch) is neither read as an int (int() on a SymInt guards it to
    # its example value: the compiled graph then served that size only) nor padded; the cost
    # estimate reads example values, which guard nothing
    m, k, n = static_size(a.shape[-2]), static_size(a.shape[-1]), static_size(b.shape[-1])
    pk = _pad_to(k, align) - k if k is not None else 0
    pn = _pad_to(n, align) - n if n is not None else 0
    # M is a leading dimension only of an A seen transposed; with a 2-d bias the rows would need
    # padding too: left as is
    bias = _val(node.args[0]) if node.target is aten.addmm.default else None
    pm = _pad_to(m, align) - m if m is not None and _transposed(a) \
        and not (isinstance(bias, torch.Tensor) and bias.dim() == 2) else 0
    hm, hk, hn = _estimate(a.shape[-2]), _estimate(a.shape[-1]), _estimate(b.shape[-1])
    batch = _estimate(a.shape[0]) if a.dim() == 3 else 1
    if not (pm or pk or pn) or batch * hm * hn * hk < MIN_MACS:
        return None
    if pm > MAX_GROWTH * hm or pk > MAX_GROWTH * hk or pn > MAX_GROWTH * hn:
        return None
    return pm, pk, pn


def _estimate(size) -> int:
    """A size for the cost estimate: its example value (an unbacked one counts as 4096)."""
    try:
        return example_size(size)
    except TypeError:
        return 1 << 12


def _call(graph, fake_mode, target, args, kwargs=None):
    """A new node with its fake value (what lowering reads)."""
    node = graph.call_function(target, tuple(args), kwargs or {})
    vals = [_val(a) if isinstance(a, torch.fx.Node) else a for a in args]
    with fake_mode:
        node.meta["val"] = fake_call(target, *vals, **(kwargs or {}))
    return node


class _Pads:
    """The padded copies made so far in one graph, one per (matrix, padding).

    A linear layer's two gradients both read its output gradient `g` with the misaligned size in
    the same place: `g @ W` pads g's columns (K), `g.t() @ x` pads the rows of g.t() (M), which are
    g's columns again. Made separately, the two copies were two kernels each writing the same
    padded matrix (GPT-2's output head: 2048 x 50257 float32, 273 us each per training step on
    the H100). Here a transposed operand that is a transpose of a row-major node is padded as that
    node, and a padding asked twice of one node gives the same copy."""

    def __init__(self, graph):
        self.graph = graph
        self.made: dict = {}          # (node, padding without trailing zero pairs) -> padded node
        self.reused = 0               # paddings answered with a copy made for an earlier product

    def pad(self, fake_mode, x, pad: list[int]):
        """x padded by `pad` (constant_pad_nd's order: last dim first), in x's own memory order: a
        transposed operand (GPT-2's output head multiplies by the embedding matrix seen as .t()) is
        padded as the row-major matrix it views and transposed back, so the copy reads and writes
        along rows (padded as laid out it read across rows: 0.26 ms per call for GPT-2's 77 MB
        matrix on the H200, where a straight copy takes about 0.03)."""
        v = _val(x)
        if isinstance(v, torch.Tensor) and v.dim() >= 2 and _transposed(v):
            pad = list(pad) + [0] * (4 - len(pad))          # (last dim, second-last dim)
            base = _transposed_from(x)
            if base is None:
                base = self._call(fake_mode, aten.transpose.int, [x, -1, -2])
            padded = self._padded(fake_mode, base, [pad[2], pad[3], pad[0], pad[1]])
            return self._call(fake_mode, aten.transpose.int, [padded, -1, -2])
        return self._padded(fake_mode, x, pad)

    def _padded(self, fake_mode, x, pad: list[int]):
        pad = list(pad)
        while len(pad) > 2 and pad[-2:] == [0, 0]:
            pad = pad[:-2]
        key = (x, tuple(pad))
        if key in self.made:
            self.reused += 1
        else:
            self.made[key] = self._call(fake_mode, aten.constant_pad_nd.default, [x, pad, 0.0])
        return self.made[key]

    def _call(self, fake_mode, target, args):
        return _call(self.graph, fake_mode, target, args)


def _transposed_from(x):
    """The node `x` is a transpose of (its last two dims swapped, nothing else), or None."""
    if not isinstance(x, torch.fx.Node) or x.op != "call_function" or not isinstance(x.args[0], torch.fx.Node):
        return None
    base = _val(x.args[0])
    if not isinstance(base, torch.Tensor) or base.dim() < 2:
        return None
    n = base.dim()
    if x.target is aten.t.default:
        return x.args[0]
    if x.target is aten.transpose.int:
        dims = {d % n for d in x.args[1:3]}
        return x.args[0] if dims == {n - 1, n - 2} else None
    if x.target is aten.permute.default:
        order = [d % n for d in x.args[1]]
        return x.args[0] if order == list(range(n - 2)) + [n - 1, n - 2] else None
    return None


def _transposed(v: torch.Tensor) -> bool:
    """The last two dims of v are a row-major matrix seen transposed (strides (1, rows))."""
    rows, cols = static_size(v.shape[-2]), static_size(v.shape[-1])
    if rows is None or cols is None:        # symbolic: judged static only (no guard)
        return False
    return rows > 1 and cols > 1 and static_size(v.stride(-2)) == 1 and static_size(v.stride(-1)) == rows


def pad_products(gm: torch.fx.GraphModule) -> int:
    """Rewrite `gm` in place as described above; returns how many products were padded."""
    mode = config.backend.pad_gemm
    if mode == "off":
        return 0
    graph = gm.graph
    todo = [(n, p) for n in graph.nodes if n.op == "call_function" and n.target in _OPERANDS
            for p in [_wanted(n)] if p is not None]
    if not todo:
        return 0
    output = next(n for n in graph.nodes if n.op == "output")
    pads = _Pads(graph)
    done = 0
    for node, (pm, pk, pn) in todo:
        ia, ib = _OPERANDS[node.target]
        # the operands' own fake mode (the aot stage's, which may not be the graph inputs')
        fake_mode = getattr(_val(node.args[ia]), "fake_mode", None)
        if fake_mode is None:
            log.debug("gemm_padding_skipped", reason="operands carry no fake values", node=node.name)
            continue
        args = list(node.args)
        old_val = _val(node)
        reused = pads.reused
        shapes = [list(_val(node.args[i]).shape) for i in (ia, ib)]
        with graph.inserting_before(node):
            if pm:
                args[ia] = pads.pad(fake_mode, args[ia], [0, 0, 0, pm])
            if pk:
                args[ia] = pads.pad(fake_mode, args[ia], [0, pk])
                args[ib] = pads.pad(fake_mode, args[ib], [0, 0, 0, pk])
            if pn:
                args[ib] = pads.pad(fake_mode, args[ib], [0, pn])
                bias = args[0] if node.target is aten.addmm.default else None
                bv = _val(bias)
                if isinstance(bv, torch.Tensor) and bv.dim() >= 1 and bv.shape[-1] == old_val.shape[-1]:
                    args[0] = pads.pad(fake_mode, bias, [0, pn])
            padded = _call(graph, fake_mode, node.target, args, dict(node.kwargs))
        with graph.inserting_after(padded):
            result = _call(graph, fake_mode, aten.slice.Tensor, [padded, -1, 0, int(old_val.shape[-1])]) \
                if pn else padded
        if pm:
            with graph.inserting_after(result):
                result = _call(graph, fake_mode, aten.slice.Tensor, [result, -2, 0, int(old_val.shape[-2])])
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        if (pm or pn) and output in result.users:
            # a graph output keeps eager's strides: the slice is copied out contiguous
            with graph.inserting_before(output):
                out = _call(graph, fake_mode, aten.clone.default, [result],
                            {"memory_format": torch.contiguous_format})
            output.replace_input_with(result, out)
        log.info("gemm_padded", op=str(node.target), operands=shapes, pad_m=pm, pad_k=pk, pad_n=pn,
                 shared_copies=pads.reused - reused,
                 reason=f"a leading dimension not a multiple of {_align(old_val.dtype) or ALIGN} elements")
        done += 1
    if done:
        graph.lint()
        gm.recompile()
    return done
