"""The inner compiler: post-aot FX graph -> IR -> schedule -> kernels + wrapper -> a callable.

`compile_graph(gm, example_inputs)` follows the backend contract on the aot graph (flat tensor
outputs). Whatever cannot be compiled (a graph-level limitation, a code generator refusing a
kernel) makes the graph run eagerly, with the reason logged: never an error, never wrong.
"""

from __future__ import annotations

import time

import sympy
import torch

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.aot.inference import shape_env_of
from tracetorch.compiler.backend import cache, ir
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported
from tracetorch.compiler.backend.lowering import GraphFallback, lower_graph
from tracetorch.compiler.backend.scheduler import schedule

log = logs.get_logger(__name__)


class CompiledGraph:
    """Callable running the generated `call(args)`; keeps the output code for inspection."""

    def __init__(self, call, code: str, path: str, key: str, n_kernels: int | None = None):
        self._call = call
        self.code = code
        self.path = path
        self.key = key
        self.n_kernels = n_kernels

    def __call__(self, *args):
        return self._call(list(args))

    def call_boxed(self, args: list):
        """Hands `args` over: the output code clears it and drops each input after its last
        use, so inputs the caller no longer references (a backward's saved values) are freed
        as the graph runs."""
        return self._call(args)


class EagerGraph:
    """Fallback: run the (aot) graph as is, with the reason kept for inspection."""

    def __init__(self, gm, reason: str):
        self.gm = gm
        self.reason = reason
        self.code = None

    def __call__(self, *args):
        return self.gm(*args)


def pick_codegen(device: torch.device):
    """C++ for CPU tensors (or Triton when backend.cpu_codegen == 'triton'), Triton for CUDA."""
    if device is None or device.type == "cpu":
        if config.backend.cpu_codegen == "triton":
            return _triton("backend.cpu_codegen is 'triton'")
        from tracetorch.compiler.backend.codegen.cpp import CppCodegen
        return CppCodegen()
    if device.type == "cuda":
        return _triton("CUDA tensors")
    raise CodegenUnsupported(f"no code generator for device {device}")


def _triton(why):
    try:
        from tracetorch.compiler.backend.codegen.triton import TritonCodegen
    except ImportError as e:
        raise CodegenUnsupported(f"{why} need the Triton code generator, which is not available: {e}")
    return TritonCodegen()


def _exec(code: str, path: str, gm):
    from tracetorch.compiler.backend.lowering.graph import graph_constants
    ns = {"__name__": "tracetorch_output_code", "__file__": path}
    exec(compile(code, path, "exec"), ns)
    ns["constants"].update(graph_constants(gm))
    _precompile(ns)
    return ns["call"]


def _precompile(ns: dict) -> None:
    """Send every Triton kernel of the loaded output code to the compile worker pool, so that
    they compile in parallel before their first launch (runtime/triton_compile.py)."""
    launcher_cls = ns.get("TritonLauncher")
    if launcher_cls is None:
        return
    launchers = [v for v in ns.values() if isinstance(v, launcher_cls)]
    if not launchers or any(l.interpret for l in launchers):
        return
    from tracetorch.compiler.backend.runtime import triton_compile
    if triton_compile.pool_size() <= 1 or not torch.cuda.is_available():
        return
    try:
        hints = ns.get("size_hints") or {}
        items = [item for l in launchers for item in l.precompile_items(hints)]
        triton_compile.precompile(items)
    except Exception as e:      # ahead-of-time compilation is an optimisation only
        log.warning("triton_precompile_skipped", error=f"{type(e).__name__}: {e}"[:300])


def generate(gm, example_inputs):
    """(output code, number of kernels) for the graph."""
    from tracetorch.compiler.backend.codegen.wrapper import generate_wrapper
    from tracetorch.compiler.backend.conv_layout import use_channels_last
    from tracetorch.compiler.backend.pad_gemm import pad_products
    use_channels_last(gm)
    pad_products(gm)
    graph = lower_graph(gm, example_inputs)
    sched = schedule(graph)
    codegen = pick_codegen(graph.device)
    kernels = {}
    for group in sched.kernels():
        if group.writes_nothing():      # its outputs are allocated empty by the wrapper, no call
            log.debug("kernel_skipped", kernel=group.name, reason="no element to compute (a size is 0)")
            continue
        k = codegen.generate(group)
        kernels[group.name] = k
        logs.artifact("kernel_code", lambda k=k: f"# {k.name} ({k.language})\n{k.source}",
                      kernel=k.name, filename=f"{k.name}.{'cpp' if k.language == 'cpp' else 'py'}")
        logs.artifact("kernel", lambda k=k: {"name": k.name, "language": k.language, "source": k.source,
                                             "provenance": [{"node": n, "source": w} for n, w in k.provenance],
                                             "launch": {a: str(b) for a, b in k.launch.items()}})
    combos = _combine_launches(sched, kernels)
    preludes = [codegen.module_prelude(list(kernels.values()))]
    cid = logs.current_compile_id()
    code = generate_wrapper(sched, kernels, preludes, example_inputs,
                            header=f"compile id {cid}" if cid is not None else "", combos=combos)
    return code, len(kernels), graph


def _combine_launches(sched, kernels) -> dict:
    """first step -> (run, combined kernel) for runs of independent pointwise Triton kernels that
    share one launch (codegen/triton_combo.py): anywhere under config.backend.combo_kernels, else
    within the groups of copies the scheduler moved together (Schedule.copy_runs)."""
    from tracetorch.compiler.backend.codegen.triton_combo import combine, combo_runs
    if config.backend.combo_kernels:
        found = combo_runs(sched.steps, kernels, sched.plan)
    else:
        found = {}
        for first, count in sched.copy_runs:
            found.update(combo_runs(sched.steps[:first + count], kernels, sched.plan, start=first))
    combos = {}
    for start, run in found.items():
        parts = [kernels[sched.steps[j].name] for j in run]
        k = combine(f"combo_{parts[0].name}", parts)
        combos[start] = (run, k)
        log.debug("kernels_combined", kernel=k.name, parts=[p.name for p in parts], blocks=k.launch["blocks"],
                  reason="independent pointwise kernels (no buffer one writes is read or written by "
                         "another): one launch instead of several")
        logs.artifact("kernel_code", lambda k=k: f"# {k.name} ({k.language})\n{k.source}",
                      kernel=k.name, filename=f"{k.name}.py")
    return combos


def _guarded_by_backend(key: str, guards: list) -> str:
    """The cache key for code whose generation added shape guards (an `int()` of a symbolic
    size, a comparison of one): the code holds only where they hold. They are in the ShapeEnv,
    so the caller checks them before each call (the frontend's guards, the aot input check); the
    cache key of the graph does not carry them, so the code is stored under a key no lookup asks
    for (a hit would hand the code to calls the guards exclude). A guard that fixes a size turns
    a dynamic graph static: a perf hint, and likely a backend bug (pad_gemm's int() of a dynamic
    batch once made every later size recompile, and a cache hit then ran the code at another
    size: wrong results)."""
    fixed = [str(g) for g in guards if isinstance(g, sympy.Eq) and any(a.is_number for a in g.args)]
    log.warning("backend_guarded", guards=[str(g) for g in guards][:8], count=len(guards), fixed=fixed[:8],
                action="code not cached; the guards are checked before each call")
    if fixed:
        logs.artifact("perf_hints", lambda: f"the backend fixed dynamic sizes of a graph ({', '.join(fixed[:4])}): "
                                            "it serves those sizes only and recompiles for others")
    return f"{key}-guarded"


def compile_graph(gm: torch.fx.GraphModule, example_inputs):
    t0 = time.perf_counter()
    try:
        key = cache.graph_key(gm, example_inputs)
        code = cache.lookup(key)
        n_kernels = None
        if code is None:
            shape_env = shape_env_of([n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"])
            n_guards = len(shape_env.guards) if shape_env is not None else 0
            code, n_kernels, graph = generate(gm, example_inputs)
            for op, reason in graph.fallbacks:
                log.info("aten_fallback", op=op, reason=reason)
            added = shape_env.guards[n_guards:] if shape_env is not None else []
            if added:
                key = _guarded_by_backend(key, [g.expr for g in added])
        path = cache.store(key, code)
        logs.artifact("output_code", lambda: code, filename="output_code.py")
        call = _exec(code, path, gm)
    except (GraphFallback, CodegenUnsupported) as e:
        log.warning("graph_runs_eagerly", reason=str(e))
        logs.artifact("perf_hints", lambda e=e: f"whole graph runs eagerly: {e}")
        return EagerGraph(gm, str(e))
    except Exception as e:
        # a C++ compile error is a compiler bug: raise it when asked to (and always under
        # testing.inject_relu_bug, whose point is that repro/minifier tooling sees the failure)
        if not config.backend.fallback_on_error or config.testing.inject_relu_bug:
            raise
        log.error("backend_compile_failed", error=f"{type(e).__name__}: {e}")
        logs.artifact("perf_hints", lambda e=e: f"whole graph runs eagerly after a backend error: "
                                                f"{type(e).__name__}: {e}")
        return EagerGraph(gm, f"{type(e).__name__}: {e}")
    log.info("graph_compiled", kernels=n_kernels, seconds=round(time.perf_counter() - t0, 3), key=key)
    return CompiledGraph(call, code, path, key, n_kernels)


__all__ = ["compile_graph", "CompiledGraph", "EagerGraph", "generate", "pick_codegen", "ir"]
