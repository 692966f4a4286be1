"""compiler.explain(fn)(*args, **kwargs): what the frontend did with one call, as a report.

The call runs through the normal machinery (so resume functions and callees compile as they
would) under a private set of caches with the "eager" backend, and a listener collects every
compile of every frame it touched: graphs, graph breaks (reason + user file:line), guards and
recompile reasons. `str(report)` reads like torch._dynamo.explain's ExplainOutput.
"""
from __future__ import annotations

import dataclasses
import time

import torch
from tracetorch.compiler import hooks
from tracetorch.compiler.frontend.eval_frame import CompileOptions
from tracetorch.compiler.frontend.guards import describe

from tracetorch import logs

log = logs.get_logger(__name__)


@dataclasses.dataclass
class BreakReason:
    reason: str
    filename: str | None
    lineno: int | None
    source_line: str | None = None
    instruction: str | None = None
    user_stack: list = dataclasses.field(default_factory=list)

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.lineno}" if self.filename else "<unknown location>"

    def __str__(self):
        return f"{self.reason} at {self.location}"


@dataclasses.dataclass
class ExplainReport:
    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list[BreakReason]
    op_count: int
    ops_per_graph: list[list]
    guards: list
    recompiles: list[str]
    compile_times: dict
    compile_ids: list[str]

    @property
    def out_guards(self):          # Dynamo's name
        return self.guards

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            for i, b in enumerate(self.break_reasons, 1):
                lines.append(f"  Break Reason {i}:")
                lines.append(f"    Reason: {b.reason}")
                lines.append("    User Stack:")
                stack = b.user_stack or [(b.filename, b.lineno, b.source_line)]
                for frame in stack:
                    lines.append(f"      {_frame_text(frame)}")
        if self.ops_per_graph:
            lines.append("Ops per Graph:")
            for i, ops in enumerate(self.ops_per_graph, 1):
                lines.append(f"  Ops {i}:")
                lines += [f"    {_op_name(op)}" for op in ops]
        if self.recompiles:
            lines.append("Recompiles:")
            lines += [f"  {r}" for r in self.recompiles]
        if self.guards:
            lines.append("Out Guards:")
            for g in self.guards:
                loc = f"  # {g.user_location}" if g.user_location else ""
                lines.append(f"  {describe(g)}{loc}")
        lines.append("Compile Times: " + ", ".join(f"{k}: {v:.4f}s" for k, v in self.compile_times.items()))
        return "\n".join(lines)


def _op_name(target) -> str:
    """torch.relu / torch.nn.functional.gelu / operator.add / Tensor.sin, not <built-in ...>."""
    import operator

    import torch.nn.functional as F
    if isinstance(target, str):
        return f"Tensor.{target}"
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    name = getattr(target, "__name__", None)
    if name is None:
        return str(target)
    for prefix, namespace in (("torch", torch), ("torch.nn.functional", F), ("operator", operator)):
        if getattr(namespace, name, None) is target:
            return f"{prefix}.{name}"
    module = getattr(target, "__module__", None)
    return f"{module}.{getattr(target, '__qualname__', name)}" if module else name


def _frame_text(frame) -> str:
    if isinstance(frame, str):
        return frame
    if isinstance(frame, dict):
        return f"{frame.get('filename')}:{frame.get('line', frame.get('lineno'))} {frame.get('loc', '')}".rstrip()
    if isinstance(frame, (tuple, list)):
        filename, lineno = frame[0], frame[1]
        src = frame[2] if len(frame) > 2 and frame[2] else ""
        return f"{filename}:{lineno} {src.strip() if isinstance(src, str) else ''}".rstrip()
    return str(frame)


class _Collector:
    def __init__(self):
        self.entries = []          # (cache, entry) in compile order
        self.recompiles = []

    def on_compile(self, cache, entry):
        self.entries.append((cache, entry))

    def on_recompile(self, cache, reasons):
        for cid, rs in reasons:
            if rs:
                self.recompiles.append(f"{cache.name} ({cache.location}) - {cid}: {rs[0]}")


def _to_break_reason(b) -> BreakReason:
    if isinstance(b, BreakReason):
        return b
    get = (lambda k: b.get(k)) if isinstance(b, dict) else (lambda k: getattr(b, k, None))
    return BreakReason(str(get("reason")), get("filename"), get("lineno"), get("source_line"),
                       None if get("instruction") is None else str(get("instruction")),
                       list(get("user_stack") or []))


def _ops(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def explain(fn, *extra_args, **extra_kwargs):
    """Returns `inner(*args, **kwargs) -> ExplainReport`; extra args are prepended (Dynamo's API)."""
    from tracetorch.compiler.api import CompiledModule, InvalidUsageError
    if not callable(fn):
        raise InvalidUsageError(f"compiler.explain expects a function or nn.Module, got "
                                f"{type(fn).__name__}: it is not callable")

    def inner(*args, **kwargs):
        collector = _Collector()
        from tracetorch.compiler.backends import eager
        opts = CompileOptions(backend=eager, backend_name="eager", listeners=[collector])
        if isinstance(fn, torch.nn.Module):
            target = CompiledModule(fn, opts)
        else:
            from tracetorch.compiler.api import _compile_with
            target = _compile_with(fn, opts=opts, backend="eager")
        t0 = time.perf_counter()
        target(*extra_args, *args, **{**extra_kwargs, **kwargs})
        total = time.perf_counter() - t0
        graphs, breaks, guards, ids = [], [], [], []
        for cache, entry in collector.entries:
            graphs += entry.graphs
            breaks += [_to_break_reason(b) for b in entry.graph_breaks]
            guards += entry.guards
            ids.append(str(entry.compile_id))
        ops = [_ops(g) for g in graphs]
        report = ExplainReport(graphs=graphs, graph_count=len(graphs),
                               graph_break_count=len(breaks), break_reasons=breaks,
                               op_count=sum(len(o) for o in ops), ops_per_graph=ops,
                               guards=guards, recompiles=collector.recompiles,
                               compile_times={"total (compile + run)": total}, compile_ids=ids)
        hooks.report_explain(report)
        log.debug("explain_done", graphs=report.graph_count, graph_breaks=report.graph_break_count)
        return report

    return inner
