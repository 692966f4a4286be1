"""Scheduling: dead-code elimination, fusion into kernels, memory planning.

`schedule(graph)` turns a GraphLowering into a Schedule: ordered steps (ir.KernelGroup for
generated kernels, ExternKernel / FallbackKernel / MultiOutput for ATen calls) plus the memory
plan the wrapper follows. See docs/CONTRACTS.md section 7 for what code generators receive.

Modules, in the order data flows through them:
    fusion  groups nodes into kernels, each decision an event with its reason
    memory  the memory plan: allocations, reuse, frees, in-place write-backs
    verify  checks the kernel groups' invariants (backend.verify_schedule; on in the tests)
"""

from __future__ import annotations

import dataclasses
import logging
import re

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.lowering.registry import uses_triton
from tracetorch.compiler.backend.scheduler import fusion, memory

log = logs.get_logger(__name__)
WRITEBACK_REASON = "input mutation write-back"     # lowering/graph.py's reason for those copy_ steps


@dataclasses.dataclass
class Schedule:
    steps: list
    graph: object
    plan: "memory.Plan"
    #: [(first step, count)]: copies and final passes moved together (_group_copies), which
    #: compile.py launches as one
    copy_runs: list = dataclasses.field(default_factory=list)

    def kernels(self) -> list:
        return [s for s in self.steps if isinstance(s, ir.KernelGroup)]

    def to_str(self) -> str:
        lines = []
        for i, s in enumerate(self.steps):
            if isinstance(s, ir.KernelGroup):
                lines.append(f"[{i}] kernel " + s.to_str())
            else:
                lines.append(f"[{i}] {type(s).__name__} {s.name}: {getattr(s, 'kernel', '')}"
                             + (f" (fallback: {s.reason})" if isinstance(s, ir.FallbackKernel) else ""))
            a = self.plan.allocs.get(i, [])
            if a:
                lines.append("      allocate: " + ", ".join(f"{n}" + (f" (reuses {r})" if r else "") for n, r in a))
            f = self.plan.frees.get(i, [])
            if f:
                lines.append("      free after: " + ", ".join(f))
        return "\n".join(lines)


def output_names(graph) -> list[str]:
    out = []
    for v in graph.outputs:
        if isinstance(v, ir.ReinterpretView):
            out.append(v.data.name)
        elif isinstance(v, ir.Buffer):
            out.append(v.name)
    return out


def dce(graph) -> list:
    """Buffers reachable from the outputs and side effects, in program order."""
    live = set(output_names(graph)) | set(graph.side_effects)
    keep = []
    for buf in reversed(graph.buffers):
        if buf.name in live or isinstance(buf, ir.FallbackKernel) and buf.name in graph.side_effects:
            keep.append(buf)
            live |= set(buf.reads())
            if isinstance(buf, ir.MultiOutput):
                live.add(buf.parent.name)
        else:
            log.debug("dead_buffer_removed", buffer=buf.name, origins=sorted(buf.origins))
    # a multi-output parent is live if any of its outputs is
    keep_names = {b.name for b in keep}
    result = [b for b in graph.buffers if b.name in keep_names or b.name in live]
    return result


def _kernel_name(k: int, nodes) -> str:
    names = []
    for n in nodes:
        for o in sorted(n.origins):
            base = re.sub(r"_\d+$", "", o)
            base = re.sub(r"\W", "_", base)
            if base not in names:
                names.append(base)
    return f"kernel{k}" + ("_" + "_".join(names[:4]) if names else "")


def schedule(graph) -> Schedule:
    buffers = dce(graph)
    logs.artifact("ir_pre_fusion", lambda: ir.format_ir(buffers), filename="ir_pre_fusion.txt")
    outs = set(output_names(graph)) | set(graph.side_effects)
    steps = _sink_writebacks(fusion.fuse(buffers, outs), graph)
    steps, copy_runs = _group_copies(steps, outs, graph)

    readers: dict[str, set] = {}
    for i, s in enumerate(steps):
        for r in (fusion._group_reads(s) if isinstance(s, fusion.Group) else set(s.reads())):
            readers.setdefault(r, set()).add(i)

    final = []
    k = 0
    for i, s in enumerate(steps):
        if not isinstance(s, fusion.Group):
            final.append(s)
            continue
        final.append(_finalize(graph, s, i, readers, outs, _kernel_name(k, s.nodes)))
        k += 1
    logs.artifact("ir_post_fusion", lambda: _post_fusion_text(final), filename="ir_post_fusion.txt")
    plan = memory.plan(final, graph, outs, together=copy_runs)
    sched = Schedule(final, graph, plan, copy_runs)
    if config.backend.verify_schedule:
        from tracetorch.compiler.backend.scheduler import verify
        verify.check(sched, outs)
    logs.artifact("schedule", sched.to_str, filename="schedule.txt")
    if log.is_enabled_for(logging.INFO):       # (the peak is a pass over the plan: only when wanted)
        log.info("scheduled", kernels=len(sched.kernels()), steps=len(final), buffers=len(buffers),
                 planned_peak_bytes=memory.planned_peak(final, plan, graph))
    return sched


def _sink_writebacks(steps, graph) -> list:
    """A write-back copy_ into a graph input runs after every step that reads the input's old
    value (the lowering emits them last; this keeps it true whatever fusion did)."""
    dst_of = {s.name: s.args[0].name for s in steps if isinstance(s, ir.FallbackKernel)
              and s.reason == WRITEBACK_REASON and isinstance(s.args[0], ir.Buffer)}
    out = list(steps)
    for name, dst in dst_of.items():
        pos = next((i for i, s in enumerate(out) if getattr(s, "name", None) == name), None)
        if pos is None:
            continue
        reads = [i for i, s in enumerate(out) if i > pos and dst in
                 (fusion._group_reads(s) if isinstance(s, fusion.Group) else set(s.reads()))]
        if reads:
            step = out.pop(pos)
            out.insert(reads[-1], step)     # reads[-1] shifted down by one: right after it
            log.debug("writeback_moved", step=name, input=dst, after=len(reads), reason="read later")
    return out


#: a copy whose source is larger than this stays where it is: moved, its source or its result
#: lives longer (and one launch saved matters for small tensors only)
GROUP_MAX_SOURCE_BYTES = 16 << 20


def _group_copies(steps, outs, graph) -> tuple[list, list]:
    """(steps, [(first, n), ...]): pointwise kernels that only copy one tensor into a graph
    output, moved together so that compile.py launches each group as one kernel (Triton only:
    the C++ code generator has no combined launches; groups of two or more):

    * copies of a graph input (a training forward's spatial filters, converted to channels_last
      and saved for the backward: backend/conv_layout.py) go to the start: they read only inputs,
      and their results live until the backward anyway;
    * copies of an ATen call's result (a channels_last filter gradient given its parameter's
      strides: ResNet-50's backward has one after each 3x3 or 7x7 filter's gradient) and small
      kernels whose results only leave the graph (the second passes of split reductions:
      _final_pass_bytes) go to the end, before the trailing steps with side effects (input
      write-backs)."""
    extern = {s.name: s for s in steps if isinstance(s, (ir.ExternKernel, ir.MultiOutput))}
    inputs = {name: b for name, b in graph.name_to_buffer.items() if isinstance(b, ir.InputBuffer)}
    readers: dict[str, set] = {}
    for i, s in enumerate(steps):
        for r in fusion._group_reads(s) if isinstance(s, fusion.Group) else set(s.reads()):
            readers.setdefault(r, set()).add(i)
    hoisted, sunk = [], []
    kept_bytes = 0
    for i, s in enumerate(steps):
        src = _copy_source(s, outs)
        if src in inputs and _small(inputs[src]):
            hoisted.append(i)
        elif src in extern and s.nodes[0].name not in readers and _small(extern[src]):
            sunk.append(i)
        elif (held := _final_pass_bytes(s, i, outs, readers, graph)) is not None \
                and kept_bytes + held <= SINK_MAX_HELD_BYTES:
            kept_bytes += held
            sunk.append(i)
    hoisted = hoisted if len(hoisted) >= 2 else []
    sunk = sunk if len(sunk) >= 2 else []
    if not hoisted and not sunk:
        return steps, []
    moved = set(hoisted) | set(sunk)
    end = len(steps)
    while sunk and end > sunk[-1] + 1 and getattr(steps[end - 1], "name", None) in graph.side_effects:
        end -= 1
    rest = [s for i, s in enumerate(steps[:end]) if i not in moved]
    log.debug("copies_grouped", at_start=len(hoisted), at_end=len(sunk),
              reason="copies and final passes into graph outputs moved together to share one "
                     "launch per group")
    out = [steps[i] for i in hoisted] + rest + [steps[i] for i in sunk] + steps[end:]
    runs = [(0, len(hoisted))] if hoisted else []
    if sunk:
        runs.append((len(hoisted) + len(rest), len(sunk)))
    return out, runs


#: the second pass of a split reduction (or any small kernel whose results only leave the
#: graph) moves to the end when each buffer it reads is at most this large, and while all that
#: such moves keep alive longer stays under SINK_MAX_HELD_BYTES
SINK_MAX_INPUT_BYTES = 4 << 20
SINK_MAX_HELD_BYTES = 64 << 20


def _final_pass_bytes(step, index, outs, readers, graph) -> int | None:
    """The bytes a Triton kernel step reads when it may move to the end of the graph to share a
    launch with others like it, else None. It may when every value it computes is a graph output
    or stays inside it (nothing later reads it), and it reads only small intermediate buffers:
    the second passes of split reductions (a training backward's bias and norm weight gradients:
    72 of GPT-2's launches), whose partial sums are a few hundred kilobytes. Graph inputs are
    not moved past (a backward frees its saved tensors as it goes; a write-back may change one)."""
    if not isinstance(step, fusion.Group) or step.closed or not uses_triton(step.device):
        return None
    names = step.names()
    if not names & outs or any(readers.get(n, {index}) != {index} for n in names):
        return None
    total = 0
    for r in fusion._group_reads(step) - names:
        buf = graph.name_to_buffer.get(r)
        nbytes = buf.layout.static_nbytes() if buf is not None else None
        if buf is None or isinstance(buf, ir.InputBuffer) or nbytes is None or nbytes > SINK_MAX_INPUT_BYTES:
            return None
        total += nbytes
    return total


def _copy_source(step, outs):
    """The one buffer a single-node pointwise Triton kernel stores into a graph output reads."""
    if not isinstance(step, fusion.Group) or step.rranges or len(step.nodes) != 1 or not uses_triton(step.device):
        return None
    node = step.nodes[0]
    reads = set(node.reads())
    if node.name not in outs or len(reads) != 1:
        return None
    return next(iter(reads))


def _small(buf) -> bool:
    nbytes = buf.layout.static_nbytes()
    return nbytes is not None and nbytes <= GROUP_MAX_SOURCE_BYTES


def _finalize(graph, g, step_index, readers, graph_outs, name) -> ir.KernelGroup:
    members = g.names()
    outputs, internal = [], []
    # The C++ code generator reads a reduction kernel's inner values back from their buffers
    # after the reduction loop; Triton kernels keep them in registers (persistent) or recompute
    # them in the next loop, so there an inner value nobody else reads is not stored (GPT-2's
    # masked attention scores: 50 MB per layer written and never read)
    stores_inner = bool(g.rranges) and not uses_triton(g.device)
    for n in g.nodes:
        outside = any(j != step_index for j in readers.get(n.name, ()))
        if outside or n.name in graph_outs or (stores_inner and g.kinds[n.name] == ir.NODE_INNER):
            outputs.append(n.name)
        else:
            internal.append(n.name)
    inputs = []
    for n in g.nodes:
        for r in n.reads():
            if r not in members and r not in inputs:
                inputs.append(r)
    layouts = {}
    for nm in inputs:
        layouts[nm] = graph.name_to_buffer[nm].layout
    for n in g.nodes:
        layouts[n.name] = n.layout
    syms = set()
    for n in g.nodes:
        syms |= n.size_symbols()
    for r in list(g.ranges) + list(g.rranges):
        syms |= r.free_symbols
    provenance = []
    for n in g.nodes:
        for o in sorted(n.origins):
            if all(o != p[0] for p in provenance):
                provenance.append((o, graph.provenance.get(o, "")))
    return ir.KernelGroup(name=name, nodes=list(g.nodes), ranges=list(g.ranges), reduction_ranges=list(g.rranges),
                          kinds=dict(g.kinds), inputs=inputs, outputs=outputs, internal=internal,
                          size_symbols=sorted(syms, key=lambda s: s.name), layouts=layouts,
                          provenance=provenance)


def _post_fusion_text(steps) -> str:
    parts = []
    for s in steps:
        if isinstance(s, ir.KernelGroup):
            parts.append(s.to_str() + "\n" + "\n".join(ir._indent(n.to_str()) for n in s.nodes))
        else:
            parts.append(s.to_str())
    return "\n\n".join(parts)


__all__ = ["schedule", "Schedule", "dce", "output_names"]
