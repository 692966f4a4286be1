"""The joint forward+backward graph: one ATen graph that computes a captured graph's outputs
and, from tangents (the incoming output gradients), the gradients of its inputs.

How it is built (the AOTAutograd recipe, in three small passes):

1. a metadata pre-pass runs the function once on fake tensors with autograd on, to learn
   which outputs are differentiable, which alias an input (those are regenerated as views
   at runtime instead of being computed by the graph) and the output pytree;
2. make_fx traces `joint(primals, tangents)`, which runs the forward and then
   torch.autograd.grad: autograd sits above the tracer, so the backward's ATen ops are
   recorded too. Tracing through autograd needs `requires_grad` on the primals, which
   torch.func.functionalize forbids changing, so functionalization is a separate pass;
3. make_fx retraces that graph under torch.func.functionalize with the decomposition table.
   Input mutations (BatchNorm running stats, in-place ops on buffers) then show up as trailing
   `copy_(primal, new_value)` nodes, which we turn into extra forward outputs that the
   runtime writes back.

Random ops are never decomposed (see `training_decompositions`): the graph then calls the
same ATen RNG ops in the same order as eager, so dropout with the same seed gives the same
mask.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.multiprocessing.reductions import StorageWeakRef

aten = torch.ops.aten


class TrainingUnsupported(Exception):
    """The joint path cannot handle this graph; the caller falls back (and logs why)."""


@dataclasses.dataclass
class AliasedOutput:
    """A user output that is a view of primal `primal_index`: regenerated with as_strided."""
    output_index: int
    primal_index: int
    size: tuple
    stride: tuple
    relative_offset: int


@dataclasses.dataclass
class JointGraph:
    graph: fx.GraphModule             # placeholders primals_1.., tangents_1..; outputs below
    num_primals: int
    num_tangents: int
    num_user_outputs: int             # graph outputs [0, n): the user's (non-aliased) outputs
    mutated_inputs: list[int]         # then one new value per mutated primal, in this order
    grad_input_indices: list[int]     # then one gradient per primal index listed here
    diff_outputs: list[bool]          # per graph user output: does it get a tangent
    out_spec: Any                     # pytree spec of the original function's output
    leaf_kinds: list                  # per original output leaf: ("graph", i) | ("alias", k) | ("const", v)
    aliased: list[AliasedOutput]
    module_state: frozenset = frozenset()   # primal indices that are parameters/buffers

    @property
    def num_forward_outputs(self) -> int:
        return self.num_user_outputs + len(self.mutated_inputs)


def _is_random(op) -> bool:
    return isinstance(op, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in op.tags


def training_decompositions(base: dict | None = None) -> dict:
    """The decomposition table for joint graphs.

    `base`: backend-core's table when it exists (compiler.aot.decompose.decomposition_table()),
    else torch._decomp's core ATen table. We add BatchNorm's decomposition (native_batch_norm's
    schema hides its running-stat mutation; decomposed, the mutation becomes explicit copy_ ops
    that functionalization can see) and remove every random op, so RNG draws match eager.
    """
    if base is None:
        try:
            from tracetorch.compiler.aot.decompose import decomposition_table  # backend-core's
            base = decomposition_table()
        except ImportError:
            from torch._decomp import core_aten_decompositions
            base = core_aten_decompositions()
    from torch._decomp import get_decompositions
    table = dict(base)
    table.update(get_decompositions([aten.native_batch_norm, aten._native_batch_norm_legit,
                                     aten._native_batch_norm_legit_functional]))
    for op in list(table):
        if _is_random(op):
            del table[op]
    return table


def _flat_outputs(fn: Callable, primals: list) -> tuple[list, Any]:
    out = fn(*primals)
    return pytree.tree_flatten(out)


def _prepass(fn: Callable, primals: list):
    """Run fn on fake copies of the primals (autograd on): output metadata without compute."""
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [fake_mode.from_tensor(p) if isinstance(p, torch.Tensor) else p for p in primals]
    with fake_mode, torch.enable_grad():
        leaves, spec = _flat_outputs(fn, fakes)
    storages = {}
    for i, f in enumerate(fakes):
        if isinstance(f, torch.Tensor):
            storages.setdefault(StorageWeakRef(f.untyped_storage()), i)
    leaf_kinds, aliased, graph_leaves = [], [], []
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            if leaf is None or isinstance(leaf, (bool, int, float, str)):
                leaf_kinds.append(("const", leaf))
                continue
            raise TrainingUnsupported(f"graph output of type {type(leaf).__name__}")
        j = storages.get(StorageWeakRef(leaf.untyped_storage()))
        if j is not None:
            leaf_kinds.append(("alias", len(aliased)))
            aliased.append(AliasedOutput(
                output_index=len(leaf_kinds) - 1, primal_index=j, size=tuple(leaf.size()),
                stride=tuple(leaf.stride()),
                relative_offset=leaf.storage_offset() - fakes[j].storage_offset()))
            continue
        leaf_kinds.append(("graph", len(graph_leaves)))
        graph_leaves.append(leaf)
    diff = [bool(o.requires_grad and (o.is_floating_point() or o.is_complex()))
            for o in graph_leaves]
    metas = [(tuple(o.shape), o.dtype, o.device) for o in graph_leaves]
    return spec, leaf_kinds, aliased, diff, metas


@contextlib.contextmanager
def _no_ambient_tracing_context():
    """Called from inside torch.compile (backend=compiler.backend), Dynamo's TracingContext is
    active and make_fx would adopt its fake mode and ShapeEnv: our trace would then mint
    symbols that Dynamo cannot guard on. We trace in a fake mode of our own instead."""
    try:
        from torch._guards import tracing
    except ImportError:
        yield
        return
    with tracing(None):
        yield


def trace_joint(fn: Callable, primals: list, decompositions: dict) -> JointGraph:
    """fn(*primals) -> any pytree of tensors; primals: real tensors (requires_grad as at runtime)."""
    with _no_ambient_tracing_context():
        return _trace_joint(fn, primals, decompositions)


def _trace_joint(fn: Callable, primals: list, decompositions: dict) -> JointGraph:
    for p in primals:
        if not isinstance(p, torch.Tensor):
            raise TrainingUnsupported(f"non-tensor graph input ({type(p).__name__}); the joint "
                                      "graph would bake it in as a constant")
        if any(isinstance(s, torch.SymInt) for s in p.shape):
            raise TrainingUnsupported("symbolic (dynamic) shapes in a training graph")
    spec, leaf_kinds, aliased, diff, metas = _prepass(fn, primals)
    graph_positions = [k for k, (kind, _) in enumerate(leaf_kinds) if kind == "graph"]
    requires_grad = [p.requires_grad for p in primals]
    grad_input_indices = [i for i, rg in enumerate(requires_grad) if rg]
    num_tangents = sum(diff)

    def joint(primals, tangents):
        with torch.enable_grad():
            leaves, _ = _flat_outputs(fn, primals)
        outs = [leaves[k] for k in graph_positions]
        diff_outs = [o for o, d in zip(outs, diff) if d]
        inputs = [primals[i] for i in grad_input_indices]
        if diff_outs and inputs:
            grads = torch.autograd.grad(diff_outs, inputs, tangents, allow_unused=True)
        else:
            grads = [None] * len(inputs)
        # detach: the forward outputs leave the joint graph as plain values
        return [o.detach() for o in outs] + list(grads)

    # Tangents are contiguous: the runtime makes incoming gradients contiguous to match.
    tangents = [torch.zeros(shape, dtype=dtype, device=device)
                for (shape, dtype, device), d in zip(metas, diff) if d]
    with torch.enable_grad():
        autograd_graph = make_fx(joint, tracing_mode="fake")(primals, tangents)
    functional = torch.func.functionalize(autograd_graph, remove="mutations")

    def named(primals, tangents):   # gives placeholders the names primals_1.., tangents_1..
        return functional(primals, tangents)

    gm = make_fx(named, tracing_mode="fake", decomposition_table=decompositions)(primals, tangents)
    # flat positional signature and a flat output list (drop make_fx's pytree wrapper)
    gm.graph._codegen = fx.graph.CodeGen()
    gm.recompile()
    _as_strided_to_view(gm)
    _factories_from_sizes(gm)
    mutated = _mutations_to_outputs(gm, len(primals), len(graph_positions))
    for i in mutated:
        if requires_grad[i]:
            raise TrainingUnsupported(f"in-place mutation of graph input {i}, which requires grad")
    _check_no_mutation_left(gm)
    return JointGraph(graph=gm, num_primals=len(primals), num_tangents=num_tangents,
                      num_user_outputs=len(graph_positions), mutated_inputs=mutated,
                      grad_input_indices=grad_input_indices, diff_outputs=diff, out_spec=spec,
                      leaf_kinds=leaf_kinds, aliased=aliased)


def _contiguous_strides(size) -> list[int]:
    strides, acc = [], 1
    for d in reversed(size):
        strides.append(acc)
        acc *= max(d, 1)
    return strides[::-1]


_FILLED_LIKE = {aten.full_like.default: None, aten.zeros_like.default: 0, aten.ones_like.default: 1}


def _factories_from_sizes(gm: fx.GraphModule) -> None:
    """full_like(x, v) (zeros_like, ones_like) of a contiguous result is full(x's sizes, v): the
    same tensor, with no edge from x. The partitioner reads an input edge as "needs x": nll_loss's
    backward builds its one-hot gradient as scatter(full_like(log_probs), labels) in the forward,
    and with x (the log-probabilities) seemingly needed to rebuild it, the whole (tokens x vocabulary)
    one-hot was saved for the backward (GPT-2: 411 MB at 4 x 512 tokens, in float32) where the
    labels, a few bytes per token, rebuild it."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _FILLED_LIKE:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not val.is_contiguous() or val.layout != torch.strided:
            continue
        if not all(isinstance(d, int) for d in val.shape):
            continue
        fill = _FILLED_LIKE[node.target]
        if fill is None:
            fill = node.args[1] if len(node.args) > 1 else node.kwargs.get("fill_value")
            if not isinstance(fill, (int, float, bool)):
                continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(aten.full.default, (list(val.shape), fill),
                                         {"dtype": val.dtype, "layout": torch.strided,
                                          "device": val.device, "pin_memory": False})
        new.meta.update(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()


def _as_strided_to_view(gm: fx.GraphModule) -> None:
    """as_strided(x, size, contiguous strides) of a contiguous x with the same number of elements
    (decompositions and view replay emit these for plain reshapes) is view(x, size): a view the
    backend can lower, where a general as_strided of a computed tensor is not."""
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not aten.as_strided.default:
            continue
        src, size, stride = node.args[0], list(node.args[1]), list(node.args[2])
        offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
        val = src.meta.get("val") if isinstance(src, fx.Node) else None
        if not isinstance(val, torch.Tensor) or not val.is_contiguous() or val.storage_offset() != 0:
            continue
        if offset not in (None, 0) or stride != _contiguous_strides(size) or \
                val.numel() != torch.Size(size).numel():
            continue
        node.target, node.args, node.kwargs = aten.view.default, (src, size), {}
        changed = True
    if changed:
        gm.recompile()


def _mutations_to_outputs(gm: fx.GraphModule, num_primals: int, num_user_outputs: int) -> list[int]:
    """Replace trailing copy_(primal, value) nodes by extra outputs (after the user outputs).

    Returns the primal indices in output order. The runtime copies each value back into its
    input, as eager's in-place op would have left it.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"][:num_primals]
    index = {n: i for i, n in enumerate(placeholders)}
    output = next(n for n in gm.graph.nodes if n.op == "output")
    new_values: dict[int, fx.Node] = {}
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default \
                and node.args[0] in index:
            new_values[index[node.args[0]]] = node.args[1]   # the last copy wins
            node.replace_all_uses_with(node.args[1])
            gm.graph.erase_node(node)
    mutated = sorted(new_values)
    outs = list(output.args[0])
    outs[num_user_outputs:num_user_outputs] = [new_values[i] for i in mutated]
    output.args = (outs,)
    gm.graph.lint()
    gm.recompile()
    return mutated


# Ops whose real outputs differ in kind from their fake ones: the RNN kernels return an
# undefined "workspace" at runtime where fake tensors give an empty tensor, so a saved workspace
# reaches the backward kernel as None. Graphs containing them run eagerly.
_UNRELIABLE_IN_JOINT = {"mkldnn_rnn_layer", "_cudnn_rnn", "miopen_rnn"}


def _check_no_mutation_left(gm: fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            if node.target._schema.name.split("::")[-1] in _UNRELIABLE_IN_JOINT:
                raise TrainingUnsupported(
                    f"{node.target} returns an undefined workspace at runtime that the backward "
                    "needs (fake tracing cannot see it)")
            schema = node.target._schema
            if schema.is_mutable and not _is_random(node.target):
                raise TrainingUnsupported(f"mutating op {node.target} left after functionalization")
