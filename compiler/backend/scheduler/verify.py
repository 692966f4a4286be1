"""The schedule verifier: checks, after scheduling, the invariants that fusion promises to keep
"by construction" (docs/CONTRACTS.md, "What the scheduler hands to codegen"), so that a fusion
bug is a clear error naming the kernel and the broken rule instead of a wrong number.

On with the config option `backend.verify_schedule` (TRACE_BACKEND_VERIFY_SCHEDULE=1); the test
suite turns it on for every graph it compiles. Rules, per kernel group:

  kinds      every node has a kind, and the node's loops fit the group's loops as that kind
  buffers    outputs and internal buffers are exactly the nodes; inputs are produced elsewhere
  order      a buffer produced in the group is read only by nodes after its producer
  same point every such read loads the element stored at the same iteration point, never
             through an indirect index, and an outer node never reads an inner node's row
  internal   an internal buffer is read by no other step and is no graph output
  layouts    every buffer the kernel touches has a layout; ranges' symbols are size arguments
and across the schedule: no step reads a buffer that only a later step produces.
"""
from __future__ import annotations

from tracetorch import logs
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.scheduler import fusion

log = logs.get_logger(__name__)


class ScheduleError(AssertionError):
    """A schedule broke an invariant code generators rely on (a scheduler bug)."""


def _step_reads(step) -> set:
    if isinstance(step, ir.KernelGroup):
        return set(step.inputs)
    return set(step.reads()) if hasattr(step, "reads") else set()


def _step_produces(step) -> set:
    if isinstance(step, ir.KernelGroup):
        return set(step.node_names())
    name = getattr(step, "name", None)
    return {name} if name else set()


def check_group(g: ir.KernelGroup) -> list[str]:
    """The broken rules of one kernel group, as readable sentences."""
    problems = []
    names = g.node_names()
    produced = set(names)
    if set(g.kinds) != produced:
        problems.append(f"kinds name {sorted(set(g.kinds) ^ produced)} that are not exactly its nodes")
    for node in g.nodes:
        kind = g.kinds.get(node.name)
        if kind not in (ir.NODE_OUTER, ir.NODE_INNER, ir.NODE_REDUCTION):
            problems.append(f"{node.name} has kind {kind!r}")
            continue
        fits = fusion.node_kind_in(g.ranges, g.reduction_ranges, node)
        if fits != kind:
            problems.append(f"{node.name} runs as {kind!r} but its loops {node.data.ranges} fit the group "
                            f"{g.ranges} x {g.reduction_ranges} as {fits!r}")
    outputs, internal = set(g.outputs), set(g.internal)
    if outputs & internal:
        problems.append(f"{sorted(outputs & internal)} are both outputs and internal")
    if outputs | internal != produced:
        problems.append(f"outputs + internal {sorted(outputs | internal)} are not the nodes {sorted(produced)}")
    if set(g.inputs) & produced:
        problems.append(f"inputs {sorted(set(g.inputs) & produced)} are produced inside the kernel")
    plan = (g.ranges, g.reduction_ranges, g.kinds)
    for i, node in enumerate(g.nodes):
        before = {n.name for n in g.nodes[:i]}
        for name in node.reads():
            if name in produced and name not in before:
                problems.append(f"{node.name} reads {name} before (or without) its producer in the kernel")
            elif name not in produced and name not in g.inputs:
                problems.append(f"{node.name} reads {name}, which is neither produced here nor an input")
        why = fusion.check_deps(g.nodes[:i], node, plan)
        if why:
            problems.append(why)
    touched = set(g.inputs) | produced
    if missing := sorted(touched - set(g.layouts)):
        problems.append(f"no layout for {missing}")
    symbols = set().union(*(r.free_symbols for r in [*g.ranges, *g.reduction_ranges])) if (
        g.ranges or g.reduction_ranges) else set()
    if missing := sorted(map(str, symbols - set(g.size_symbols))):
        problems.append(f"range symbols {missing} are not size arguments")
    return problems


def check(schedule, graph_outputs=()) -> None:
    """Raise ScheduleError listing every broken rule of the schedule (nothing if it is sound)."""
    problems = []
    steps = schedule.steps
    produced_at = {}
    for i, step in enumerate(steps):
        for name in _step_produces(step):
            produced_at.setdefault(name, i)
    outs = set(graph_outputs)
    for i, step in enumerate(steps):
        label = getattr(step, "name", type(step).__name__)
        for name in _step_reads(step):
            if produced_at.get(name, -1) > i:
                problems.append(f"{label}: reads {name}, produced only later by step {produced_at[name]}")
        if not isinstance(step, ir.KernelGroup):
            continue
        problems += [f"{label}: {p}" for p in check_group(step)]
        for name in step.internal:
            readers = [j for j, s in enumerate(steps) if j != i and name in _step_reads(s)]
            if readers or name in outs:
                problems.append(f"{label}: internal buffer {name} is read outside the kernel "
                                f"({'a graph output' if name in outs else f'steps {readers}'})")
    log.debug("schedule_verified", steps=len(steps), kernels=len(schedule.kernels()),
              problems=len(problems))
    if problems:
        raise ScheduleError("the schedule breaks its invariants:\n  " + "\n  ".join(problems))
