"""Windowed ops with small constant windows, unrolled into one Pointwise: avg_pool2d.
(max_pool2d and adaptive pooling reach the backend already decomposed by the aot stage.)"""

from __future__ import annotations

import torch

from compiler.backend import ir
from compiler.backend.ir import ops
from compiler.backend.lowering.registry import NotLowerable, aten, register_lowering

MAX_WINDOW = 64   # larger windows would unroll into very long kernels: use ATen


def _pair(v, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    if isinstance(v, int):
        return (v, v)
    return tuple(v) if len(v) == 2 else (v[0], v[0])


def _iv(e):
    return ops.index_expr(e, torch.int64)


def _c(v):
    return ops.constant(int(v), torch.int64)


@register_lowering(aten.avg_pool2d.default)
def avg_pool2d(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding, (0, 0))
    if kh * kw > MAX_WINDOW:
        raise NotLowerable(f"window of {kh * kw} elements")
    size = x.get_size()
    H, W = size[-2], size[-1]
    out_dtype = ctx.dtype
    acc = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    loader = x.make_loader()

    def fn(idx):
        *lead, oh, ow = idx
        total = None
        for a in range(kh):
            for b in range(kw):
                h, w = oh * sh - ph + a, ow * sw - pw + b
                inside = ops.logical_and(ops.logical_and(ops.ge(_iv(h), _c(0)), ops.lt(_iv(h), _iv(H))),
                                         ops.logical_and(ops.ge(_iv(w), _c(0)), ops.lt(_iv(w), _iv(W))))

                def body(h=h, w=w):
                    v = loader([*lead, h, w])
                    return ops.to_dtype(v, acc) if x.get_dtype() != acc else v
                v = ops.masked(inside, body, 0.0)
                total = v if total is None else ops.add(total, v)
        if divisor_override:
            div = ops.constant(float(divisor_override), acc)
        else:
            hs, ws = _iv(oh * sh - ph), _iv(ow * sw - pw)
            he = ops.minimum(ops.add(hs, _c(kh)), ops.add(_iv(H), _c(ph)))
            we = ops.minimum(ops.add(ws, _c(kw)), ops.add(_iv(W), _c(pw)))
            if count_include_pad:
                n = ops.mul(ops.sub(he, hs), ops.sub(we, ws))
            else:
                hs2, ws2 = ops.maximum(hs, _c(0)), ops.maximum(ws, _c(0))
                he2, we2 = ops.minimum(he, _iv(H)), ops.minimum(we, _iv(W))
                n = ops.mul(ops.sub(he2, hs2), ops.sub(we2, ws2))
            div = ops.to_dtype(n, acc)
        out = ops.truediv(total, div)
        return ops.to_dtype(out, out_dtype) if acc != out_dtype else out

    return ir.Pointwise(ctx.size, fn, out_dtype, ctx.device, origins=ctx.origins, cost=kh * kw * 4)
