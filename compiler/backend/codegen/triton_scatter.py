"""Triton code for an ir.ScatterBuffer: one program per block of *source* points, each storing (or
atomically adding) its value at the destination computed from the loaded index.

Bounds: ATen raises on an index out of range. Here every indirect index of the kernel (the
destination's and those of the value's loads, e.g. embedding_bag's rows) is checked: out of range
it reads element 0 instead, its point's store is masked off (never a write out of bounds), and
the kernel sets the status word the launcher checks after the launch, which raises (device
asserts are off in the interpreter and poison a CUDA context).
"""

from __future__ import annotations

import torch

from tracetorch.compiler.backend.codegen.common import CodegenUnsupported
from tracetorch.compiler.backend.codegen.triton_kernel import X
from tracetorch.compiler.backend.codegen.triton_ops import tl_type


def emit_scatter(k, node):
    mode = node.data.scatter_mode
    k.bounds_checks = []
    try:
        value = node.data.inner_fn(k.xs)
        dst = node.store_index(k.xs)            # emits the index loads (ops.indirect_indexing)
        checks = k.bounds_checks
    finally:
        k.bounds_checks = None
    idx, dims = k.index(dst)
    ptr_dims = dims | value.dims | frozenset({X})
    for c in checks:
        ptr_dims |= c.dims
    if ptr_dims - dims:
        idx = f"{idx} + tl.zeros({k.shape(ptr_dims)}, tl.int32)"
    mask = k.mask_for(ptr_dims) or f"tl.full({k.shape(ptr_dims)}, 1, tl.int1)"
    if checks:
        ok = k.emit(" & ".join(c.name for c in checks), torch.bool, ptr_dims)
        k.flag_out_of_bounds(ok, ptr_dims)     # bad index: reported after the launch (triton_launch)
        mask = f"({mask}) & {k.broadcast(ok, ptr_dims)}"
    dt = node.layout.dtype
    val = f"{k.broadcast(value, ptr_dims)}.to({tl_type(dt)})"
    if mode == "store":
        k.line(f"tl.store({node.name} + ({idx}), {val}, {mask})")
    elif mode == "sum":
        # relaxed: only the sum matters, not the order the additions land in
        k.line(f"tl.atomic_add({node.name} + ({idx}), {val}, {mask}, sem='relaxed')")
    else:
        raise CodegenUnsupported(f"scatter mode {mode} in Triton (the lowering falls back for it)")
