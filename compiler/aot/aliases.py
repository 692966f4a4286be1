"""Conversions that eager answers with the tensor itself, made explicit before functionalization.

`x.type_as(y)`, `x.to(dtype)`, `x.float()`, ... return `x` itself when nothing changes (same
dtype and device). torch.func.functionalize traces them as a copy, so an in-place op on the
result no longer reaches `x` (`a.type_as(b).add_(b)` left `a` unchanged), and an in-place op on
`x` no longer shows in the result (`v = a.type_as(a); a.div_(2); return v`). This pass replaces
such a node's uses by its input, using the frontend's metadata (meta["example_value"]).
"""

from __future__ import annotations

import copy
import operator

import torch
from torch.utils import _pytree as pytree

from tracetorch import logs

log = logs.get_logger(__name__)

#: Tensor methods that return self when the result's dtype and device are the input's:
#: method name -> keyword arguments that, when given, may force a copy (then left alone)
SAME_TYPE_METHODS = {
    "type_as": (), "to": ("copy", "memory_format"), "type": (), "float": ("memory_format",),
    "double": ("memory_format",), "half": ("memory_format",), "bfloat16": ("memory_format",),
    "int": ("memory_format",), "long": ("memory_format",), "short": ("memory_format",),
    "char": ("memory_format",), "byte": ("memory_format",), "bool": ("memory_format",),
}


def _value(node):
    if not isinstance(node, torch.fx.Node):
        return None
    return node.meta.get("example_value", node.meta.get("val"))


def _returns_self(node) -> bool:
    if node.op != "call_method" or node.target not in SAME_TYPE_METHODS or not node.args:
        return False
    if any(k in node.kwargs for k in SAME_TYPE_METHODS[node.target]):
        return False
    if node.target == "to" and any(isinstance(a, bool) for a in node.args[1:]):
        return False     # positional non_blocking/copy flags: leave the call as it is
    if node.target == "type" and len(node.args) == 1:
        return False     # x.type() answers a string
    src, out = _value(node.args[0]), _value(node)
    return (isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor) and src.dtype == out.dtype
            and src.device == out.device and src.layout == out.layout)


def alias_same_type_conversions(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """gm with every conversion that returns its input replaced by the input (a new GraphModule
    sharing gm's attributes; gm itself is left as is)."""
    hits = [n.name for n in gm.graph.nodes if _returns_self(n)]
    if not hits:
        return gm
    graph = copy.deepcopy(gm.graph)
    for n in list(graph.nodes):
        if n.name in hits:
            n.replace_all_uses_with(n.args[0])
            graph.erase_node(n)
    new = torch.fx.GraphModule(gm, graph)
    log.debug("aot_alias_conversions", nodes=hits,
              reason="eager returns the input itself; functionalize would trace a copy")
    return new


_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                      operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                      operator.ilshift, operator.irshift}


def _returns_first_arg(node) -> bool:
    """An in-place op: eager returns its first argument itself (`x.add_(y) is x`)."""
    if node.op == "call_method":
        name = node.target
    elif node.op == "call_function":
        if node.target in _INPLACE_OPERATORS:
            return isinstance(_value(node.args[0]), torch.Tensor)
        name = getattr(node.target, "__name__", "")
        if getattr(node.target, "__self__", None) is not None or not hasattr(torch.Tensor, name):
            return False      # only unbound Tensor methods (torch.Tensor.add_)
    else:
        return False
    return (isinstance(name, str) and name.endswith("_") and not name.startswith("_") and bool(node.args)
            and isinstance(_value(node.args[0]), torch.Tensor))


def returned_inputs(gm: torch.fx.GraphModule) -> dict[int, int]:
    """{flat output position: input position} for outputs that eager returns as the input object
    itself (the input, the result of in-place ops or same-type conversions of it), so the runtime
    hands back the caller's tensor, already updated by the write-back, instead of a new one with the same values."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out_node = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if out_node is None:
        return {}
    leaves, _ = pytree.tree_flatten(out_node.args[0])
    found = {}
    for pos, leaf in enumerate(leaves):
        n = leaf
        while isinstance(n, torch.fx.Node) and n.op != "placeholder" and (
                _returns_first_arg(n) or _returns_self(n) or _same_object(n)):
            n = n.args[0]
        if isinstance(n, torch.fx.Node) and n.op == "placeholder" and _same_meta(n, leaf):
            found[pos] = placeholders.index(n)
    if found:
        log.debug("aot_returned_inputs", outputs=found, reason="in-place op results are their input")
    return found


def _same_object(node) -> bool:
    """The frontend's value of `node` is its first argument's value itself: the op returned its
    input object while the frontend ran it on fake tensors (`x.contiguous()` of a contiguous x,
    `x.flatten()` of a 1-d x, `x.cpu()` on the CPU), so eager returns the caller's tensor too."""
    if node.op not in ("call_method", "call_function") or not node.args:
        return False
    src, out = _value(node.args[0]), _value(node)
    return isinstance(out, torch.Tensor) and out is src


def _same_meta(a, b) -> bool:
    """Same shape and strides (an in-place op that changes metadata, squeeze_ or t_, is left to the
    compiled output, which has the new shape)."""
    va, vb = _value(a), _value(b)
    try:
        return (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor) and va.shape == vb.shape
                and va.stride() == vb.stride())
    except Exception:
        return False
