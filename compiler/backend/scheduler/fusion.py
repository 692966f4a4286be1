"""Fusion: group ComputedBuffers into kernels (vertical: producer -> consumer, including pointwise
into reductions; horizontal: independent nodes over the same iteration space that share reads).

Nodes are visited in program order; each joins the first candidate group where fusion is legal,
or starts a new one. A group runs at one place in the step list; joining may move it later (past
the producers of the new node) when nothing in between reads the group's buffers. Every
decision, taken or refused, is an event with its reason.

Legality (so a code generator can evaluate a group's nodes in order at each iteration point):
- iteration spaces agree: a group has outer `ranges` and `reduction_ranges`; a Pointwise joins
  over `ranges + reduction_ranges` ("inner") or `ranges` ("outer"); a Reduction must match both;
- every load of a buffer produced in the group reads the element stored at the same iteration
  point (same index after renaming loop variables), and not through an indirect index.
- an ir.ScatterBuffer runs in a kernel of its own ("closed" group): its writes go to positions
  computed from loaded indices, so no other node may read its buffer in the same kernel (an
  element could be read before every write to it has landed), and it joins no group.
"""

from __future__ import annotations

import sympy

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.indexing import access_kind, simplify_index

log = logs.get_logger(__name__)


def _same_list(a, b) -> bool:
    return len(a) == len(b) and all(sympy.expand(x - y) == 0 for x, y in zip(a, b))


class Group:
    """A kernel under construction."""

    def __init__(self, node: ir.ComputedBuffer):
        d = node.data
        self.nodes = [node]
        if isinstance(d, ir.Reduction):
            self.ranges, self.rranges = list(d.ranges), list(d.reduction_ranges)
            self.kinds = {node.name: ir.NODE_REDUCTION}
        else:
            self.ranges, self.rranges = list(d.ranges), []
            self.kinds = {node.name: ir.NODE_OUTER}
        self.device = d.device
        self.closed = isinstance(node, ir.ScatterBuffer)   # nothing joins a scatter's kernel
        # a node joined it from after an extern call (_hoists_past_extern): whatever joins it
        # later is computed that early too, so the same check applies to its consumers
        self.hoisted = False

    def names(self):
        return {n.name for n in self.nodes}


def node_kind_in(ranges, rranges, node):
    """How `node` would run in a group with these ranges, or None."""
    d = node.data
    if isinstance(d, ir.Reduction):
        if _same_list(d.ranges, ranges) and _same_list(d.reduction_ranges, rranges) and rranges:
            return ir.NODE_REDUCTION
        return None
    if rranges and _same_list(d.ranges, list(ranges) + list(rranges)):
        return ir.NODE_INNER
    if _same_list(d.ranges, ranges):
        return ir.NODE_OUTER
    return None


def var_map(node, kind, n_outer):
    """Node loop vars -> group loop vars (x* outer, r* reduction)."""
    xs = [ir.index_var("x", k) for k in range(n_outer)]
    d = node.data
    iv = d.index_vars()
    if kind == ir.NODE_INNER:
        rs = [ir.index_var("r", k) for k in range(len(iv) - n_outer)]
        return dict(zip(iv, xs + rs))
    m = dict(zip(iv, xs))
    if kind == ir.NODE_REDUCTION:
        m.update({r: ir.index_var("r", k) for k, r in enumerate(d.reduction_vars())})
    return m


def prospective(group: Group, node):
    """(ranges, rranges, kinds) of group + node, or (None, reason)."""
    d = node.data
    if d.device != group.device:
        return None, "different devices"
    if isinstance(d, ir.Reduction):
        if group.rranges:
            if _same_list(group.ranges, d.ranges) and _same_list(group.rranges, d.reduction_ranges):
                return (group.ranges, group.rranges, dict(group.kinds, **{node.name: ir.NODE_REDUCTION})), ""
            return None, (f"reduction over {d.ranges} x {d.reduction_ranges} vs group "
                          f"{group.ranges} x {group.rranges}")
        # a pure pointwise group adopts the reduction's split
        if any(k == ir.NODE_REDUCTION for k in group.kinds.values()):
            return None, "group already holds a reduction over other ranges"
        o, r = list(d.ranges), list(d.reduction_ranges)
        if _same_list(group.ranges, o + r):
            kinds = {k: ir.NODE_INNER for k in group.kinds}
        elif _same_list(group.ranges, o):
            kinds = {k: ir.NODE_OUTER for k in group.kinds}
        else:
            return None, f"pointwise ranges {group.ranges} do not split as {o} x {r}"
        kinds[node.name] = ir.NODE_REDUCTION
        return (o, r, kinds), ""
    kind = node_kind_in(group.ranges, group.rranges, node)
    if kind is None:
        return None, f"ranges {d.ranges} do not match group {group.ranges} x {group.rranges}"
    return (group.ranges, group.rranges, dict(group.kinds, **{node.name: kind})), ""


def check_deps(nodes: list, node, plan) -> str:
    """'' if every read of a buffer of `nodes` (a group's, as they would be after a re-split) by
    `node` is a same-point read, else why not."""
    ranges, rranges, kinds = plan
    n_outer = len(ranges)
    members = {n.name: n for n in nodes}
    nmap = var_map(node, kinds[node.name], n_outer)
    var_ranges = {ir.index_var("x", k): r for k, r in enumerate(ranges)}
    var_ranges.update({ir.index_var("r", k): r for k, r in enumerate(rranges)})
    for name, index in node.read_deps():
        if name not in members:
            continue
        producer = members[name]
        pkind = kinds[name]
        if index.free_symbols & set(node.indirect_symbols):
            return f"{node.name} reads {name} through an indirect index"
        if pkind == ir.NODE_INNER and kinds[node.name] == ir.NODE_OUTER:
            return f"{node.name} (outer) needs a whole row of {name} (inner)"
        pmap = var_map(producer, pkind, n_outer)
        # floor/mod terms of a re-split or viewed index simplify only with the loop ranges
        store = simplify_index(producer.store_index(producer.data.index_vars()).xreplace(pmap), var_ranges)
        load = simplify_index(index.xreplace(nmap), var_ranges)
        if sympy.expand(store - load) != 0:
            return f"{node.name} reads {name}[{load}] but it is stored at [{store}] (not the same point)"
    return ""


_FUSED_BECAUSE = {"vertical": "same iteration point",
                  "horizontal": "same iteration space, shared reads or a shared producer",
                  "independent": "same iteration space, independent"}


def decide(name_a: str, nodes_b: list, fused: bool, reason: str, kind: str):
    logs.artifact("fusion_decision", lambda: {"nodes": nodes_b + [name_a], "fused": fused, "reason": reason,
                                              "kind": kind})
    logs.artifact("fusion", lambda: f"{'fused' if fused else 'not fused'} ({kind}): {name_a} into "
                                    f"[{', '.join(nodes_b)}]: {reason}")
    log.debug("fusion_decision", node=name_a, group=nodes_b, fused=fused, kind=kind, reason=reason)


def fuse(steps_in: list, graph_outputs=frozenset()) -> list:
    """steps_in: buffers in program order; graph_outputs: names of buffers the graph returns (or
    keeps as side effects). Returns steps: Group or non-ComputedBuffer buffers."""
    steps: list = []
    where: dict[str, object] = {}     # buffer name -> step holding it
    readers: dict[str, list] = {}     # buffer name -> names of the buffers reading it
    for b in steps_in:
        for r in b.reads():
            readers.setdefault(r, []).append(b.name)
    lifetimes = _Lifetimes(steps, where, readers, graph_outputs)
    enabled = config.backend.fusion
    max_size = config.backend.max_fusion_size
    for buf in steps_in:
        if not isinstance(buf, ir.ComputedBuffer):
            steps.append(buf)
            where[buf.name] = buf
            continue
        reads = set(buf.reads())
        chosen = None
        if isinstance(buf, ir.ScatterBuffer):
            decide(buf.name, [], False, f"a scatter (in place of {buf.target.name}) runs in a kernel of its own",
                   "scatter")
        elif enabled:
            producers = [where[r] for r in reads if r in where]
            vertical = [s for s in dict.fromkeys(producers) if isinstance(s, Group) and not s.closed]
            vertical.sort(key=lambda s: -steps.index(s))
            sources = {id(where[r]) for r in reads if r in where}
            horizontal = [s for s in reversed(steps) if isinstance(s, Group) and s not in vertical
                          and not s.closed and _is_sibling(reads, sources, s, where)][:6]
            kinds = [("vertical", vertical), ("horizontal", horizontal)]
            tiny = _is_tiny(buf)
            if (config.backend.fuse_independent or tiny) and isinstance(buf.data, ir.Pointwise):
                # same loops, nothing shared: one launch instead of two (a many-parameter
                # optimizer step updates several same-shaped parameters in one kernel; every
                # batch norm's num_batches_tracked += 1 of a training forward, in one kernel)
                kinds.append(("independent", [s for s in reversed(steps) if isinstance(s, Group)
                                              and not s.closed and not s.rranges
                                              and s not in vertical and s not in horizontal
                                              and _same_list(s.ranges, buf.data.ranges)][:16]))
            for kind, cands in kinds:
                for g in cands:
                    names = [n.name for n in g.nodes]
                    if len(g.nodes) >= max_size:
                        decide(buf.name, names, False, f"group already has {max_size} nodes", kind)
                        continue
                    crossed = False
                    if (kind != "vertical" or g.hoisted) and not (tiny and kind == "independent"):
                        why, crossed = _hoists_past_extern(steps, g, buf, lifetimes)
                        if why:
                            decide(buf.name, names, False, why, kind)
                            continue
                    node, members, plan, why = _fit(g, buf)
                    if plan is None:
                        decide(buf.name, names, False, why, kind)
                        continue
                    why = check_deps(members, node, plan)
                    if why:
                        decide(buf.name, names, False, why, kind)
                        continue
                    why = _place(steps, g, buf, where)
                    if why:
                        decide(buf.name, names, False, why, kind)
                        continue
                    resplit = node is not buf or members is not g.nodes
                    g.ranges, g.rranges, g.kinds = plan
                    g.nodes = members + [node]
                    decide(buf.name, names, True, _FUSED_BECAUSE[kind]
                           + (f" (loops re-split as {list(plan[0])} x {list(plan[1])})" if resplit else ""),
                           kind)
                    chosen = g
                    g.hoisted = g.hoisted or crossed
                    break
                if chosen:
                    break
        if chosen is None:
            chosen = Group(buf)
            steps.append(chosen)
        where[buf.name] = chosen
    return steps


def _fit(g: Group, buf):
    """(node, group members, plan, reason): how `buf` can join g. Where the iteration spaces
    differ only in how the same loops are split (a view between them: [256, 128] vs
    [4, 64] x [128]), the pointwise side is re-split to the finer loops (ir.ComputedBuffer.resplit):
    `node` is then buf re-split, or the members are the group's nodes re-split."""
    plan, why = prospective(g, buf)
    if plan is not None:
        return buf, g.nodes, plan, ""
    d = buf.data
    if isinstance(d, ir.Pointwise):
        for dims in ([list(g.ranges) + list(g.rranges)] if g.rranges else []) + [list(g.ranges)]:
            node = buf.resplit(dims)
            if node is not None:
                plan2, _ = prospective(g, node)
                if plan2 is not None:
                    return node, g.nodes, plan2, ""
            # a reduction's pointwise consumer whose loops run in another order (channels-last)
            for node in (_permuted_as(buf, dims) if g.rranges else ()):
                plan2, _ = prospective(g, node)
                if plan2 is not None and not check_deps(g.nodes, node, plan2) \
                        and _renest_fits(g.nodes + [node], plan2):
                    return node, g.nodes, plan2, ""
        # a reduction group whose reduction loops are coarser than this node's: the group's
        # reduction loops split as its (a bias gradient's sum over B * S tokens beside the
        # [B, S, D] product it reduces, stored for the matmuls)
        members, rdims = _finer_group(g, d.ranges) if g.rranges else (None, None)
        if members is not None:
            trial = _trial_group(members, g.device, dict(g.kinds), g.ranges, rdims)
            dims = list(g.ranges) + rdims
            for k, node in enumerate([buf.resplit(dims)] + _permuted_as(buf, dims)):
                if node is None:
                    continue
                plan2, _ = prospective(trial, node)
                if plan2 is not None and not check_deps(members, node, plan2) \
                        and (k == 0 or _renest_fits(members + [node], plan2)):
                    return node, members, plan2, ""
    elif isinstance(d, ir.Reduction) and not g.rranges:
        for node, members, renested in _reduction_candidates(g, buf):
            if all(m is not None for m in members):
                plan2, _ = prospective(_trial_group(members, g.device), node)
                if plan2 is not None and (not renested or not check_deps(members, node, plan2)
                                          and _renest_fits(members + [node], plan2)):
                    return node, members, plan2, ""
    return None, g.nodes, None, why


def _reduction_candidates(g: Group, buf):
    """Ways for reduction `buf` to join the pure pointwise group g, tried in this order:
    (the reduction node, g's nodes remade, whether they were re-nested: then the same-point reads
    and the memory walk are checked here rather than by the caller). g's nodes re-split to finer
    loops than the reduction's split; or over the same loops in another order (the per-channel
    sums of a batch norm, [C] x [N, H, W], of a channels-last pointwise result whose loops run
    over [N, H, W, C], as it is stored), the reduction's loops split further where one of g's
    loops is a piece of one of them (_nestings); or, the reduction's loops coarser than the
    group's, its reduction loops split as the group's (a bias gradient's sum over B * S tokens of
    a [B, S, D] dropout backward)."""
    d = buf.data
    dims = list(d.ranges) + list(d.reduction_ranges)
    yield buf, [n.resplit(dims) for n in g.nodes], False
    if len({tuple(n.data.ranges) for n in g.nodes}) != 1:     # the group's nodes must be alike
        return
    ranges = g.nodes[0].data.ranges
    for finer, pieces in _nestings(ranges, dims):
        node = buf if finer == dims else _reduction_as(buf, finer)
        if node is not None:
            yield node, [_renest(n, finer, pieces) for n in g.nodes], True
    refined = _finer_reduction(buf, ranges)
    if refined is None:
        return
    dims = list(refined.data.ranges) + list(refined.data.reduction_ranges)
    for finer, pieces in _nestings(ranges, dims):
        node = refined if finer == dims else _reduction_as(refined, finer)
        if node is not None:
            yield node, [_renest(n, finer, pieces) or n.resplit(finer) for n in g.nodes], True


def _reduction_as(buf, dims):
    """Reduction `buf` with its outer and reduction loops split as `dims` (outer ones first), or
    None where `dims` is no such split."""
    d = buf.data
    n = len(d.ranges)
    for k in range(n, len(dims) + 1):
        if ir.split_into(d.ranges, dims[:k]) is not None and ir.split_into(d.reduction_ranges, dims[k:]) is not None:
            node = buf.outer_resplit(dims[:k])
            if node is not None and not _same_list(d.reduction_ranges, dims[k:]):
                node = node.reduction_resplit(dims[k:])
            return node
    return None


def _trial_group(members, device, kinds=None, ranges=None, rranges=()) -> Group:
    """A group of `members` to ask prospective() about: pure pointwise (every member outer)
    unless kinds and ranges are given."""
    trial = Group(members[0])
    trial.nodes, trial.device = members, device
    trial.kinds = kinds if kinds is not None else {m.name: ir.NODE_OUTER for m in members}
    if ranges is not None:
        trial.ranges, trial.rranges = list(ranges), list(rranges)
    return trial


def _finer_group(g: Group, ranges):
    """(g's nodes with its reduction loops split as the loops of `ranges` left once each of g's
    outer loops is matched to one of the same size, those loops), or (None, None)."""
    rdims = _leftover_loops(g.ranges, g.rranges, ranges)
    if rdims is None:
        return None, None
    members = []
    for n in g.nodes:
        kind = g.kinds[n.name]
        if kind == ir.NODE_REDUCTION:
            m = n.reduction_resplit(rdims)
        elif kind == ir.NODE_INNER:
            m = n.resplit(list(g.ranges) + rdims)
        else:
            m = n
        if m is None:
            return None, None
        members.append(m)
    return members, rdims


def _leftover_loops(outer, rranges, ranges) -> list | None:
    """The loops of `ranges` left once each of `outer` is matched to one of the same size (in
    order), if they split `rranges` into more loops (consecutive, row-major), else None."""
    used = []
    for r in outer:
        k = next((k for k, x in enumerate(ranges) if k not in used and sympy.expand(x - r) == 0), None)
        if k is None:
            return None
        used.append(k)
    rest = [x for k, x in enumerate(ranges) if k not in used]
    if len(rest) <= len(rranges) or ir.split_into(rranges, rest) is None:
        return None
    return rest


def _finer_reduction(buf, ranges):
    """`buf` (a reduction) with its reduction loops split as the loops of `ranges` left once each
    of its outer loops is matched to one of the same size (in order): [768] x [512] against
    [2, 256, 768] as [768] x [2, 256]. None where nothing splits (check_deps judges the pairing)."""
    rest = _leftover_loops(buf.data.ranges, buf.data.reduction_ranges, ranges)
    return buf.reduction_resplit(rest) if rest is not None else None


def _renesting_allowed(node) -> bool:
    """backend.renest_fusion: 'on', 'off', or 'auto': re-nest, for Triton kernels only where the
    joined group walks memory one way (_walks_one_way, checked once the plan is known)."""
    return config.backend.renest_fusion != "off"


def _renest_fits(nodes, plan) -> bool:
    """May a group of `nodes` under `plan` hold re-nested nodes? Always for C++ kernels and under
    renest_fusion 'on'. A Triton reduction kernel's re-nested node loads and stores along the
    reduction's block shape: ResNet-50's max-pool backward (reading NCHW gradients and indices)
    re-nested into the first stage of a channels-last batch-norm statistic ran 4.7 ms per step on
    the H100, 0.2 ms as a kernel of its own (wide tiles, half the loads strided along the
    channels); a bias gradient's partial sums over the dropout backward product they read walk
    it as the product's own kernel stores it. So there, every access must step along the same
    kind of loop (indexing.access_kind: all along the rows, or all along the outputs)."""
    mode = config.backend.renest_fusion
    if mode == "on":
        return True
    from tracetorch.compiler.backend.lowering.registry import uses_triton
    if not uses_triton(nodes[0].get_device()):
        return True
    return mode == "auto" and _walks_one_way(nodes, plan)


def _walks_one_way(nodes, plan) -> bool:
    """Do all loads of `nodes` from outside the group, and the stores of its pointwise nodes,
    step along one kind of loop under `plan` (access_kind "row" or "outer"; accesses that step
    along neither, such as broadcasts, do not count)?"""
    ranges, rranges, kinds = plan
    xs = [ir.index_var("x", k) for k in range(len(ranges))]
    rs = [ir.index_var("r", k) for k in range(len(rranges))]
    var_ranges = dict(zip(xs, ranges)) | dict(zip(rs, rranges))
    members = {n.name for n in nodes}
    seen = set()
    for n in nodes:
        vmap = var_map(n, kinds[n.name], len(ranges))
        indexes = [index for name, index in n.read_deps() if name not in members]
        if kinds[n.name] != ir.NODE_REDUCTION:
            indexes.append(n.store_index(n.data.index_vars()))
        for index in indexes:
            kind = access_kind(simplify_index(index.xreplace(vmap), var_ranges), xs, ranges, rs, rranges)
            if kind is not None:
                seen.add(kind)
    return len(seen) <= 1


def _permuted_as(node, dims) -> list:
    """The ways found to nest a pointwise node's loops as `dims` by splitting and reordering
    them (_renest), for the caller to check: a channels-last [N, H, W, C] as the [N, H', C] x
    [h, W] of a split batch-norm statistic (lowering/split_reduction.py)."""
    return [m for m in (_renest(node, dims, p) for p in _piece_choices(node.data.ranges, dims)) if m is not None]


def _renest(node, dims, pieces):
    """node with each loop k split as the dims at positions pieces[k], the pieces nested in the
    order of `dims` (then re-split to place its 1s), or None where that reorders nothing (or
    re-nesting is off for its code generator)."""
    if not _renesting_allowed(node):
        return None
    finer = [dims[j] for run in pieces for j in run]       # each loop split into its pieces
    owners = [j for run in pieces for j in run]             # the dim of `dims` each piece is
    order = sorted(range(len(owners)), key=owners.__getitem__)
    if order == list(range(len(order))):
        return None                                          # no reordering: resplit's case
    split = node.resplit(finer)
    permuted = split.permuted(order) if split is not None else None
    return permuted.resplit(dims) if permuted is not None else None


def _piece_choices(ranges, dims) -> list:
    """Distinct loop_pieces assignments: dims taken in order, or whole matches first."""
    out = []
    for exact_first in (False, True):
        p = loop_pieces(ranges, dims, exact_first)
        if p is not None and p not in out:
            out.append(p)
    return out


def _nestings(ranges, dims) -> list[tuple[list, list]]:
    """(finer dims, pieces): ways to nest loops `ranges` as `dims`, each a loop_pieces
    assignment to `dims` or, where a loop is a piece of one dim of `dims` (a split reduction's
    [64 chunks of 32 tokens, 768] against the [4, 512, 768] it reduces: 64 = 4 x 16), to `dims`
    with that dim split (_refined_dims), which the reduction then takes too (_reduction_as)."""
    out = [(list(dims), p) for p in _piece_choices(ranges, dims)]
    finer = _refined_dims(ranges, dims)
    if finer is not None:
        out += [(finer, p) for p in _piece_choices(ranges, finer)]
    return out


def _refined_dims(ranges, dims) -> list | None:
    """`dims` with each dim that a loop of `ranges` is a proper piece of split there (its
    leading part the loop's size): loops and dims taken in order, as loop_pieces pairs them;
    None where nothing splits or a size is symbolic."""
    sizes = [sympy.sympify(x) for x in list(ranges) + list(dims)]
    if not all(x.is_Integer and x > 0 for x in sizes):
        return None
    cells = [[int(d), False] for d in dims]         # [size, used]
    changed = False
    for r in (int(x) for x in ranges):
        rem = r
        for cell in cells:                          # whole dims first, as loop_pieces takes them
            if rem != 1 and not cell[1] and cell[0] != 1 and rem % cell[0] == 0:
                cell[1] = True
                rem //= cell[0]
        if rem == 1:
            continue
        j = next((j for j, (size, used) in enumerate(cells) if not used and size % rem == 0), None)
        if j is None:
            return None
        size = cells[j][0]
        cells[j:j + 1] = [[rem, True], [size // rem, False]]
        changed = True
    return [c[0] for c in cells] if changed else None


def loop_pieces(ranges, dims, exact_first: bool = False) -> list[list[int]] | None:
    """For each loop of `ranges`, the positions in `dims` (sizes other than 1) whose product it
    is, every such dim used once, or None. Taken greedily in `dims` order (H = H' x h before W
    when both are split), or with a dim of the loop's whole size first (W before a C it is a
    multiple of); symbolic sizes match only whole. A wrong pairing of equal sizes is refused by
    the same-point check of the reads (check_deps)."""
    used, pieces = set(), []
    for r in ranges:
        run, rem = [], sympy.sympify(r)
        whole = next((j for j, d in enumerate(dims) if j not in used and sympy.expand(rem - d) == 0), None) \
            if exact_first and rem != 1 else None
        if whole is not None:
            run, rem = [whole], sympy.Integer(1)
            used.add(whole)
        for j, d in enumerate(dims):
            if rem == 1:
                break
            if j in used or d == 1:
                continue
            if sympy.expand(rem - d) == 0:
                rem = sympy.Integer(1)
            elif rem.is_Integer and sympy.sympify(d).is_Integer and int(d) != 0 and int(rem) % int(d) == 0:
                rem = sympy.Integer(int(rem) // int(d))
            else:
                continue
            run.append(j)
            used.add(j)
        if rem != 1:
            return None
        pieces.append(run)
    if any(d != 1 and j not in used for j, d in enumerate(dims)):
        return None
    return pieces


#: a pointwise node over at most this many elements is all launch: it joins any open group over
#: the same loops (independent fusion), and computing it early keeps nothing large alive
TINY_NUMEL = 16


def _is_tiny(buf) -> bool:
    if not isinstance(buf.data, ir.Pointwise):
        return False
    n = _static_product(buf.data.ranges)
    return n is not None and n <= TINY_NUMEL


def _static_product(sizes) -> int | None:
    """The product of `sizes`, or None where one is symbolic."""
    n = ir.product(sizes)
    return int(n) if n.is_number else None


#: a reduction that reduces at least this many elements into each output may be computed early,
#: past extern calls: its output is that much smaller than what it reads (the per-channel sums of
#: a batch norm's backward join the reduction of the other batch norm reading the same gradient
#: in a residual block: one read of the gradient instead of two)
SMALL_OUTPUT_RATIO = 64


def _hoists_past_extern(steps, g: Group, buf, lifetimes) -> tuple[str, bool]:
    """A sibling fusion computes `buf` where g runs, earlier than its place in the program. Past
    an extern kernel (a matmul, a convolution backward) that keeps `buf` alive during the call,
    whose own inputs and outputs are typically the largest tensors live then: in a backward
    graph the recomputed input of one convolution's backward, hoisted into a kernel before the
    previous convolution's backward, raised the step's peak memory by a whole activation. Saving
    a re-read of the shared inputs is not worth that, unless computing `buf` early also ends
    the life of buffers it is the last reader of, at least as large as its own output: an MLP's
    GELU backward joins the kernel recomputing the GELU for the weight gradient's product (one
    read of the layer's widest activation instead of two), and frees the incoming gradient before
    that product instead of after it. A reduction's small output (SMALL_OUTPUT_RATIO) is no
    concern either, nor is a graph output, alive at the graph's end whenever it is computed (a
    training forward's saved residual sums were stored by kernels of their own after the last
    matmul, recomputing each sum: GPT-2 50 kernels, T5-small 78; the planned peaks stayed or fell).
    Returns (why not, or "", whether an extern call lies between)."""
    later = steps[steps.index(g) + 1:]
    # views cost nothing, nor does an input mutation's copy_ (it allocates nothing)
    extern = next((s for s in later if isinstance(s, ir.ExternKernel)
                   and not s.kernel.startswith("aten.copy_")), None)
    if extern is None:
        return "", False
    if _reduces_at_least(buf, SMALL_OUTPUT_RATIO):
        return "", True
    if buf.name in lifetimes.graph_outputs:
        return "", True
    made, freed = lifetimes.hoisting(g, buf)
    if made is not None and freed is not None and made <= freed:
        return "", True
    return f"would be computed before {extern.name} ({type(extern).__name__}) and kept alive across it", True


class _Lifetimes:
    """What a fusion that computes a node early allocates early, and what it lets die early."""

    def __init__(self, steps, where, readers, graph_outputs):
        self.steps, self.where, self.readers = steps, where, readers
        self.graph_outputs = set(graph_outputs)

    def hoisting(self, g: Group, buf) -> tuple:
        """(bytes of buf's output, bytes of the buffers whose last reader becomes g's kernel when
        buf joins it and whose storage buf can take in place); None where a size is not a
        constant. Only storage taken in place counts: a buffer merely freed after the kernel is
        still alive while the kernel writes buf's output (the two would coexist where they did
        not before)."""
        at = self.steps.index(g)
        freed = 0
        members = g.names()
        for r in set(buf.reads()):
            step = self.where.get(r)
            if step is None or step is g or r in self.graph_outputs or self.steps.index(step) > at:
                continue
            others = [x for x in self.readers.get(r, ()) if x != buf.name]
            if any(x in members or x not in self.where or self.steps.index(self.where[x]) > at
                   or isinstance(self.where[x], ir.FallbackKernel) for x in others):
                continue          # read again after g's kernel, by g, or held by an ATen call
            node = next(n for n in step.nodes if n.name == r) if isinstance(step, Group) else step
            if _takes_in_place(buf, node):
                size = _nbytes(node)
                if size is None:
                    return _nbytes(buf), None
                freed += size
        return _nbytes(buf), freed


def _takes_in_place(buf, node) -> bool:
    """Can pointwise `buf` be stored into `node`'s storage (memory._inplace_candidate's rule):
    as many elements of one dtype, each read only where buf stores the same element?"""
    from tracetorch.compiler.backend.scheduler import memory
    if not isinstance(buf.data, ir.Pointwise) or isinstance(buf, ir.ScatterBuffer):
        return False
    a, b = buf.layout, getattr(node, "layout", None)
    if not isinstance(b, ir.Layout) or (memory._key(a) != memory._key(b) and not memory.same_storage(a, b)):
        return False
    store = buf.store_index(buf.data.index_vars())
    return all(sympy.expand(index - store) == 0 for name, index in buf.read_deps() if name == node.name)


def _reduces_at_least(buf, ratio: int) -> bool:
    if not isinstance(buf.data, ir.Reduction):
        return False
    n = _static_product(buf.data.reduction_ranges)
    return n is not None and n >= ratio


def _nbytes(buf) -> int | None:
    layout = getattr(buf, "layout", None)
    return layout.static_nbytes() if isinstance(layout, ir.Layout) else None


def _is_sibling(reads: set, sources: set, g: Group, where) -> bool:
    """g reads what buf reads, or what one kernel produced for both (e.g. the two second stages of
    split reductions over one first-stage kernel's partials). `sources`: ids of buf's producers."""
    theirs = _group_reads(g)
    return bool(reads & theirs) or any(id(where[r]) in sources for r in theirs if r in where)


def _group_reads(g: Group) -> set:
    out = set()
    for n in g.nodes:
        out |= set(n.reads())
    return out


def _place(steps, g: Group, buf, where) -> str:
    """Make sure every producer of `buf` outside g runs before g, moving g later if possible."""
    gpos = steps.index(g)
    outside = [where[r] for r in buf.reads() if r in where and where[r] is not g]
    if not outside:
        return ""
    last = max(steps.index(s) for s in outside)
    if last < gpos:
        return ""
    mine = g.names()
    for s in steps[gpos + 1:last + 1]:
        if _step_reads(s) & mine:
            return f"{_step_name(s)} between them reads the group's output"
    steps.remove(g)
    steps.insert(last, g)  # `last` shifted down by one after the removal: right after the producer
    return ""


def _step_reads(s) -> set:
    if isinstance(s, Group):
        return _group_reads(s)
    return set(s.reads())


def _step_name(s) -> str:
    return "+".join(n.name for n in s.nodes) if isinstance(s, Group) else s.name
