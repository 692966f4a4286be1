"""TRACE_REPRO_AFTER: catch failures of a compiler stage and write a repro script for them.

`wrap(compile_fn, stage)` is registered with `compiler.hooks`; the frontend wraps the user's
backend (stage "frontend", the captured FX graph) and our backend wraps its inner compiler
(stage "backend", the graph after aot). When `config.repro.after` names the stage:

- level 1+: a compile error or a runtime error of the compiled function writes `repro.py`
  (while the stage is watched, `backend.fallback_on_error` is off: an error the backend would
  otherwise hide by running eagerly is raised, and reproduced);
- level 2+: also `minifier_launcher.py` (the same script, minifying by default);
- level 3: a repro is written before every compile, so even a segfault leaves one behind;
- level 4: after compiling, the result is compared with eager in float64 on the example inputs;
  a mismatch writes a repro (ACCURACY = True) and raises AccuracyError. No script is written
  before each compile (as at level 3): repro.py is only ever a failure's.

The path is logged at warning level and added as a note to the exception, so it is the last
line of the error the user sees. When the stage is not selected, the wrapper costs one config
lookup per compile and nothing per call.
"""

from __future__ import annotations

import os
import types

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor

from tracetorch import logs
from tracetorch.debug import accuracy, graph_code, repro_writer, run_dir
from tracetorch.debug import inputs as input_specs
from tracetorch.debug.failure import Failure, from_exception

log = logs.get_logger(__name__)


def compiler_target(fn, stage: str) -> str:
    """An importable 'module:qualname' for compile_fn, so the repro can call the same compiler.

    Local wrappers (timers, our own wrappers) are looked through: first `__wrapped__` (the
    functools.wraps convention), then the callables a closure holds (e.g. a timing wrapper
    around the user's backend)."""
    found = _importable(fn, depth=0)
    if found is not None:
        return found
    fallback = "tracetorch.compiler.backends:default"
    log.warning("repro_compiler_not_importable", stage=stage, compiler=repr(fn)[:200], fallback=fallback,
                hint="give the backend a module-level name (or set __wrapped__ on local wrappers) "
                     "so repro scripts can import it")
    return fallback


def _importable(fn, depth: int) -> str | None:
    if depth > 8:
        return None
    if isinstance(fn, types.ModuleType):
        return fn.__name__ if callable(fn) else None
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if module and qualname and "<" not in qualname:
        target = f"{module}:{qualname}"
        try:
            from tracetorch.debug.candidate import resolve_compiler
            if resolve_compiler(target) is fn:
                return target
        except Exception:
            pass
    inner = getattr(fn, "__wrapped__", None)
    if inner is not None:
        found = _importable(inner, depth + 1)
        if found is not None:
            return found
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # empty cell
            continue
        if callable(value) and not isinstance(value, type):
            found = _importable(value, depth + 1)
            if found is not None:
                return found
    return None


def _real_or_generated(values: list) -> list:
    """Example inputs may be fake tensors (no data): regenerate those from their metadata."""
    if any(isinstance(v, FakeTensor) for v in values):
        return input_specs.make_inputs([input_specs.value_spec(v) for v in values], 0)
    return values


class _Snapshot:
    """The graph as it was handed to the compiler (compilers may rewrite it in place)."""

    def __init__(self, gm: fx.GraphModule, example_inputs: list, compile_fn, stage: str):
        self.root = gm
        self.graph, _ = _copy_graph(gm.graph)
        self.specs = [input_specs.value_spec(v) for v in example_inputs]
        self.example_inputs = example_inputs
        self.compile_fn, self.stage = compile_fn, stage
        self.compile_id = logs.current_compile_id()
        self.grad_enabled = torch.is_grad_enabled()


def _copy_graph(graph: fx.Graph):
    g = fx.Graph()
    env: dict = {}
    g.output(g.graph_copy(graph, env))
    return g, env


def write_repro(snap: _Snapshot, failure: Failure | None, *, is_accuracy: bool,
                values: list | None = None) -> str | None:
    """Write repro.py (and at level >= 2 minifier_launcher.py); returns the repro path or None."""
    from tracetorch.compiler import config

    cid = str(snap.compile_id) if snap.compile_id is not None else None
    try:
        folder = run_dir.subdir("repro")
        specs = [input_specs.value_spec(v) for v in values] if values is not None else snap.specs
        real = None
        if config.repro.save_real_inputs:
            real = "repro_inputs.pt"
            values = values if values is not None else _real_or_generated(snap.example_inputs)
            specs = [dict(spec, real_index=i) for i, spec in enumerate(specs)]
        kwargs = dict(stage=snap.stage, compiler=compiler_target(snap.compile_fn, snap.stage),
                      config=config.to_dict(), failure=failure, accuracy=is_accuracy, compile_id=cid,
                      real_inputs=real, grad_enabled=snap.grad_enabled)
        text, rendered = repro_writer.render_script(snap.root, snap.graph, specs, **kwargs)
        path = repro_writer.write_text(os.path.join(folder, "repro.py"), text)
        if real:
            repro_writer.save_real_inputs(os.path.join(folder, real), values, snap.root, rendered.renames)
        launcher = None
        if config.repro.level >= 2:
            text, _ = repro_writer.render_script(snap.root, snap.graph, specs, default_action="minify",
                                                 title="minifier_launcher", **kwargs)
            launcher = repro_writer.write_text(os.path.join(folder, "minifier_launcher.py"), text)
    except graph_code.ReproUnsupported as e:
        log.warning("repro_not_written", stage=snap.stage, reason=str(e))
        return None
    except Exception as e:  # never let repro writing hide the user's real error
        log.warning("repro_not_written", stage=snap.stage, reason=f"{type(e).__name__}: {e}")
        return None
    log.warning("repro_written", path=path, launcher=launcher, stage=snap.stage, nodes=rendered.num_nodes,
                failure=failure.headline() if failure else None,
                run=f"python {path}", minify=f"python {path} --minify")
    return path


def _note(exc: BaseException, path: str | None) -> None:
    if path and hasattr(exc, "add_note"):
        exc.add_note(f"tracetorch wrote a repro script for this failure: {path}\n"
                     f"    reproduce: python {path}\n    minify:    python {path} --minify")


def _accuracy_check(snap: _Snapshot, gm: fx.GraphModule, compiled, example_inputs: list) -> str | None:
    from tracetorch.compiler import config

    args = _real_or_generated(list(example_inputs))
    reference = snap_module(snap)  # the graph as captured, not whatever the compiler left in gm
    with torch.no_grad():
        eager = reference(*input_specs.clone_inputs(args))
        out = compiled(*input_specs.clone_inputs(args))
    ref64 = accuracy.float64_reference(reference, input_specs.clone_inputs(args))
    return accuracy.compare(out, eager, ref64, tol=config.repro.tolerance)


def snap_module(snap: _Snapshot) -> fx.GraphModule:
    return fx.GraphModule(snap.root, snap.graph)


def _wrap_runtime(compiled, snap: _Snapshot):
    reported = []

    def run(*args):
        try:
            return compiled(*args)
        except Exception as e:
            if not reported:  # one repro per compiled graph, not one per call
                reported.append(True)
                _note(e, write_repro(snap, from_exception("runtime_error", e), is_accuracy=False, values=list(args)))
            raise

    run.__wrapped__ = compiled
    return run


def wrap(compile_fn, stage: str):
    """The `compiler.hooks` wrapper: a pass-through unless config.repro.after == stage."""

    def compile_with_repro(gm, example_inputs):
        from tracetorch.compiler import config

        if config.repro.after != stage:
            return compile_fn(gm, example_inputs)
        level = config.repro.level
        # Catching failures is the point of repro mode: the backend must not hide a compile
        # error behind its eager fallback while we watch (the recorded config says so too).
        with config.patch(**{"backend.fallback_on_error": False}):
            snap = _Snapshot(gm, list(example_inputs), compile_fn, stage)
            if level == 3:
                # level 4 does not: it checks every compile, and a repro.py rewritten before
                # each one would replace the failure it is there to keep (issue 18)
                write_repro(snap, None, is_accuracy=False)
            try:
                compiled = compile_fn(gm, example_inputs)
            except Exception as e:
                _note(e, write_repro(snap, from_exception("compile_error", e), is_accuracy=False))
                raise
        if level >= 4:
            try:
                problem = _accuracy_check(snap, gm, compiled, list(example_inputs))
            except Exception as e:  # running it failed outright: that is a runtime failure
                _note(e, write_repro(snap, from_exception("runtime_error", e), is_accuracy=False))
                raise
            if problem is not None:
                err = accuracy.AccuracyError(f"compiled graph disagrees with eager: {problem}")
                failure = Failure("accuracy", "AccuracyError", problem, f"AccuracyError: {problem}")
                _note(err, write_repro(snap, failure, is_accuracy=True))
                raise err
        return _wrap_runtime(compiled, snap)

    compile_with_repro.__wrapped__ = compile_fn
    compile_with_repro.__name__ = getattr(compile_fn, "__name__", "compile_fn")
    return compile_with_repro
