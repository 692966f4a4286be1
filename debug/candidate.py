"""Run one repro script's graph in this process and say whether (and how) it fails.

Used by `python repro.py` directly and by every minifier candidate inside its worker process.
A repro namespace (the executed script) defines: Repro, ATTRS, INPUTS, SEED, REAL_INPUTS,
STAGE, COMPILER, CONFIG, FAILURE, ACCURACY. Evaluation is: restore the recorded config (with
repro-writing switched off, so a candidate never writes repros of its own), build the graph
module and inputs, compile with the recorded compiler, run, and optionally compare with eager
in float64. The first step that raises decides the failure kind.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

import torch

from tracetorch.debug import accuracy, graph_code
from tracetorch.debug import inputs as input_specs
from tracetorch.debug.failure import Failure, from_exception


@dataclass
class Outcome:
    failure: Failure | None
    num_nodes: int


def resolve_compiler(target: str):
    """'pkg.module:qual.name' -> the object; 'pkg.module' alone -> the module (callable modules)."""
    module_name, _, qualname = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in filter(None, qualname.split(".")):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"repro COMPILER {target!r} is not callable")
    return obj


def apply_config(config_dict: dict | None) -> None:
    """Restore the configuration the failure happened under, minus repro writing itself."""
    from tracetorch.compiler import config

    known = {sec: {k: v for k, v in opts.items() if k in config.SECTIONS.get(sec, {})}
             for sec, opts in (config_dict or {}).items() if sec in config.SECTIONS}
    config_dict = known  # options removed since the repro was written are ignored, not fatal

    if config_dict:
        config.load_dict(config_dict)
    # A candidate's own failure must be reported to the minifier, not turned into a new repro
    # or a debug folder of its own.
    # Errors must surface, not be hidden by the backend's eager fallback.
    config.load_dict({"repro": {"after": None}, "debug": {"compile_debug": False},
                      "backend": {"fallback_on_error": False}})


def load_real(ns: dict, script_path: str | None):
    """(inputs, attribute state) saved with torch.save next to the script, or (None, None)."""
    rel = ns.get("REAL_INPUTS")
    if not rel:
        return None, None
    base = os.path.dirname(os.path.abspath(script_path)) if script_path else os.getcwd()
    data = torch.load(os.path.join(base, rel), weights_only=True)  # absolute rel: join keeps it
    return data.get("inputs"), data.get("state")


def _add_values(gm, args) -> None:
    """node.meta["val"] as the graph had when captured or traced by aot (the backend's lowering
    reads shapes, strides, dtypes and devices there). Real values from one eager run: cheaper
    than fake-tensor propagation, whose first use imports a large part of torch."""
    import torch.fx as fx

    class _Record(fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            n.meta["val"] = value.detach() if isinstance(value, torch.Tensor) else value
            return value

    try:
        with torch.no_grad():
            _Record(gm).run(*input_specs.clone_inputs(args))
    except Exception:  # eager itself fails: compile without metadata, as best we can
        pass


def _drop_values(gm) -> None:
    for n in gm.graph.nodes:
        n.meta.pop("val", None)


def evaluate(ns: dict, *, check_accuracy: bool | None = None, seed: int | None = None,
             script_path: str | None = None, tol: float = accuracy.DEFAULT_TOL) -> Outcome:
    seed = ns.get("SEED", 0) if seed is None else seed
    if check_accuracy is None:
        check_accuracy = bool(ns.get("ACCURACY"))
    apply_config(ns.get("CONFIG"))
    real_inputs, state = load_real(ns, script_path)
    gm = graph_code.load_graph_module(ns, seed, state)
    n = graph_code.count_nodes(gm.graph)
    args = input_specs.make_inputs(ns["INPUTS"], seed, real=real_inputs)
    compile_fn = resolve_compiler(ns["COMPILER"])
    _add_values(gm, args)

    # The grad mode decides whether aot builds an inference or a training graph: keep it.
    with torch.set_grad_enabled(ns.get("GRAD_ENABLED", True)):
        try:
            compiled = compile_fn(gm, input_specs.clone_inputs(args))
        except Exception as e:
            return Outcome(from_exception("compile_error", e), n)
        finally:
            _drop_values(gm)  # the compiled code does not need them; eager reference runs below
        try:
            out = compiled(*input_specs.clone_inputs(args))
        except Exception as e:
            return Outcome(from_exception("runtime_error", e), n)
    if not check_accuracy:
        return Outcome(None, n)

    with torch.no_grad():
        eager = gm(*input_specs.clone_inputs(args))
    ref64 = accuracy.float64_reference(gm, input_specs.clone_inputs(args))
    problem = accuracy.compare(out, eager, ref64, tol=tol)
    if problem is None:
        return Outcome(None, n)
    return Outcome(Failure(kind="accuracy", type="AccuracyError", message=problem,
                           text=f"AccuracyError: {problem}"), n)
