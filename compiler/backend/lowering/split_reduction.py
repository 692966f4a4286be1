"""Split reductions: a long reduction into few outputs becomes two, so that many programs share it.

A Triton reduction runs one program per block of outputs. `loss.mean()` over 8192 rows, or
`x.sum()` over a whole tensor, has one output: one program, one SM of the GPU's 132, looping over
everything (on H200 the 8192-row mean of a cross-entropy took 17-37 us alone, latency-bound on its
gathers). Split, the first reduction runs over [outer..., S] x [chunk]: S programs per output each
reduce one chunk into a partial; the second reduces the S partials. Inductor does the same.

Only for the Triton code generator, static sizes, and reductions whose partials combine with
the same operation (sum, prod, max, min, any, all; not argmax/argmin; mean and var are sums
here). Few outputs (<= 16) with rows of at least `_MIN_RNUMEL` elements split into up to
`_MAX_SPLIT` partials each. More outputs than that but too few to fill the GPU (< `_FILL`
programs), with long rows (>= `_MIN_RNUMEL_MANY`), split just enough to give about 2 * `_FILL`
programs: a training batch norm's statistics over N, H, W of an NCHW activation (64 channels,
401k elements each in ResNet-50's first block) ran 64 programs, up to 0.5 ms per kernel on the
H100 where inductor, splitting, took 0.1-0.23. Each split adds two launches (partials, then
their reduction), which a launch-bound step pays on the host: only rows of 65536 and more (the
stem and first stage of a ResNet at batch 32). Partials are kept in the accumulation dtype.
"""

from __future__ import annotations

import math

import sympy
import torch

from tracetorch import logs
from tracetorch.compiler.backend import indexing, ir
from tracetorch.compiler.backend.ir import ops

log = logs.get_logger(__name__)

_SPLITTABLE = ("sum", "prod", "max", "min", "any", "all")
_MIN_RNUMEL = 4096          # shorter rows fit one program's block (persistent reductions)
_MAX_OUTPUTS = 16
_MAX_SPLIT = 256            # partials per output: two waves of programs on a 132-SM GPU
_MIN_CHUNK = 1024
_FILL = 256                 # programs that keep a 132-SM GPU busy (about two per SM)
_MIN_RNUMEL_MANY = 65536    # many outputs: only rows this long (each split adds two launches)


def plan(red: ir.Reduction) -> tuple[int, int] | None:
    """(splits, chunk) for this reduction, or None to keep it whole."""
    if red.reduction_type not in _SPLITTABLE:
        return None
    outer, rnumel = indexing.product(red.ranges), indexing.product(red.reduction_ranges)
    if not (outer.is_Integer and rnumel.is_Integer):
        return None
    outer, rnumel = int(outer), int(rnumel)
    if outer <= _MAX_OUTPUTS:
        if rnumel < _MIN_RNUMEL:
            return None
        splits = min(_MAX_SPLIT, math.ceil(rnumel / _MIN_CHUNK))
    elif outer < _FILL and rnumel >= _MIN_RNUMEL_MANY:
        splits = min(math.ceil(2 * _FILL / outer), math.ceil(rnumel / _MIN_CHUNK))
    else:
        return None
    chunk = math.ceil(rnumel / splits)
    splits = math.ceil(rnumel / chunk)
    if splits <= 1:
        return None
    log.debug("split_reduction", reduction_type=red.reduction_type, outputs=outer, rnumel=rnumel,
              splits=splits, chunk=chunk)
    return splits, chunk


def _neutral(rt: str, dtype: torch.dtype):
    if rt in ("sum", "any"):
        return 0
    if rt in ("prod", "all"):
        return 1
    if dtype.is_floating_point:
        return float("-inf") if rt == "max" else float("inf")
    if dtype == torch.bool:
        return 0 if rt == "max" else 1
    info = torch.iinfo(dtype)
    return info.min if rt == "max" else info.max


def partial_dtype(red: ir.Reduction) -> torch.dtype:
    if red.reduction_type in ("any", "all"):
        return torch.bool
    if red.reduction_type in ("sum", "prod"):
        return red.src_dtype          # the accumulation dtype (float32 for 16-bit floats)
    return red.dtype


def split(red: ir.Reduction, splits: int, chunk: int, realize) -> ir.Reduction:
    """The second-stage reduction over the realized partials (`realize` stores the first)."""
    rranges = list(red.reduction_ranges)
    rnumel = int(indexing.product(rranges))
    strides = indexing.contiguous_strides(rranges)
    inner = red.inner_fn
    rt = red.reduction_type

    def unflatten(r):
        return [indexing.ModularIndexing(r, st, size) if k else indexing.FloorDiv(r, st)
                for k, (st, size) in enumerate(zip(strides, rranges))]

    def first_fn(idx, ridx):
        *outer, s = idx
        r = s * chunk + ridx[0]
        if splits * chunk == rnumel:
            return inner(outer, unflatten(r))
        in_range = ops.lt(ops.index_expr(r, torch.int64), ops.constant(rnumel, torch.int64))
        return ops.masked(in_range, lambda: inner(outer, unflatten(r)), _neutral(rt, red.src_dtype))

    pdt = partial_dtype(red)
    first = ir.Reduction(list(red.ranges) + [sympy.Integer(splits)], [sympy.Integer(chunk)], first_fn,
                         rt, pdt, red.src_dtype, red.device, origins=red.origins, cost=red.op_count())
    partials = realize(first)
    load = partials.make_loader()
    return ir.Reduction(list(red.ranges), [sympy.Integer(splits)],
                        lambda idx, ridx: load(list(idx) + [ridx[0]]), rt, red.dtype, pdt,
                        red.device, origins=red.origins, cost=1)
