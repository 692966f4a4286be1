"""Every log name TRACE_LOGS accepts: components, aliases and artifacts (DESIGN section 4).

Names and meanings follow TORCH_LOGS so habits carry over. A component is a hierarchical
logger with a level; an artifact is a named kind of output that is simply on or off.
`off_by_default` artifacts are not shown when their component is at DEBUG: they must be
named. `visible` artifacts are listed by `TRACE_LOGS=help` (all are listed by `+help`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Component:
    name: str
    description: str
    modules: tuple[str, ...]          # module prefixes whose loggers belong to it


@dataclass(frozen=True)
class Artifact:
    name: str
    description: str
    component: str                    # component whose DEBUG level shows it (if not off_by_default)
    visible: bool = True
    off_by_default: bool = False


COMPONENTS: dict[str, Component] = {c.name: c for c in [
    Component("frontend", "bytecode capture: graph breaks, guards, cache, recompiles",
              ("compiler.frontend", "compiler.api", "compiler.backends", "compiler")),
    Component("aot", "ahead-of-time autograd: functionalize, decompose, joint graph, partition",
              ("compiler.aot", "compiler.optim")),
    Component("backend", "lowering, loop IR, scheduling and fusion, Triton/C++ codegen, runtime",
              ("compiler.backend",)),
    Component("dynamic", "symbolic shapes: dynamic dimensions, size guards, specialisation",
              ("compiler.frontend.dynamic",)),
    Component("cache", "compiled-code cache: hits, misses, keys",
              ("compiler.backend.cache", "compiler.frontend.cache")),
    Component("minifier", "repro scripts and the graph minifier",
              ("debug.minifier", "debug.repro")),
]}

ALIASES: dict[str, str] = {"dynamo": "frontend", "inductor": "backend"}


def _a(name, description, component, visible=True, off=False):
    return Artifact(name, description, component, visible, off)


ARTIFACTS: dict[str, Artifact] = {a.name: a for a in [
    _a("bytecode", "original and transformed bytecode of each compiled frame", "frontend", off=True),
    _a("graph", "the captured FX graph, as a table of nodes", "frontend"),
    _a("graph_code", "the captured FX graph as Python code", "frontend"),
    _a("graph_sizes", "the sizes of every node of the captured FX graph", "frontend"),
    _a("graph_breaks", "every graph break, with its reason and user stack", "frontend"),
    _a("guards", "the guards installed for each compiled frame", "frontend"),
    _a("verbose_guards", "the guards with the source that created each one", "frontend", off=True),
    _a("recompiles", "why a frame recompiled: the guard that failed", "frontend"),
    _a("recompiles_verbose", "every failing guard of every cache entry on a recompile",
       "frontend", off=True),
    _a("trace_source", "each source line as the frontend traces it", "frontend", visible=False),
    _a("trace_bytecode", "each instruction as the frontend traces it, with its stack",
       "frontend", visible=False),
    _a("side_effects", "mutations replayed after the graph (attributes, globals, cells)", "frontend"),
    _a("aot_graphs", "forward, backward and inference graphs after AOT partitioning", "aot"),
    _a("aot_joint_graph", "the joint forward+backward graph before partitioning", "aot"),
    _a("ir_pre_fusion", "the backend's loop IR before fusion", "backend", off=True),
    _a("ir_post_fusion", "the backend's loop IR after fusion", "backend", off=True),
    _a("schedule", "the scheduler's node order and buffers", "backend", off=True),
    _a("fusion", "every fusion decision: which nodes, fused or not, and why", "backend", off=True),
    _a("output_code", "the generated wrapper and kernels of each graph", "backend", off=True),
    _a("kernel_code", "each generated kernel with its provenance", "backend", off=True),
    _a("perf_hints", "places where generated code is likely slow (e.g. ATen fallbacks)", "backend"),
    _a("autotuning", "autotuning candidates, timings and the winner", "backend"),
    _a("compile_metrics", "per compile id: times per stage, graph sizes, outcome", "frontend"),
]}

# Records that only travel in the structured trace and to sinks (DESIGN section 5).
# They are not TRACE_LOGS names: a console user names the artifact on the right instead,
# which the emitting code logs as readable text.
TRACE_ONLY: dict[str, str] = {
    "graph_break": "graph_breaks",
    "guard_failure": "recompiles_verbose",
    "recompile": "recompiles",
    "fusion_decision": "fusion",
    "kernel": "kernel_code",
    "perf_hint": "perf_hints",
}

# One record per traced instruction / source line: far too many for "everything" (an open
# trace, a debug folder); they are produced only when named (TRACE_LOGS=+trace_bytecode).
CHATTY = frozenset({"trace_source", "trace_bytecode"})

# Our packages: a dotted name under one of these is a module of ours (TRACE_LOGS=+compiler.x).
# They are installed as subpackages of NAMESPACE (tracetorch.compiler, ...); log names drop that
# prefix so a logger reads [compiler.backend.scheduler], and TRACE_LOGS takes either spelling.
NAMESPACE = "tracetorch"
OWN_PACKAGES = ("compiler", "logs", "debug", "tui")


def own_module_name(module: str) -> str:
    """'tracetorch.compiler.backend' -> 'compiler.backend'; any other name unchanged."""
    prefix = NAMESPACE + "."
    if module.startswith(prefix) and module[len(prefix):].split(".")[0] in OWN_PACKAGES:
        return module[len(prefix):]
    return module


def canonical_component(name: str) -> str | None:
    """'dynamo' -> 'frontend'; None if `name` is not a component or alias."""
    name = ALIASES.get(name, name)
    return name if name in COMPONENTS else None


def component_for_module(module: str) -> str:
    """The component owning a module name: the longest matching module prefix wins."""
    best, best_len = "frontend", -1
    for comp in COMPONENTS.values():
        for prefix in comp.modules:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = comp.name, len(prefix)
    if best_len < 0 and module.split(".")[0] == "debug":
        return "minifier"
    return best


def all_names() -> list[str]:
    """Every name TRACE_LOGS accepts (for error messages and suggestions)."""
    return sorted([*COMPONENTS, *ALIASES, *ARTIFACTS, "all"])
