"""Split reductions: a long reduction into few outputs becomes two, so that many programs share it.

A Triton reduction runs one program per block of outputs. `loss.mean()` over 8192 rows, or
`x.sum()` over a whole tensor, has one output: one program, one SM of the GPU's 132, looping over
everything (on H200 the 8192-row mean of a cross-entropy took 17-37 us alone, latency-bound on its
gathers). Split, the first reduction runs over [S, outer...] x [chunk]: S programs per output each
reduce one chunk into a partial; the second reduces the S partials. Inductor does the same.

Only for the Triton code generator, static sizes, and reductions whose partials combine with
the same operation (sum, prod, max, min, any, all; not argmax/argmin; mean and var are sums
here). Few outputs (<= 16) with rows of at least `_MIN_RNUMEL` elements: the flattened rows are
cut into up to `_MAX_SPLIT` chunks each. More outputs than that, but too few programs to fill the
GPU (< `_FILL`) over at least `_MIN_ELEMENTS_MANY` elements: the leading reduction dims become
outputs of the first stage (`_leading_dims`). That is a training batch norm's statistics over
N, H, W: ResNet-50's at batch 32 ran one program per channel (64-256 channels, up to 401k
elements each), up to 0.36 ms per kernel on the H100 where inductor's split ones took 0.1-0.23.
Each split adds two launches (partials, then their reduction), which a launch-bound step pays on
the host, hence the size floor. Partials are kept in the accumulation dtype.
"""

from __future__ import annotations

import dataclasses
import math

import sympy
import torch

from tracetorch import logs
from tracetorch.compiler.backend import indexing, ir
from tracetorch.compiler.backend import ops as ops_module
from tracetorch.compiler.backend.ir import ops

log = logs.get_logger(__name__)

_SPLITTABLE = ir.ORDER_FREE_REDUCTIONS
_MIN_RNUMEL = 4096          # shorter rows fit one program's block (persistent reductions)
_MAX_OUTPUTS = 16
_MAX_SPLIT = 256            # partials per output: two waves of programs on a 132-SM GPU
_MIN_CHUNK = 1024
_FILL = 512                 # programs that keep a 132-SM GPU busy (about four per SM)
_MIN_ELEMENTS_MANY = 1 << 20   # many outputs: only this much data (each split adds two launches)
_MIN_PROGRAM_WORK = 1024    # elements one first-stage program reduces, at least
_OUTPUTS_PER_PROGRAM = 64   # outputs one program of an outer reduction covers (its XBLOCK)


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """How to split. `lead` > 0: the first stage's outputs are [*reduction dims before `lead` - 1,
    `factor`, *outputs]: reduction dim `lead` - 1 is cut into `factor` equal pieces and the dims
    before it are enumerated, so the first stage reduces whole trailing dims and indexes its input
    as the unsplit reduction does. `lead` == 0: the flattened rows are cut into `splits` chunks of
    `chunk` elements (partials [splits, *outputs])."""
    splits: int
    chunk: int
    lead: int = 0
    factor: int = 1
    outputs_per_program: int = 1     # lead > 0: outputs one first-stage program covers

    def describe(self, red: ir.Reduction) -> dict:
        """The decision's fields for the `split_reduction` event."""
        fields = dict(reduction_type=red.reduction_type, outputs=int(indexing.product(red.ranges)),
                      rnumel=self.splits * self.chunk, splits=self.splits, chunk=self.chunk)
        if self.lead:
            fields.update(lead_dims=self.lead, factor=self.factor, outputs_per_program=self.outputs_per_program)
        return fields


def plan(red: ir.Reduction) -> SplitPlan | None:
    """How to split this reduction, or None to keep it whole (a question only: the caller logs
    the plan it carries out with `SplitPlan.describe`)."""
    if red.reduction_type not in _SPLITTABLE:
        return None
    outer, rnumel = indexing.product(red.ranges), indexing.product(red.reduction_ranges)
    if not (outer.is_Integer and rnumel.is_Integer):
        return None
    outer, rnumel = int(outer), int(rnumel)
    if outer <= _MAX_OUTPUTS:
        if rnumel < _MIN_RNUMEL:
            return None
        return _flat(red, min(_MAX_SPLIT, math.ceil(rnumel / _MIN_CHUNK)), rnumel, outer)
    if outer * rnumel < _MIN_ELEMENTS_MANY:
        return None
    return _leading_dims(red, outer)


def _flat(red, splits, rnumel, outer) -> SplitPlan | None:
    chunk = math.ceil(rnumel / splits)
    splits = math.ceil(rnumel / chunk)
    if splits <= 1:
        return None
    return SplitPlan(splits, chunk)


def _leading_dims(red, outer) -> SplitPlan | None:
    """Many outputs that cannot fill the GPU: the fewest partials per output, cut at a dimension
    (whole leading reduction dims, then an even piece of the next), that give `_FILL` programs
    each still reducing at least `_MIN_PROGRAM_WORK` elements; failing that, the most such
    partials. A flat chunk of N*H*W rows needed a div and a mod per element; this needs none.
    ResNet-50's batch-norm statistics at batch 32: 64 to 2048 channels over N, H, W; NCHW, a
    program reduces rows of one channel (contiguous); channels_last, a block of 64 channels."""
    rr = [int(r) for r in red.reduction_ranges]
    per_program = min(outer, _OUTPUTS_PER_PROGRAM) if _contiguous_along_outputs(red) else 1
    programs = math.ceil(outer / per_program)
    if programs >= _FILL:
        return None
    best = None
    for lead in range(1, len(rr) + 1):
        before, size = math.prod(rr[:lead - 1]), rr[lead - 1]
        for factor in (f for f in range(1, size + 1) if size % f == 0):
            splits, chunk = before * factor, (size // factor) * math.prod(rr[lead:])
            if splits <= 1:
                continue
            if chunk * per_program < _MIN_PROGRAM_WORK:
                break
            best = SplitPlan(splits, chunk, lead, factor, per_program)
            if programs * splits >= _FILL:
                break
        # the next dimension's cuts are finer still: stop once the GPU is filled, or once this
        # dimension's pieces are already within twice the least work a program should get
        if best is not None and (programs * best.splits >= _FILL or best.chunk * per_program < 2 * _MIN_PROGRAM_WORK):
            break
    return best


def _contiguous_along_outputs(red) -> bool:
    """True when most of the reduction's loads step by one element along its innermost output
    dim but not along its innermost reduction dim (an "outer" reduction: per-channel statistics
    of a channels_last activation), so that one program reads a block of outputs at once."""
    xs, rs = red.index_vars(), red.reduction_vars()
    deps = ops_module.DependencyHandler()
    try:
        with ops_module.set_ops_handler(deps):
            red.inner_fn(xs, rs)
    except Exception:     # an expression the dependency pass cannot walk: no opinion
        return False
    kinds = [indexing.access_kind(index, xs, red.ranges, rs, red.reduction_ranges) for _, index in deps.loads]
    outer, inner = kinds.count("outer"), kinds.count("row")
    return outer > inner


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


def split(red: ir.Reduction, how: SplitPlan, realize) -> ir.Reduction:
    """The second-stage reduction over the realized partials (`realize` stores the first)."""
    rt, inner = red.reduction_type, red.inner_fn
    pdt = partial_dtype(red)
    if how.lead:
        rr = list(red.reduction_ranges)
        k, piece = how.lead - 1, rr[how.lead - 1] // how.factor
        lead = rr[:k] + [sympy.Integer(how.factor)]

        def first_fn(idx, ridx):
            # reduction dim k is (its piece's number) * piece + (the position in the piece)
            return inner(idx[k + 1:], list(idx[:k]) + [idx[k] * piece + ridx[0]] + list(ridx[1:]))
        first = ir.Reduction(lead + list(red.ranges), [piece] + rr[k + 1:], first_fn,
                             rt, pdt, red.src_dtype, red.device, origins=red.origins, cost=red.op_count())
        load = realize(first).make_loader()
        return ir.Reduction(list(red.ranges), lead, lambda idx, ridx: load(list(ridx) + list(idx)),
                            rt, red.dtype, pdt, red.device, origins=red.origins, cost=1)
    splits, chunk = how.splits, how.chunk
    rranges = list(red.reduction_ranges)
    rnumel = int(indexing.product(rranges))
    strides = indexing.contiguous_strides(rranges)

    def unflatten(r):
        return [indexing.ModularIndexing(r, st, size) if k else indexing.FloorDiv(r, st)
                for k, (st, size) in enumerate(zip(strides, rranges))]

    def first_flat(idx, ridx):
        s, *outer = idx
        r = s * chunk + ridx[0]
        if splits * chunk == rnumel:
            return inner(outer, unflatten(r))
        in_range = ops.lt(ops.index_expr(r, torch.int64), ops.constant(rnumel, torch.int64))
        return ops.masked(in_range, lambda: inner(outer, unflatten(r)), _neutral(rt, red.src_dtype))

    # the split index outermost: partials of neighbouring outputs are neighbours
    first = ir.Reduction([sympy.Integer(splits)] + list(red.ranges), [sympy.Integer(chunk)], first_flat,
                         rt, pdt, red.src_dtype, red.device, origins=red.origins, cost=red.op_count())
    load = realize(first).make_loader()
    return ir.Reduction(list(red.ranges), [sympy.Integer(splits)],
                        lambda idx, ridx: load([ridx[0]] + list(idx)), rt, red.dtype, pdt,
                        red.device, origins=red.origins, cost=1)
