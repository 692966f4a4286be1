"""Helpers every handler uses on symbolic values: does a value carry graph data, record a
call into the graph, the value of a symbolic scalar where Python needs a constant, a
tensor's shape as a SizeVariable, the Python type a Variable stands for."""
from __future__ import annotations

import torch
from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported

from tracetorch import logs

log = logs.get_logger(__name__)


def graph_value(v) -> bool:
    """Does v carry graph data (a tensor or a symbolic size)?"""
    return isinstance(v, (V.TensorVariable, V.SymNodeVariable))


def record(tx, fn, args, kwargs=None):
    return tx.output.call("call_function", fn, tuple(args), kwargs or {})


def consts(args):
    return all(a.is_constant() for a in args)


def specialize(tx, v):
    """A symbolic scalar (SymInt/SymFloat/SymBool) where Python needs its value (a range()
    bound, a list index): the value now, with a ShapeEnv guard that it stays so (Dynamo's
    guard_if_dyn). Other Variables pass unchanged."""
    if isinstance(v, V.SymNodeVariable):
        from torch.fx.experimental.symbolic_shapes import guard_scalar
        expr = getattr(v.example.node, "expr", None)
        if expr is not None:      # the sizes it depends on get a value guard (output_graph)
            tx.output.specialized_symbols |= set(expr.free_symbols)
        try:
            value = guard_scalar(v.example)
        except Exception as e:
            raise Unsupported(f"a symbolic value where Python needs a constant: {e}") from None
        log.debug("specialize_symbolic", value=value, node=v.node.name,
                  reason="Python needs the value (guarded equal to it)")
        return V.ConstantVariable(value)
    if isinstance(v, V.SliceVariable) and any(isinstance(p, V.SymNodeVariable) for p in v.parts) \
            and all(p.is_constant() or isinstance(p, V.SymNodeVariable) for p in v.parts):
        return V.ConstantVariable(slice(*[specialize(tx, p).as_constant() for p in v.parts]))
    return v


def tensor_shape(tx, t):
    items = []
    for i, s in enumerate(t.example.shape):
        if isinstance(s, int):
            items.append(V.ConstantVariable(s))
        else:
            items.append(record(tx, torch.ops.aten.sym_size.int, (t, V.ConstantVariable(i))))
    return V.SizeVariable(items)


def python_type(v):
    if isinstance(v, V.TensorVariable):
        return getattr(v, "python_cls", torch.Tensor)
    if isinstance(v, (V.NNModuleVariable, V.UserObjectVariable, V.PythonModuleVariable)):
        return type(v.value)
    if isinstance(v, V.NullVariable):
        raise Unsupported("type of NULL")
    return v.python_type()


def mapping_items(tx, src, what: str) -> dict:
    """{key: value} of what dict(src) would copy: another dict's items, or the (key, value)
    pairs of an iterable. Keys must be constants (`what` names the caller in the break)."""
    if isinstance(src, V.DictVariable):
        return dict(src.items)
    items = {}
    for pair in dispatch.unpack(tx, src):
        k, v = dispatch.unpack(tx, pair)
        if not k.is_constant():
            raise Unsupported(f"{what} with a non-constant key")
        items[k.as_constant()] = v
    return items
