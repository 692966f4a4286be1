"""The minifier: shrink a failing graph while it keeps failing the same way.

Strategies, repeated until none makes progress (each candidate is a full repro script run in
its own process, see pool.py):
1. truncate suffix: k-ary search (k = number of workers) for the shortest prefix of the graph
   that still fails, returning every value the prefix leaves unused;
2. remove outputs: keep one output, then halves;
3. delta debugging: replace chunks of nodes by fresh inputs of the same metadata (their
   producers die with them), coarse to fine: chunk size from the largest power of two down to 1;
4. dead-code elimination and unused-input removal after every edit (graph_edits.normalize).

Before anything, the original is run `repeat` times: a failure that does not repeat is reported
as flaky and not minified. Every accepted step writes a checkpoint script; the final result is
verified again before `repro_minified.py` is written.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from tracetorch import logs
from tracetorch.debug import graph_code
from tracetorch.debug import inputs as input_specs
from tracetorch.debug import repro_writer
from tracetorch.debug.failure import Failure, compile_check_str, matches
from tracetorch.debug.minifier import graph_edits as edits
from tracetorch.debug.minifier.pool import CandidatePool, Result

log = logs.get_logger(__name__)


@dataclass
class MinifyOptions:
    jobs: int | None = None
    timeout: float | None = None        # None: derived from the sanity runs
    check_str: str | None = None
    accuracy: bool | None = None        # None: the script's ACCURACY
    seed: int | None = None
    out_path: str | None = None
    checkpoint_dir: str | None = None
    repeat: int = 2                     # runs of the original (and the result) to detect flakiness


@dataclass
class MinifyResult:
    status: str                         # minified | flaky | not_reproduced
    message: str
    initial_nodes: int = 0
    final_nodes: int = 0
    candidates: int = 0
    seconds: float = 0.0
    out_path: str | None = None
    checkpoints: list = field(default_factory=list)
    target: Failure | None = None


def _annotate_specs(gm: fx.GraphModule, input_specs_list: list, seed: int, real_inputs) -> None:
    """meta[repro_spec] for every node: the metadata of its value, from one eager run."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, spec in zip(placeholders, input_specs_list):
        node.meta[edits.SPEC] = spec
    args = input_specs.make_inputs(input_specs_list, seed, real=real_inputs)

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            if n.op not in ("placeholder", "output"):
                spec = input_specs.value_spec(value)
                if spec["kind"] == "tensor":
                    spec["requires_grad"] = False  # a fresh input never needs grad to reproduce
                n.meta[edits.SPEC] = spec
            return value

    try:
        with torch.no_grad():
            Recorder(gm).run(*input_specs.clone_inputs(args))
    except Exception as e:  # eager itself fails: only truncation is possible (no node metadata)
        log.warning("minifier_eager_failed", error=f"{type(e).__name__}: {e}")


class Minifier:
    def __init__(self, ns: dict, script_text: str, script_path: str, options: MinifyOptions, report=None):
        self.ns, self.script_text, self.script_path = ns, script_text, os.path.abspath(script_path)
        self.opts = options
        self.report = report or (lambda **kw: None)
        self.seed = ns.get("SEED", 0) if options.seed is None else options.seed
        self.accuracy = bool(ns.get("ACCURACY")) if options.accuracy is None else options.accuracy
        self.check = compile_check_str(options.check_str)
        self.target = Failure.from_dict(ns.get("FAILURE"))
        base = os.path.dirname(self.script_path)
        self.out_path = options.out_path or os.path.join(base, "repro_minified.py")
        self.checkpoint_dir = options.checkpoint_dir or os.path.join(base, "checkpoints")
        self.checkpoints: list[str] = []
        self.start = time.monotonic()
        self.successes = 0
        self.strategy = "sanity check"

        # The pool first: its forkserver warms up (imports torch, the compiler) while we load.
        module = ns["COMPILER"].partition(":")[0]
        self.pool = CandidatePool(jobs=options.jobs, timeout=options.timeout or 600.0,
                                  preload=["tracetorch.compiler", module],
                                  options={"accuracy": self.accuracy, "seed": self.seed},
                                  # only our aot stage (frontend-stage repros of our backends) uses fake tensors
                                  warm_fake=ns.get("STAGE") == "frontend" and module.startswith("tracetorch.compiler."))
        from tracetorch.debug.candidate import apply_config, load_real
        apply_config(ns.get("CONFIG"))
        real, state = load_real(ns, script_path)
        # Candidates live elsewhere (checkpoints/): they name the saved values by absolute path.
        self.real_path = (os.path.join(os.path.dirname(self.script_path), ns["REAL_INPUTS"])
                          if ns.get("REAL_INPUTS") else None)
        self.gm = graph_code.load_graph_module(ns, self.seed, state)
        _annotate_specs(self.gm, ns["INPUTS"], self.seed, real)
        self.initial_nodes = graph_code.count_nodes(self.gm.graph)
        self.current = self.gm.graph

    # -- scripts -------------------------------------------------------------------------------
    def render(self, graph: fx.Graph, title: str = "repro_minified") -> str:
        text, _ = repro_writer.render_script(
            self.gm, graph, edits.placeholder_specs(graph), stage=self.ns.get("STAGE", "backend"),
            compiler=self.ns["COMPILER"], config=self.ns.get("CONFIG", {}), failure=self.target,
            accuracy=self.accuracy, seed=self.seed, title=title, real_inputs=self.real_path,
            grad_enabled=self.ns.get("GRAD_ENABLED", True))
        return text

    def nodes(self, graph=None) -> int:
        return graph_code.count_nodes(graph if graph is not None else self.current)

    def interesting(self, result: Result | None) -> bool:
        if result is None or result.failure is None or result.failure.kind == "invalid":
            return False
        if self.target is None:
            return True
        return matches(result.failure, self.target, self.check)

    def _progress(self) -> None:
        self.report(nodes=self.nodes(), initial=self.initial_nodes, tried=self.pool.started,
                    successes=self.successes, elapsed=time.monotonic() - self.start, strategy=self.strategy)

    def try_candidates(self, graphs: list[fx.Graph | None]) -> fx.Graph | None:
        """Run candidates (None entries skipped) in order; accept and return the first success."""
        live = [(i, g) for i, g in enumerate(graphs) if g is not None and 0 < self.nodes(g) < self.nodes()]
        if not live:
            return None
        path = os.path.join(self.checkpoint_dir, "candidate.py")
        results = self.pool.run_until([(self.render(g), path) for _, g in live], self.interesting)
        self._progress()
        for (_, g), r in zip(live, results):
            if self.interesting(r):
                self.accept(g)
                return g
        return None

    def accept(self, graph: fx.Graph) -> None:
        before = self.nodes()
        self.current = graph
        self.successes += 1
        path = os.path.join(self.checkpoint_dir, f"minified_{self.nodes()}_nodes.py")
        repro_writer.write_text(path, self.render(graph))
        self.checkpoints.append(path)
        log.info("minifier_step", strategy=self.strategy, nodes_before=before, nodes_after=self.nodes(),
                 candidates=self.pool.started, checkpoint=path)
        self._progress()

    # -- strategies ------------------------------------------------------------------------------
    def truncate_suffix(self) -> bool:
        self.strategy = "truncate suffix"
        n = len(edits.compute_nodes(self.current))
        lo, hi = 0, n     # keep=hi fails (the current graph); keep=lo is known not to
        base = self.current
        while hi - lo > 1:
            k = self.pool.jobs
            points = sorted({lo + (hi - lo) * (i + 1) // (k + 1) for i in range(k)} - {lo, hi})
            if not points:
                break
            graphs = [edits.truncate(base, p) for p in points]
            scripts = [(self.render(g), os.path.join(self.checkpoint_dir, "candidate.py")) if g is not None else None
                       for g in graphs]
            runnable = [(p, g, s) for p, g, s in zip(points, graphs, scripts) if s is not None]
            results = self.pool.run_until([s for _, _, s in runnable], self.interesting)
            self._progress()
            ok = [(p, g) for (p, g, _), r in zip(runnable, results) if self.interesting(r)]
            if ok:
                p, g = ok[0]
                hi = p
                lo = max([q for q in points if q < p], default=lo)  # all ran (order) and did not fail
                self.accept(g)
            else:
                lo = max(points)
        return self.nodes() < n and hi < n

    def isolate_last(self) -> bool:
        """After truncation the last node is the prime suspect: try it alone, inputs made fresh.

        One candidate; when the failure needs more context, delta debugging finds it."""
        self.strategy = "isolate last node"
        nodes = edits.compute_nodes(self.current)
        if len(nodes) <= 1:
            return False
        producers = [a.name for a in nodes[-1].all_input_nodes if a.op != "placeholder"]
        if not producers:
            return False
        return self.try_candidates([edits.replace_with_inputs(self.current, producers)]) is not None

    def remove_outputs(self) -> bool:
        self.strategy = "remove outputs"
        progressed = False
        while True:
            m = len(edits.output_values(self.current))
            if m <= 1:
                return progressed
            singles = [edits.keep_outputs(self.current, [i]) for i in range(m)]
            half = m // 2
            halves = [edits.keep_outputs(self.current, list(range(half))),
                      edits.keep_outputs(self.current, list(range(half, m)))]
            if self.try_candidates(singles) is None and self.try_candidates(halves) is None:
                return progressed
            progressed = True

    def delta_debug(self) -> bool:
        progressed = False
        names = edits.replaceable(self.current)
        if not names:
            return False
        g = 1 << (len(names).bit_length() - 1)
        while g >= 1:
            self.strategy = f"delta debugging (G: {g})"
            names = edits.replaceable(self.current)
            chunks = [names[i:i + g] for i in range(0, len(names), g)]
            cand = self.try_candidates([edits.replace_with_inputs(self.current, c) for c in chunks])
            if cand is not None:
                progressed = True
                names = edits.replaceable(self.current)
                if not names:
                    break
                g = min(g, 1 << (len(names).bit_length() - 1))
                continue
            g //= 2
        return progressed

    # -- driver ------------------------------------------------------------------------------------
    def sanity(self) -> MinifyResult | None:
        """Run the original `repeat` times: not reproducing or flaky ends the minification."""
        self.strategy = "sanity check"
        t0 = time.monotonic()
        results = self.pool.run_until([(self.script_text, self.script_path)] * max(1, self.opts.repeat))
        self._progress()
        if self.target is None:  # a level-3 script written before any failure: adopt what we see
            seen = next((r.failure for r in results if r and r.failure and r.failure.kind != "invalid"), None)
            self.target = seen
        hits = sum(1 for r in results if self.interesting(r) and self.target is not None)
        if self.opts.timeout is None:
            from tracetorch.compiler import config
            slowest = max((r.seconds for r in results if r), default=10.0)
            self.pool.timeout = max(float(config.repro.timeout), 4 * slowest)
        if hits == len(results):
            return None
        seen = "; ".join(r.failure.headline() if r and r.failure else "passed" for r in results)
        if hits == 0:
            return MinifyResult("not_reproduced", f"the failure did not reproduce in {len(results)} runs "
                                f"({seen})", self.initial_nodes, self.initial_nodes, self.pool.started,
                                time.monotonic() - t0, target=self.target)
        return MinifyResult("flaky", f"flaky: the failure reproduced in {hits} of {len(results)} runs "
                            f"({seen}); not minifying a failure that does not repeat", self.initial_nodes,
                            self.initial_nodes, self.pool.started, time.monotonic() - t0, target=self.target)

    def run(self) -> MinifyResult:
        try:
            early = self.sanity()
            if early is not None:
                log.warning("minifier_stopped", status=early.status, reason=early.message)
                return early
            log.info("minifier_start", nodes=self.initial_nodes, jobs=self.pool.jobs,
                     timeout=self.pool.timeout, target=self.target.headline())
            progressed = True
            rounds = 0
            while progressed and rounds < 8:
                rounds += 1
                progressed = False
                progressed |= self.truncate_suffix()
                progressed |= self.isolate_last()
                progressed |= self.remove_outputs()
                progressed |= self.delta_debug()
            return self.finish()
        finally:
            self.pool.close()

    def finish(self) -> MinifyResult:
        self.strategy = "verifying result"
        text = self.render(self.current)
        # The accepted graph already failed once as a candidate; repeat-1 more runs confirm it.
        runs = max(1, self.opts.repeat - (1 if self.successes else 0))
        results = self.pool.run_until([(text, self.out_path)] * runs)
        hits = sum(1 for r in results if self.interesting(r))
        repro_writer.write_text(self.out_path, text)
        elapsed = time.monotonic() - self.start
        status = "minified" if hits == len(results) else "flaky"
        msg = (f"{self.initial_nodes} -> {self.nodes()} nodes in {elapsed:.1f}s, "
               f"{self.pool.started} candidate runs")
        if status == "flaky":
            msg += f"; WARNING: the minified graph reproduced in only {hits} of {len(results)} runs"
        log.info("minifier_done", status=status, initial_nodes=self.initial_nodes, final_nodes=self.nodes(),
                 candidates=self.pool.started, seconds=round(elapsed, 3), out=self.out_path)
        self._progress()
        return MinifyResult(status, msg, self.initial_nodes, self.nodes(), self.pool.started, elapsed,
                            self.out_path, self.checkpoints, self.target)
