"""The lowering table (aten overload -> function building IR) and helpers shared by the op families.

A lowering is `fn(ctx, *args, **kwargs)` where tensor arguments are IR nodes (ir.IRNode), SymInts
are sympy expressions and everything else is passed as is. It returns an IR node (or a tuple of
them, or a sympy expression). `ctx` describes the FX node being lowered: its output metadata
(dtype, sizes as sympy, device), the graph, and the origins used for provenance.
Raising `NotLowerable(reason)` makes the graph lowering fall back to the ATen op for this node.
"""

from __future__ import annotations

from typing import Callable, Sequence

import sympy
import torch

from tracetorch.compiler import config
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops

aten = torch.ops.aten
LOWERINGS: dict = {}


class NotLowerable(Exception):
    """This call of the op has no lowering (e.g. an unsupported argument): use the ATen op."""


def register_lowering(*overloads):
    def deco(fn: Callable):
        for op in overloads:
            for o in _expand(op):
                LOWERINGS[o] = fn
        return fn
    return deco


def _expand(op):
    """An OpOverloadPacket means all of its overloads."""
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    return [op]


def to_sympy(x):
    if isinstance(x, torch.SymInt):
        return ir.from_shape_env(x.node.expr)
    if isinstance(x, (int, bool)) and not isinstance(x, bool):
        return sympy.Integer(x)
    if isinstance(x, sympy.Basic):
        return x
    return sympy.sympify(x)


def meta_of(value):
    """The FakeTensor (or list of them) describing an FX node's output, if any."""
    return value


class Ctx:
    """What a lowering knows about the FX node it lowers."""

    def __init__(self, graph, node: torch.fx.Node):
        self.graph = graph
        self.node = node
        self.val = node.meta.get("val")
        self.origins = {node.name}

    @property
    def dtype(self) -> torch.dtype:
        v = self.val[0] if isinstance(self.val, (list, tuple)) else self.val
        return v.dtype

    @property
    def size(self) -> list:
        v = self.val[0] if isinstance(self.val, (list, tuple)) else self.val
        return [to_sympy(s) for s in v.shape]

    @property
    def device(self) -> torch.device:
        v = self.val[0] if isinstance(self.val, (list, tuple)) else self.val
        return v.device

    def input_meta(self, i):
        a = self.node.args[i]
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a


def is_tensor(x) -> bool:
    return isinstance(x, ir.IRNode)


def same(a, b) -> bool:
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def broadcast_loader(x: ir.IRNode, out_size: Sequence) -> Callable:
    """Loader of `x` indexed by `out_size` coordinates (numpy broadcasting: align right,
    size-1 dims read index 0)."""
    loader = x.make_loader()
    in_size = x.get_size()
    off = len(out_size) - len(in_size)
    ones = [same(s, 1) and not same(o, 1) for s, o in zip(in_size, out_size[off:])]

    def load(idx):
        sub = list(idx[off:])
        return loader([sympy.Integer(0) if one else i for i, one in zip(sub, ones)])
    return load


def value_loader(x, out_size, dtype):
    """Loader of a tensor or a scalar (python number / sympy expr), converted to `dtype`."""
    if is_tensor(x):
        load = broadcast_loader(x, out_size)
        src = x.get_dtype()
        if src == dtype:
            return load
        if src in (torch.float16, torch.bfloat16):
            # a half-precision value is computed in float32: round it to its own dtype before it
            # changes type, as eager's value is (bf16 pow then .to(int32) gave other integers)
            return lambda idx: ops.to_dtype(ops.to_dtype(load(idx), src), dtype)
        return lambda idx: ops.to_dtype(load(idx), dtype)
    if isinstance(x, sympy.Basic) and not x.is_number:
        return lambda idx: ops.index_expr(x, dtype)
    if isinstance(x, sympy.Basic):
        x = float(x) if not x.is_integer else int(x)
    return lambda idx: ops.constant(x, dtype)


def cost_of(*xs) -> int:
    return sum(x.op_count() for x in xs if is_tensor(x))


def make_pointwise(ctx: Ctx, inputs: list, fn: Callable, *, compute_dtype=None, out_dtype=None,
                   size=None) -> ir.Pointwise:
    """A Pointwise over the output size: loads every input (broadcast, cast to compute_dtype),
    applies fn, casts to the output dtype."""
    out_dtype = out_dtype or ctx.dtype
    compute_dtype = compute_dtype or out_dtype
    size = list(size) if size is not None else ctx.size
    loaders = [value_loader(x, size, compute_dtype) for x in inputs]

    def inner_fn(idx):
        v = fn(*[ld(idx) for ld in loaders])
        if compute_dtype != out_dtype or out_dtype in (torch.float16, torch.bfloat16):
            # half-precision results are computed in float32 and rounded per op, as eager rounds
            # each op's result (an unrounded square made a later trunc division differ by 1)
            v = ops.to_dtype(v, out_dtype)
        return v

    return ir.Pointwise(size, inner_fn, out_dtype, ctx.device, origins=ctx.origins | inlined_origins(*inputs),
                        cost=cost_of(*inputs) + 1)


def inlined_origins(*xs) -> set:
    """FX nodes of lazy inputs: they get computed inside the new node (kept for provenance)."""
    out = set()
    for x in xs:
        if isinstance(x, (ir.Loops, ir.View)):
            out |= x.origins
    return out


def promoted_dtype(ctx: Ctx, arg_indices=None) -> torch.dtype:
    """torch.result_type of the FX node's tensor/scalar arguments (the type comparisons run in)."""
    vals = []
    for i, a in enumerate(ctx.node.args):
        if arg_indices is not None and i not in arg_indices:
            continue
        if isinstance(a, torch.fx.Node):
            v = a.meta.get("val")
            if isinstance(v, torch.Tensor):
                vals.append(v)
            elif isinstance(v, torch.SymInt):
                vals.append(1)
            elif isinstance(v, torch.SymFloat):
                vals.append(1.0)
        elif isinstance(a, (bool, int, float)):
            vals.append(a)
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if not tensors:
        return ctx.dtype
    out = tensors[0].dtype
    # result_type needs real arguments: build one-element stand-ins of the right dtypes
    stand = [torch.empty((1,) * v.dim(), dtype=v.dtype) if isinstance(v, torch.Tensor) else v for v in vals]
    try:
        out = torch.result_type(*stand[:2]) if len(stand) >= 2 else stand[0].dtype
        for extra in stand[2:]:
            out = torch.promote_types(out, torch.result_type(torch.empty((), dtype=out), extra))
    except Exception:
        pass
    return out


def uses_triton(device) -> bool:
    """Which code generator will compile this graph's kernels (compile.pick_codegen's rule)."""
    return device.type == "cuda" or (device.type == "cpu" and config.backend.cpu_codegen == "triton")
