"""Split a joint forward+backward graph into a forward graph and a backward graph.

The question is which forward values cross over (saved for backward, held in memory between
the two) and which the backward recomputes from what was saved. Two strategies:

- "default": every value the backward needs that the forward can compute is computed in the
  forward and saved (the save-everything baseline);
- "min_cut" (the standard, after Chen et al. and AOTAutograd's rematerialization partitioner):
  build a flow network where each forward-computable node v is an edge v_in -> v_out whose
  capacity is the bytes of v's output, uses are infinite edges, the graph inputs hang off the
  source and every node that depends on a tangent hangs off the sink. A minimum cut is then
  the cheapest set of values (in bytes) to save such that everything the backward needs can be
  recomputed from them. Nodes we may not recompute (anything but cheap pointwise / view / shape
  ops; random ops above all, whose draw would differ) are tied to the source, so the cut must
  fall at or after them. Max-flow is our own Dinic (networkx is not available).
"""
from __future__ import annotations

import dataclasses
import operator
from collections import deque

import torch
import torch.fx as fx

from tracetorch import logs
from tracetorch.compiler.aot.joint import JointGraph, TrainingUnsupported

log = logs.get_logger(__name__)
aten = torch.ops.aten
INF = 1 << 62

# Cheap non-pointwise ops that are fine to recompute: shape/view plumbing and constants.
_CHEAP = {aten.t.default, aten.permute.default, aten.view.default, aten.reshape.default,
          aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
          aten.squeeze.default, aten.slice.Tensor, aten.select.int, aten.transpose.int,
          aten.alias.default, aten.detach.default, aten._unsafe_view.default, aten.clone.default,
          aten.full.default, aten.scalar_tensor.default, aten.zeros.default, aten.ones.default,
          aten._to_copy.default,
          # a scalar written into a tensor at positions read from another (nll_loss's one-hot
          # gradient): as cheap to rebuild as the fill it writes into
          aten.scatter.value}


@dataclasses.dataclass
class Partition:
    forward: fx.GraphModule     # primals -> user outputs, mutated-input values, saved values
    backward: fx.GraphModule    # saved values, tangents -> grads of grad_input_indices
    saved: list[str]            # names of the saved joint-graph nodes, in forward-output order
    recomputed: list[str]       # nodes both graphs compute (the backward recomputes them
                                # instead of loading a saved copy)
    saved_bytes: int            # bytes of saved values (parameters/buffers count 0: kept anyway)
    baseline_bytes: int         # what the "default" (save everything) partition would save
    strategy: str

    def decision(self) -> dict:
        return {"strategy": self.strategy, "saved": self.saved, "recomputed": self.recomputed,
                "saved_bytes": self.saved_bytes, "baseline_bytes": self.baseline_bytes,
                "bytes_saved_vs_baseline": self.baseline_bytes - self.saved_bytes}


def node_bytes(node: fx.Node) -> int | None:
    """Memory that saving a node's tensor output keeps alive, or None when it is not a single
    tensor. A view keeps its whole base's storage alive, so a view costs its storage's size:
    the cut then prefers saving a base once (e.g. the fused q/k/v projection) and recomputing
    its views (split, slices) in the backward over saving several views of it."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        own = val.numel() * val.element_size()
        try:
            return max(own, val.untyped_storage().nbytes())
        except Exception:           # no storage to ask (e.g. some tensor subclasses)
            return own
    return None


def is_recomputable(node: fx.Node, recompute_pointwise: bool = True) -> bool:
    if node.op == "placeholder":
        return True
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    op = node.target
    if not isinstance(op, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in op.tags:
        return False                       # a recomputed random op would draw a new mask
    if op in _CHEAP or _is_view(op):
        return True
    return recompute_pointwise and torch.Tag.pointwise in op.tags


def materialized_in_backward(node: fx.Node, tangent_dependent: set) -> bool:
    """A backward op reads this value as a whole buffer (a convolution's or a matrix product's
    gradient, not an op that fuses into a kernel), so the backward would store it again if it
    recomputed it: recomputing then costs a kernel writing it (and reading what it is made of)
    where saving costs nothing more. Inductor's partitioner bans all such recomputation; here
    only where the first cut has the backward rebuild the value from two or more buffers of
    its size (`_costly_rebuilds`), so a convolution's input `relu(batch_norm(conv))` is still
    rebuilt from the one convolution output the backward keeps anyway, and a LayerNorm output
    from the saved residual stream (the full ban grew ResNet-50's saved bytes by 74%, GPT-2's
    peak by 8%). Without any, ResNet-50's backward rebuilt each residual stream from every
    convolution output before it: one kernel read four 103 MB activations to rebuild a 103 MB
    convolution input."""
    for u in node.users:
        if u not in tangent_dependent or u.op != "call_function":
            continue
        op = u.target
        if op is operator.getitem or not isinstance(op, torch._ops.OpOverload):
            continue
        if is_recomputable(u) or torch.Tag.reduction in op.tags:
            continue
        return True
    return False


def _full_size_leaves(node: fx.Node, saved: set, limit: int = 256) -> int:
    """How many values of at least half `node`'s bytes rebuilding it reads: walking back
    through what the backward rebuilds too, the saved values and graph inputs it reaches."""
    size = node_bytes(node) or 0
    seen, stack, leaves = {node}, [node], 0
    while stack and len(seen) < limit:
        n = stack.pop()
        for a in n.all_input_nodes:
            if a in seen:
                continue
            seen.add(a)
            if a not in saved and a.op == "call_function":
                stack.append(a)
            elif (node_bytes(a) or 0) * 2 >= size:
                leaves += 1
    return leaves


def _is_view(op) -> bool:
    """Ops whose outputs alias their input without writing (split, unbind, slice, expand, ...):
    recomputing one costs nothing."""
    returns = op._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                 for r in returns)


# -- max-flow / min-cut (Dinic) --------------------------------------------------------------------
class FlowNetwork:
    def __init__(self):
        self.index: dict = {}
        self.head: list[list[int]] = []          # per vertex: edge ids
        self.to: list[int] = []
        self.cap: list[int] = []

    def vertex(self, key) -> int:
        if key not in self.index:
            self.index[key] = len(self.head)
            self.head.append([])
        return self.index[key]

    def add_edge(self, a, b, cap: int) -> None:
        u, v = self.vertex(a), self.vertex(b)
        for src, dst, c in ((u, v, cap), (v, u, 0)):      # the edge and its residual
            self.head[src].append(len(self.to))
            self.to.append(dst)
            self.cap.append(c)

    def max_flow(self, s, t) -> int:
        s, t = self.vertex(s), self.vertex(t)
        flow = 0
        while True:
            level = self._levels(s)
            if level[t] < 0:
                return flow
            it = [0] * len(self.head)
            while True:
                pushed = self._push(s, t, INF, level, it)
                if not pushed:
                    break
                flow += pushed

    def _levels(self, s) -> list[int]:
        level = [-1] * len(self.head)
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                if self.cap[e] > 0 and level[self.to[e]] < 0:
                    level[self.to[e]] = level[u] + 1
                    queue.append(self.to[e])
        return level

    def _push(self, s, t, limit, level, it) -> int:
        # iterative DFS along the level graph (graphs can be deeper than Python's recursion limit)
        path: list[int] = []
        u = s
        while True:
            if u == t:
                amount = min(self.cap[e] for e in path)
                for e in path:
                    self.cap[e] -= amount
                    self.cap[e ^ 1] += amount
                return amount
            advanced = False
            while it[u] < len(self.head[u]):
                e = self.head[u][it[u]]
                v = self.to[e]
                if self.cap[e] > 0 and level[v] == level[u] + 1:
                    path.append(e)
                    u = v
                    advanced = True
                    break
                it[u] += 1
            if not advanced:
                if not path:
                    return 0
                level[u] = -1                     # dead end: prune it
                e = path.pop()
                u = self.to[e ^ 1]
                it[u] += 1

    def source_side(self, s) -> set:
        """Vertices reachable from s in the residual network (after max_flow)."""
        seen = {self.vertex(s)}
        queue = deque(seen)
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                if self.cap[e] > 0 and self.to[e] not in seen:
                    seen.add(self.to[e])
                    queue.append(self.to[e])
        keys = {v: k for k, v in self.index.items()}
        return {keys[v] for v in seen}


# -- the partitioner -----------------------------------------------------------------------------
def _ancestors(roots, stop=frozenset()) -> set:
    seen, stack = set(), [r for r in roots if isinstance(r, fx.Node)]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stop:
            continue
        stack.extend(n.all_input_nodes)
    return seen


def free_to_save(joint: JointGraph) -> set:
    """Parameters and buffers stay alive with their module anyway: saving one costs no memory
    (unless it is mutated, when the pre-mutation value must be copied)."""
    primals = [n for n in joint.graph.graph.nodes if n.op == "placeholder"][:joint.num_primals]
    mutated = {primals[i] for i in joint.mutated_inputs}
    return {primals[i] for i in joint.module_state if primals[i] not in mutated}


def _choose_saved(joint: JointGraph, strategy: str, recompute_pointwise: bool):
    nodes = list(joint.graph.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    tangents = set(placeholders[joint.num_primals:])
    outs = list(nodes[-1].args[0])
    bw_outs = [o for o in outs[joint.num_forward_outputs:] if isinstance(o, fx.Node)]

    tangent_dependent = set()
    for n in nodes:
        if n.op == "output":
            continue
        if n in tangents or any(a in tangent_dependent for a in n.all_input_nodes):
            tangent_dependent.add(n)
    bw_needed = _ancestors(bw_outs)
    candidates = [n for n in nodes if n in bw_needed and n not in tangent_dependent]

    # baseline: everything forward-computable that a backward node (or output) uses is saved
    baseline = [n for n in candidates
                if any(u in tangent_dependent for u in n.users) or n in bw_outs]
    if strategy == "default":
        return baseline, baseline, tangent_dependent
    free = free_to_save(joint)
    saved = _min_cut(nodes, candidates, tangent_dependent, bw_outs, free, recompute_pointwise, banned=set())
    # A value the backward stores anyway for a product or convolution gradient, rebuilt from two
    # or more values of its size, is saved instead (`materialized_in_backward`): one more cut.
    banned = _costly_rebuilds(candidates, set(saved), tangent_dependent)
    if banned:
        log.debug("partition_rebuilds_banned", count=len(banned), nodes=sorted(n.name for n in banned)[:50],
                  reason="read whole by a backward product or convolution gradient, and rebuilt from "
                         "two or more values of its size")
        saved = _min_cut(nodes, candidates, tangent_dependent, bw_outs, free, recompute_pointwise, banned)
    return saved, baseline, tangent_dependent


def _min_cut(nodes, candidates, tangent_dependent, bw_outs, free, recompute_pointwise, banned) -> list:
    candidate_set = set(candidates)
    net = FlowNetwork()
    position = {n: i for i, n in enumerate(nodes)}
    for n in candidates:
        weight = 0 if n in free else node_bytes(n)
        if n.op == "placeholder" or n in banned or not is_recomputable(n, recompute_pointwise):
            net.add_edge("source", (n, "in"), INF)
        net.add_edge((n, "in"), (n, "out"), INF if weight is None else _capacity(
            weight, position[n], len(nodes)))
        for u in n.users:
            if u in candidate_set:
                net.add_edge((n, "out"), (u, "in"), INF)
            elif u in tangent_dependent:
                net.add_edge((n, "out"), "sink", INF)
        if n in bw_outs:                              # a gradient that needs no tangent
            net.add_edge((n, "out"), "sink", INF)
    net.vertex("sink")
    if net.max_flow("source", "sink") >= INF:
        raise TrainingUnsupported("partition: no finite cut (the backward needs a value that "
                                  "cannot be saved: a tuple or a non-tensor)")
    reach = net.source_side("source")
    return [n for n in candidates if (n, "in") in reach and (n, "out") not in reach]


def _costly_rebuilds(candidates, saved: set, tangent_dependent: set) -> set:
    """The values the backward would rebuild (read by it, not saved) that it materializes and
    that rebuilding reads two or more values of their size for."""
    return {n for n in candidates
            if n not in saved and n.op == "call_function" and materialized_in_backward(n, tangent_dependent)
            and _full_size_leaves(n, saved) >= 2}


_SCALE = 64


def _capacity(weight: int, position: int, num_nodes: int) -> int:
    """The cost of saving a value of `weight` bytes produced at `position` in the joint graph.

    Bytes first. Among cuts of (nearly) equal bytes, the one saving LATER values wins (an
    earlier value costs up to 1/_SCALE more): e.g. saving a residual stream x1 = x0 + a1
    instead of the summand a1 costs the same bytes, but with the summands saved the backward
    recomputes x4 = x0 + a1 + m1 + a2 + m2 and keeps every summand alive until it has (a
    longer live range and a higher backward peak than eager's). A free value (a parameter)
    still costs 1, so that among equal cuts the one saving fewer values wins."""
    if weight == 0:
        return 1
    return weight * _SCALE + (weight * (num_nodes - position)) // max(num_nodes, 1) + 1


def partition_joint(joint: JointGraph, strategy: str = "min_cut",
                    recompute_pointwise: bool = True) -> Partition:
    saved, baseline, tangent_dependent = _choose_saved(joint, strategy, recompute_pointwise)
    g = joint.graph.graph
    nodes = list(g.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    primals = placeholders[:joint.num_primals]
    tangents = placeholders[joint.num_primals:]
    outs = list(nodes[-1].args[0])
    fw_outs = outs[:joint.num_forward_outputs]
    grads = outs[joint.num_forward_outputs:]
    grads = [grads[i] for i in range(len(grads))]
    mutated = {primals[i] for i in joint.mutated_inputs}

    # forward graph: primals -> fw outputs + saved values
    fwd = fx.Graph()
    env: dict = {}
    needed = _ancestors(fw_outs + saved)
    for n in nodes:
        if n.op == "placeholder" and n in primals:
            env[n] = fwd.placeholder(n.name)
            env[n].meta = dict(n.meta)
        elif n in needed and n.op != "output" and n.op != "placeholder":
            env[n] = fwd.node_copy(n, lambda a: env[a])
    saved_values = []
    for s in saved:
        v = env[s]
        if s in mutated:   # save the pre-mutation value: the input is overwritten after forward
            v = fwd.call_function(aten.clone.default, (v,))
            v.meta = dict(s.meta)
        saved_values.append(v)
    fwd.output([env[o] if isinstance(o, fx.Node) else o for o in fw_outs] + saved_values)

    # backward graph: saved values + tangents -> grads
    bwd = fx.Graph()
    benv: dict = {}
    for s in saved:
        benv[s] = bwd.placeholder(s.name)
        benv[s].meta = dict(s.meta)
    for t in tangents:
        benv[t] = bwd.placeholder(t.name)
        benv[t].meta = dict(t.meta)
    grad_nodes = [grads[i] for i in range(len(joint.grad_input_indices))]
    bneeded = _ancestors(grad_nodes, stop=set(saved) | set(tangents))
    recomputed = []
    for n in nodes:
        if n in bneeded and n not in benv and n.op not in ("output", "placeholder"):
            benv[n] = bwd.node_copy(n, lambda a: benv[a])
            if n in env and n.op == "call_function":   # computed by the forward too: recomputed
                recomputed.append(n.name)
        elif n in bneeded and n.op == "placeholder" and n not in benv:
            raise TrainingUnsupported(f"partition: backward needs {n.name} but it was not saved")
    bwd.output([benv[gn] if isinstance(gn, fx.Node) else gn for gn in grad_nodes])

    root = joint.graph
    fw_gm = fx.GraphModule(root, fwd, "ForwardGraph")
    bw_gm = fx.GraphModule(root, bwd, "BackwardGraph")
    free = free_to_save(joint)
    size = lambda ns: sum(node_bytes(n) or 0 for n in ns if n not in free)  # noqa: E731
    return Partition(forward=fw_gm, backward=bw_gm, saved=[s.name for s in saved],
                     recomputed=recomputed, saved_bytes=size(saved), baseline_bytes=size(baseline),
                     strategy=strategy)
