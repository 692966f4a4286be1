"""Memory planning: when each buffer is allocated and released, and which dead buffer's storage
a new one reuses (same size, stride, dtype, device), including in-place reuse of a kernel's own
input when the kernel reads it only at the point it writes.

Input mutations (the aot stage's `copy_(input, new_value)` write-backs) are done in place where
that is safe: the kernel that computes the new value stores it straight into the input's memory,
and the write-back copy becomes a no-op. Safe means: nothing reads the input after that kernel,
the kernel reads it only at the element it writes (and before writing it), the layouts match,
and the new value is not also a graph output (the output would alias the input, unlike eager).

Buffers handed to a FallbackKernel never go back to the pool: the ATen op may return a view of
them, so their storage may still be alive after their last use in our graph.
"""

from __future__ import annotations

import dataclasses

import sympy

from tracetorch import logs
from tracetorch.compiler.backend import ir

log = logs.get_logger(__name__)


@dataclasses.dataclass
class Plan:
    allocs: dict     # step index -> [(buffer name, reused buffer name or None)] (kernel outputs)
    frees: dict      # step index -> [buffer names whose last use is this step]
    reused: int = 0
    inplace: int = 0
    #: write-back steps (aten.copy_ into a mutated input) made no-ops by an in-place store
    inplace_writebacks: dict = dataclasses.field(default_factory=dict)   # step -> kernel name


def _key(layout: ir.Layout):
    return (tuple(layout.size), tuple(layout.stride), layout.offset, layout.dtype, layout.device)


def _step_reads(s) -> list[str]:
    if isinstance(s, ir.KernelGroup):
        return list(s.inputs)
    return s.reads()


def _last_uses(steps, skip=()) -> dict[str, int]:
    last_use: dict[str, int] = {}
    for i, s in enumerate(steps):
        if getattr(s, "name", None) in skip:
            continue
        for r in _step_reads(s):
            last_use[r] = i
    return last_use


def plan(steps: list, graph, graph_outs: set, together=()) -> Plan:
    """`together`: (first step, count) runs that will share one launch (Schedule.copy_runs): a
    buffer last read inside a run is freed after the run, so no output of the run takes its
    storage while another part still reads it."""
    aliased: set = set()
    input_buffers = {n: v for n, v in graph.graph_inputs if isinstance(v, ir.InputBuffer)}
    input_names = set(input_buffers)
    for s in steps:
        if isinstance(s, ir.FallbackKernel):
            aliased |= set(s.reads())
    writebacks = _writebacks_in_place(steps, graph, graph_outs, input_buffers)
    last_use = _last_uses(steps, skip={w.step for w in writebacks.values()})
    run_end = {j: first + count - 1 for first, count in together for j in range(first, first + count)}
    last_use = {r: run_end.get(i, i) for r, i in last_use.items()}
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
    done_writebacks: dict = {}      # write-back step -> the kernel that stores it in place
    pool: dict = {}
    reused = inplace = 0
    for i, s in enumerate(steps):
        if isinstance(s, ir.KernelGroup):
            entries = []
            taken = set()
            for o in s.outputs:
                key = _key(s.layouts[o])
                wb = writebacks.get(o)
                if wb is not None:
                    taken.add(wb.dst)
                    entries.append((o, wb.dst))
                    done_writebacks[wb.step] = s.name
                    inplace += 1
                    log.debug("writeback_in_place", buffer=o, input=wb.dst, kernel=s.name, copy=wb.step)
                    continue
                src = _scatter_target(s, o, i, last_use, poolable)
                if src is None:
                    src = _inplace_candidate(s, o, i, last_use, poolable, taken, graph_outs)
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
        reads = _step_reads(s)
        if run_end.get(i) == i:           # a run's last step: what its parts read dies here
            reads = [r for j, e in run_end.items() if e == i for r in _step_reads(steps[j])]
        dead = [r for r in dict.fromkeys(reads) if last_use.get(r) == i and r not in graph_outs
                and (r in produced or r in input_names)]
        if isinstance(s, ir.KernelGroup):
            taken_now = {src for _, src in allocs[i] if src is not None}
            dead = [d for d in dead if d not in taken_now]
        frees[i] = dead
        for d in dead:
            if poolable(d):
                pool.setdefault(_key(produced[d][1]), []).append(d)
    return Plan(allocs, frees, reused, inplace, done_writebacks)


def planned_peak(steps: list, plan: Plan, graph) -> int | None:
    """Bytes alive at the fullest step of the plan: the graph's inputs until their last use, each
    kernel output from its step (one reusing a buffer's storage adds nothing), each extern result
    from its step, freed as the plan frees them. An estimate (a view an extern returns counts as
    new memory); None where a size is symbolic."""
    sizes: dict = {}
    for name, v in graph.graph_inputs:
        if isinstance(v, ir.InputBuffer):
            sizes[name] = v.layout.static_nbytes()
    live = sum(b for b in sizes.values() if b is not None)
    if any(b is None for b in sizes.values()):
        return None
    reused_at = {src: j for j, entries in plan.allocs.items() for _, src in entries if src is not None}
    peak = live
    for i, s in enumerate(steps):
        made, layouts = [], []
        if isinstance(s, ir.KernelGroup):
            for n, src in plan.allocs.get(i, []):
                if src is None:
                    made.append(n)
                    layouts.append(s.layouts[n])
                else:                 # the storage of `src` (freed earlier or here), no new bytes
                    sizes[n] = sizes.pop(src, 0)
        elif isinstance(getattr(s, "layout", None), ir.Layout):
            made, layouts = [s.name], [s.layout]
        for n, lay in zip(made, layouts):
            b = lay.static_nbytes()
            if b is None:
                return None
            sizes[n] = b
            live += b
        peak = max(peak, live)
        for n in plan.frees.get(i, []):
            if reused_at.get(n, -1) > i:
                continue              # kept for a later output: the wrapper does not drop it
            live -= sizes.pop(n, 0) or 0
    return peak


def _writebacks_in_place(steps, graph, graph_outs, input_buffers) -> dict:
    """src buffer -> Writeback, for each input mutation whose new value's kernel may store it
    straight into the input (see the module docstring for the conditions)."""
    pending = {w.src: w for w in getattr(graph, "writebacks", ())}
    if not pending:
        return {}
    last_use = _last_uses(steps, skip={w.step for w in pending.values()})
    chosen: dict = {}
    for i, s in enumerate(steps):
        # Reduction kernels qualify too: a batch norm's running statistics are stored by the
        # epilogue of the kernel that reduces the batch's statistics, one element per output
        # row, after the row's loops. A read inside the loops (index over reduction variables)
        # never matches the store's index, so such a kernel keeps the copy.
        if not isinstance(s, ir.KernelGroup):
            continue
        for o in s.outputs:
            w = pending.get(o)
            if w is None or o in graph_outs or w.dst in graph_outs or last_use.get(w.dst, -1) > i:
                continue
            if isinstance(next(n for n in s.nodes if n.name == o), ir.ScatterBuffer):
                continue      # a scatter writes into its own target's storage (_scatter_target)
            dst = input_buffers.get(w.dst)
            if dst is None or _key(dst.layout) != _key(s.layouts[o]):
                continue
            if w.dst in s.inputs and not _reads_only_at_store(s, o, w.dst):
                continue
            chosen[o] = w
    return chosen


def _reads_only_at_store(group: ir.KernelGroup, out: str, name: str) -> bool:
    """Does `group` read buffer `name` only at the element where it stores `out`, and never after
    that store (a later node of the kernel would see the new value)?

    In a reduction kernel only per-row (outer) nodes may read it: the code generators emit those
    in the nodes' order, while a loop's inner nodes may run after an outer node that comes later
    in the list (an outer node that reads nothing of the open loop is emitted before it)."""
    if group.reduction_ranges and group.kinds[out] == ir.NODE_INNER:
        return False                  # stored inside a loop: some element may be read after it
    out_node = next(n for n in group.nodes if n.name == out)
    xs = [ir.index_var("x", k) for k in range(len(group.ranges))]
    pos_out = group.nodes.index(out_node)
    store = out_node.store_index(xs)
    for pos, n in enumerate(group.nodes):
        for rname, index in n.read_deps():
            if rname != name:
                continue
            if group.reduction_ranges and group.kinds[n.name] != ir.NODE_OUTER:
                return False
            mapped = index.xreplace(dict(zip(n.data.index_vars(), xs)))
            if pos > pos_out or sympy.expand(mapped - store) != 0:
                return False
    return True


def _inplace_candidate(group: ir.KernelGroup, out: str, step: int, last_use, poolable, taken, graph_outs=()):
    """An input of `group` that dies here, whose storage can hold out, read only at out's store
    point. The same layout, or (out not a graph output) another dense layout of as many elements:
    a matmul's [tokens, width] result whose elementwise consumer writes [batch, seq, width] (the
    wrapper makes out a view of that storage in out's sizes and strides)."""
    if group.reduction_ranges:
        return None
    key = _key(group.layouts[out])
    for name in group.inputs:
        if name in taken or last_use.get(name) != step or not poolable(name):
            continue
        if _key(group.layouts[name]) != key and (out in graph_outs or not same_storage(group.layouts[name],
                                                                                       group.layouts[out])):
            continue
        if _reads_only_at_store(group, out, name):
            return name
    return None


def same_storage(a: ir.Layout, b: ir.Layout) -> bool:
    """Do two dense layouts (no gaps, no overlaps, offset 0) cover the same elements of one
    dtype and device? (Which element goes where is the caller's check: _reads_only_at_store.)"""
    return (a.dtype == b.dtype and a.device == b.device and a.offset == 0 and b.offset == 0
            and sympy.expand(a.numel() - b.numel()) == 0
            and ir.dense_order(a.size, a.stride) is not None and ir.dense_order(b.size, b.stride) is not None)


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
