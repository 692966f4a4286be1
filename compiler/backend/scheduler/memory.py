"""Memory planning: when each buffer is allocated and released, and which dead buffer's storage
a new one reuses (same size, stride, dtype, device), including in-place reuse of a kernel's own
input when the kernel reads it only at the point it writes.

Buffers handed to a FallbackKernel never go back to the pool: the ATen op may return a view of
them, so their storage may still be alive after their last use in our graph.
"""

from __future__ import annotations

import dataclasses

import sympy

import logs
from compiler.backend import ir

log = logs.get_logger(__name__)


@dataclasses.dataclass
class Plan:
    allocs: dict     # step index -> [(buffer name, reused buffer name or None)] (kernel outputs)
    frees: dict      # step index -> [buffer names whose last use is this step]
    reused: int = 0
    inplace: int = 0


def _key(layout: ir.Layout):
    return (tuple(layout.size), tuple(layout.stride), layout.offset, layout.dtype, layout.device)


def _step_reads(s) -> list[str]:
    if isinstance(s, ir.KernelGroup):
        return list(s.inputs)
    return s.reads()


def plan(steps: list, graph, graph_outs: set) -> Plan:
    last_use: dict[str, int] = {}
    aliased: set = set()
    input_names = {n for n, v in graph.graph_inputs if isinstance(v, ir.InputBuffer)}
    for i, s in enumerate(steps):
        for r in _step_reads(s):
            last_use[r] = i
        if isinstance(s, ir.FallbackKernel):
            aliased |= set(s.reads())
    produced: dict[str, tuple] = {}   # name -> (step, layout, poolable)
    for i, s in enumerate(steps):
        if isinstance(s, ir.KernelGroup):
            for o in s.outputs:
                produced[o] = (i, s.layouts[o], True)
        elif isinstance(s, ir.ExternKernel) and not isinstance(s, ir.FallbackKernel) and s.layout is not None:
            produced[s.name] = (i, s.layout, True)
        elif isinstance(s, ir.Buffer):
            produced[s.name] = (i, s.layout, False)

    def poolable(name):
        return (name in produced and produced[name][2] and name not in aliased and name not in graph_outs
                and name not in input_names)

    allocs, frees = {}, {}
    pool: dict = {}
    reused = inplace = 0
    for i, s in enumerate(steps):
        if isinstance(s, ir.KernelGroup):
            entries = []
            taken = set()
            for o in s.outputs:
                key = _key(s.layouts[o])
                src = _scatter_target(s, o, i, last_use, poolable)
                if src is None:
                    src = _inplace_candidate(s, o, i, last_use, poolable, taken)
                if src is not None:
                    taken.add(src)
                    entries.append((o, src))
                    inplace += 1
                    log.debug("buffer_inplace", buffer=o, reuses=src, kernel=s.name)
                    continue
                if pool.get(key):
                    src = pool[key].pop()
                    entries.append((o, src))
                    reused += 1
                    log.debug("buffer_reused", buffer=o, reuses=src)
                else:
                    entries.append((o, None))
            allocs[i] = entries
        # graph inputs are dropped after their last use too (never pooled): under a boxed call
        # (CompiledGraph.call_boxed) the caller holds no reference, so e.g. a backward frees
        # each saved activation as soon as it has used it
        dead = [r for r in dict.fromkeys(_step_reads(s)) if last_use.get(r) == i and r not in graph_outs
                and (r in produced or r in input_names)]
        if isinstance(s, ir.KernelGroup):
            taken_now = {src for _, src in allocs[i] if src is not None}
            dead = [d for d in dead if d not in taken_now]
        frees[i] = dead
        for d in dead:
            if poolable(d):
                pool.setdefault(_key(produced[d][1]), []).append(d)
    return Plan(allocs, frees, reused, inplace)


def _inplace_candidate(group: ir.KernelGroup, out: str, step: int, last_use, poolable, taken):
    """An input of `group` that dies here, with out's layout, read only at out's store point."""
    if group.reduction_ranges:
        return None
    out_node = next(n for n in group.nodes if n.name == out)
    key = _key(group.layouts[out])
    xs = [ir.index_var("x", k) for k in range(len(group.ranges))]
    pos_out = group.nodes.index(out_node)
    store = out_node.store_index(xs)
    for name in group.inputs:
        if name in taken or last_use.get(name) != step or not poolable(name) or _key(group.layouts[name]) != key:
            continue
        ok = True
        for pos, n in enumerate(group.nodes):
            for rname, index in n.read_deps():
                if rname != name:
                    continue
                mapped = index.xreplace(dict(zip(n.data.index_vars(), xs)))
                if pos > pos_out or sympy.expand(mapped - store) != 0:
                    ok = False
        if ok:
            return name
    return None


def _scatter_target(group: ir.KernelGroup, out: str, step: int, last_use, poolable):
    """A ScatterBuffer is its target's storage, written in place (ir.ScatterBuffer): the target
    must die here. The lowering makes the target for this scatter alone, so anything else is a
    scheduler bug; running the graph eagerly beats a wrong result."""
    node = next(n for n in group.nodes if n.name == out)
    if not isinstance(node, ir.ScatterBuffer):
        return None
    t = node.target.name
    if t not in group.inputs or last_use.get(t) != step or not poolable(t):
        raise RuntimeError(f"scatter {out} cannot take the storage of {t} in place (still read later or "
                           f"not a temporary)")
    log.debug("buffer_inplace", buffer=out, reuses=t, kernel=group.name, why="scatter")
    return t
