"""Conversions that eager answers with the tensor itself, made explicit before functionalization.

`x.type_as(y)`, `x.to(dtype)`, `x.float()`, ... return `x` itself when nothing changes (same
dtype and device). torch.func.functionalize traces them as a copy, so an in-place op on the
result no longer reaches `x` (`a.type_as(b).add_(b)` left `a` unchanged), and an in-place op on
`x` no longer shows in the result (`v = a.type_as(a); a.div_(2); return v`). This pass replaces
such a node's uses by its input, using the frontend's metadata (meta["example_value"]).
"""

from __future__ import annotations

import copy
import functools
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


def returned_inputs(gm: torch.fx.GraphModule, replayed=frozenset()) -> dict[int, int]:
    """{flat output position: input position} for outputs that eager returns as the input object
    itself (the input, the result of in-place ops or same-type conversions of it), so the runtime
    hands back the caller's tensor, already updated by the write-back, instead of a new one with the same values.
    `replayed`: input positions whose in-place metadata ops (t_, squeeze_, ...) the runtime replays
    on the caller's tensor (input_metadata_mutations): the caller's tensor then has the output's
    sizes, so an in-place chain to such an input is the input whatever its metadata."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out_node = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if out_node is None:
        return {}
    leaves, _ = pytree.tree_flatten(out_node.args[0])
    found = {}
    for pos, leaf in enumerate(leaves):
        n = leaf
        n = _producer(n)
        if isinstance(n, torch.fx.Node) and n.op == "placeholder" and (
                placeholders.index(n) in replayed or _same_meta(n, leaf)):
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
    # after an in-place metadata op (squeeze_, t_) the frontend traces on an alias of the input's
    # fake, kept in meta['current_value'] of the nodes that hold the input
    now = node.args[0].meta.get("current_value") if isinstance(node.args[0], torch.fx.Node) else None
    return isinstance(out, torch.Tensor) and (out is src or out is now)


def _same_meta(a, b) -> bool:
    """Same shape and strides (an in-place op that changes metadata, squeeze_ or t_, is left to the
    compiled output, which has the new shape)."""
    va, vb = _value(a), _value(b)
    try:
        return (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor) and va.shape == vb.shape
                and va.stride() == vb.stride())
    except Exception:
        return False


# ---- outputs that are views of inputs (regenerated from the caller's tensor) ----

#: ops whose result is a view of their first argument (or, for split-like ones, a tuple of views):
#: method / function names, as the frontend's graph spells them (AOTAutograd's "alias of input"
#: outputs; it replays their view ops on the real input too)
VIEW_NAMES = {
    "getitem", "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
    "transpose", "swapaxes", "swapdims", "t", "permute", "movedim", "moveaxis", "narrow", "select",
    "diagonal", "expand", "expand_as", "broadcast_to", "unfold", "as_strided", "split", "split_with_sizes",
    "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "real", "imag", "view_as_real",
    "view_as_complex", "detach", "alias", "contiguous", "T", "mT", "mH", "H", "adjoint", "conj",
}
#: non-tensor values a view's arguments may be computed with (sizes of tensors, their arithmetic)
SIZE_METHODS = {"size", "stride", "dim", "ndimension", "numel", "nelement", "storage_offset"}


@functools.lru_cache(maxsize=None)
def inplace_view(name) -> bool:
    """Does the aten op `name` (t_, transpose_, squeeze_, as_strided_, resize_, set_, detach_...)
    change its first argument's metadata in place? Read from torch's `inplace_view` tag, so a new
    such op needs no entry here (the frontend asks the same question: output_graph.changes_metadata)."""
    if not isinstance(name, str):
        return False
    try:
        packet = getattr(torch.ops.aten, name)
        return any(torch.Tag.inplace_view in getattr(packet, o).tags for o in packet.overloads())
    except (AttributeError, RuntimeError):     # not an aten op (a Python function's name)
        return False


def _target_name(node) -> str:
    if node.op == "call_method":
        return node.target
    if node.op == "call_function":
        if node.target is getattr and len(node.args) == 2:
            return node.args[1]
        return getattr(node.target, "__name__", "")
    return ""


def _storage(v):
    from torch.multiprocessing.reductions import StorageWeakRef
    try:
        return StorageWeakRef(v.untyped_storage())
    except Exception:       # no storage to compare (sparse, nested, a subclass)
        return None


def _is_view_node(node) -> bool:
    """A call that returns a view of its first argument (or a tuple of views) computed from it and
    non-tensor arguments only, changing no memory (no `out=`, no `inplace=`)."""
    if node.op not in ("call_method", "call_function") or "out" in node.kwargs or "inplace" in node.kwargs:
        return False
    name = _target_name(node)
    if name not in VIEW_NAMES:
        return False
    if node.op == "call_function" and node.target not in (operator.getitem, getattr) and \
            node.target not in (getattr(torch, name, None), getattr(torch.Tensor, name, None)):
        return False
    # another tensor argument (an index, expand_as's target) might be changed by the graph later
    return not any(isinstance(_value(a), torch.Tensor) for a in pytree.tree_leaves((node.args[1:], node.kwargs)))


def _is_size_node(node) -> bool:
    """A non-tensor value computed from sizes, not from a tensor's data (`.item()` would read a
    value the graph may have changed since)."""
    if any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(_value(node))):
        return False
    if node.op == "call_method":
        return node.target in SIZE_METHODS
    if node.op == "call_function":
        return (node.target is getattr and node.args[1:] in (("shape",), ("ndim",))) or \
            getattr(node.target, "__module__", "") in ("_operator", "operator", "math") or \
            getattr(node.target, "__name__", "").startswith("sym_")
    return False


def _bypassed(node) -> bool:
    """Eager returns the first argument itself: an in-place op (its effect is in the caller's
    tensor after the write-back) or a conversion that changes nothing."""
    return _returns_first_arg(node) or _returns_self(node) or _same_object(node)


def _producer(node):
    """The node whose tensor `node` is: ops that return their first argument are followed back
    (`a.add_(1).t_()` is a), stopping at a placeholder or any other op."""
    while (isinstance(node, torch.fx.Node) and node.op in ("call_method", "call_function") and node.args
           and _bypassed(node)):
        node = node.args[0]
    return node


def _view_chain(leaf, input_storages, metadata_mutated, run: set) -> list | None:
    """The nodes to replay to compute `leaf` if it is a view of a graph input made by view ops
    (at least one) from that input and sizes; else None. An in-place metadata op on a view along
    the way (`a.reshape(-1).t_()`) is replayed too, on the replay's own view (added to `run`, so
    the replay module runs it instead of passing its argument through). Ops on a graph input
    itself are input_metadata_mutations' business (input_views orders the replays around them)."""
    out_val = _value(leaf)
    base = _storage(out_val) if isinstance(out_val, torch.Tensor) else None
    if base is None or base not in input_storages:
        return None
    seen, chain, stack = set(), [], [leaf]
    views = 0
    while stack:
        n = stack.pop()
        if not isinstance(n, torch.fx.Node) or n in seen or n.op == "placeholder":
            continue
        seen.add(n)
        v = _value(n)
        if n in metadata_mutated:        # a computed view: placeholders never get here
            ops = metadata_mutated[n]
            run.update(ops)
            stack.extend(ops)
            stack.extend(pytree.tree_leaves([(u.args, u.kwargs) for u in ops]))
        if n in run:
            chain.append(n)
            continue
        if isinstance(v, torch.Tensor) and _bypassed(n):
            stack.append(n.args[0])
        elif _is_view_node(n) and (isinstance(v, (list, tuple)) or
                                   (isinstance(v, torch.Tensor) and _storage(v) == base)):
            views += 1
            stack.extend(pytree.tree_leaves((n.args, n.kwargs)))
        elif _is_size_node(n):
            stack.extend(pytree.tree_leaves((n.args, n.kwargs)))
        else:
            return None
        chain.append(n)
    return chain if views else None


def _metadata_mutated(gm) -> dict:
    """Node -> the metadata in-place ops (t_, squeeze_, ...) that change its tensor later. The
    node is the tensor's producer: ops that return their argument are followed back
    (`v.mul_(2).t_()` changes v)."""
    out: dict = {}
    for n in gm.graph.nodes:
        if n.op in ("call_method", "call_function") and inplace_view(_target_name(n)) and n.args:
            out.setdefault(_producer(n.args[0]), []).append(n)
    return out


def input_views(gm: torch.fx.GraphModule) -> list:
    """[(flat output positions, a GraphModule of gm's inputs that returns those outputs, early)]
    for the outputs that eager returns as views of a graph input (`a.diagonal()`, `a[..., None][1:]`
    after `a.sub_(b)`); [] if none. The compiled graph returns such an output as a new tensor (its
    value from the functional graph); calling the replay module on the caller's inputs after the
    write-back gives eager's view itself: same storage, sizes, strides and offset, values updated.

    Where an input's own metadata changes (`a0.squeeze_()`), a view taken before the first such
    op is `early`: replayed on the inputs as they entered, before the runtime replays the metadata
    ops; one taken after the last is replayed after them; one in between is left to the compiled
    outputs."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out_node = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if out_node is None:
        return []
    mutated = _metadata_mutated(gm)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    # per input storage, where the metadata of the inputs over it changes: only a view's own
    # input orders it (a1.t().abs_() returned beside a2.t_() is a view of a1 alone: fuzz 461565)
    changes_of: dict = {}
    change_ops = set()
    for p in placeholders:
        if isinstance(_value(p), torch.Tensor):
            changes_of.setdefault(_storage(_value(p)), []).extend(order[op] for op in mutated.get(p, ()))
            change_ops.update(mutated.get(p, ()))
    storages = set(changes_of) - {None}
    leaves, _ = pytree.tree_flatten(out_node.args[0])
    groups = {True: ({}, set()), False: ({}, set())}      # early -> (chains, ops run)
    for pos, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.fx.Node):
            continue
        ops = set()
        found = _view_chain(leaf, storages, mutated, ops)
        if found is None:
            continue
        changes = changes_of.get(_storage(_value(leaf)), [])
        early = not changes or all(order[n] < min(changes) for n in found)
        # a chain through an input's own metadata op (`a0.unsqueeze_(0).pow_(2).movedim(0, -1)`)
        # reads the input as that op left it: the replay passes the input through it, after the
        # runtime's metadata replay (fuzz seed 5188)
        if not early and not all(order[n] > max(changes) or n in change_ops for n in found):
            continue
        chains, run = groups[early]
        chains[pos] = (leaf, found)
        run |= ops
    out = []
    for early, (chains, run) in groups.items():
        if not chains:
            continue
        replay = _replay_module(gm, placeholders, [leaf for leaf, _ in chains.values()],
                                set().union(*(set(c) for _, c in chains.values())), run=run)
        out.append((sorted(chains), replay, early))
        log.debug("aot_output_views", outputs=sorted(chains), early=early,
                  reason="eager returns views of inputs: replayed on the caller's tensors after the call")
    return out


def _replay_module(gm, placeholders, leaves, keep, run=frozenset()) -> torch.fx.GraphModule:
    """gm's placeholders and the `keep` nodes (in gm's order, those that return their first
    argument replaced by it, unless listed in `run`), returning `leaves` as a tuple."""
    graph = torch.fx.Graph()
    env = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = graph.node_copy(n)
        elif n in keep:
            env[n] = env[n.args[0]] if _bypassed(n) and n not in run else graph.node_copy(n, lambda a: env[a])
    graph.output(tuple(env[leaf] for leaf in leaves))
    return torch.fx.GraphModule(gm, graph)


# ---- in-place metadata changes of inputs (replayed on the caller's tensors) ----

#: in-place ops that change only a tensor's sizes/strides/offset: replayed on the caller's tensor
#: after the compiled call (AOTAutograd's "metadata mutations" of inputs). detach_ is left out: in
#: the inference path no input requires grad, so it changes nothing; resize_/set_ change storage.
REPLAYED_METADATA = {"as_strided_", "squeeze_", "unsqueeze_", "swapaxes_", "swapdims_", "t_", "transpose_"}


def _input_through_bypass(node):
    """The placeholder `node` is, following ops that return their first argument (in-place ops,
    conversions that change nothing), or None."""
    node = _producer(node)
    return node if isinstance(node, torch.fx.Node) and node.op == "placeholder" else None


def _size_args_replayable(node, keep) -> bool:
    """Every argument of `node` after the first is a constant or computed from sizes of inputs
    (so the replay module can compute it from the caller's tensors); the nodes it needs go to `keep`."""
    stack = list(pytree.tree_leaves((node.args[1:], node.kwargs)))
    while stack:
        a = stack.pop()
        if not isinstance(a, torch.fx.Node) or a in keep or a.op == "placeholder":
            continue
        if isinstance(_value(a), torch.Tensor):
            src = _input_through_bypass(a)
            if src is None:
                return False       # sizes of a computed tensor: the replay does not compute it
            keep.add(a)
            stack.append(a.args[0])
        elif _is_size_node(a):
            keep.add(a)
            stack.extend(pytree.tree_leaves((a.args, a.kwargs)))
        else:
            return False           # a value read from data (item()) or anything else
    return True


def input_metadata_mutations(gm: torch.fx.GraphModule):
    """(input positions, replay GraphModule of gm's inputs) for the inputs that in-place metadata
    ops of gm change (`a.t_()`, `a.add_(1).unsqueeze_(0)`); None without any, or when one of them
    cannot be replayed (an argument not computed from sizes, another metadata op on the input:
    resize_, set_), with the reason logged.

    The compiled graph works on an alias of such an input (functionalize.FlatFunction), so its
    data write-back goes to the input as it entered; calling the replay module on the caller's
    tensors after the call runs the same in-place ops on them, in gm's order, with their size
    arguments recomputed from the tensors at that point: eager's sizes, strides and offset exactly
    (functionalize's own propagation, `as_strided_` to the functional value's strides, gave
    contiguous strides after `as_strided_` and mutated the fakes it traced on)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ops, keep, positions = [], set(), set()
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or not n.args:
            continue
        name = _target_name(n)
        if not inplace_view(name):
            continue
        src = _input_through_bypass(n.args[0])
        if src is None:
            continue               # a computed tensor: functionalization handles it in the graph
        if name not in REPLAYED_METADATA:
            if name == "detach_":
                continue
            log.info("aot_input_metadata_not_replayed", node=n.name, op=name,
                     reason="changes an input's storage, not only its metadata: left to functionalize")
            return None
        if not _size_args_replayable(n, keep):
            log.info("aot_input_metadata_not_replayed", node=n.name, op=name,
                     reason="an argument is not computed from sizes: left to functionalize")
            return None
        ops.append(n)
        keep.add(n)
        positions.add(placeholders.index(src))
        a = n.args[0]
        while a.op != "placeholder":     # the in-place chain from the input to the op
            keep.add(a)
            a = a.args[0]
    if not ops:
        return None
    replay = _replay_module(gm, placeholders, [], keep, run=set(ops))
    log.debug("aot_input_metadata_mutations", inputs=sorted(positions), ops=[n.name for n in ops],
              reason="in-place metadata ops on inputs: traced on an alias, replayed on the caller's tensor")
    return sorted(positions), replay
