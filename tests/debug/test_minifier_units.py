"""Fast tests of the repro/minifier machinery with stand-in backends (no code generation)."""
import os
import subprocess
import sys

import pytest
import torch
import torch.fx as fx

from tracetorch.compiler import config
from tracetorch.debug import accuracy, graph_code, repro_wrapper, run_dir
from tracetorch.debug.failure import Failure, matches
from tracetorch.debug.minifier import graph_edits as edits
from tracetorch.debug.minifier.pool import CandidatePool
from tests.debug.helpers import REPO, compute_nodes, is_relu, load_script_graph, run_script
from tests.debug.models import relu_chain
from tests.debug.standin_backend import buggy_compile, flaky_compile


def _chain_gm(blocks=7, relu_at=None):
    relu_at = min(4, blocks - 1) if relu_at is None else relu_at
    return fx.symbolic_trace(lambda x, w: relu_chain(x, w, blocks, relu_at))


def _write_repro(tmp_path, compile_fn, bug="compile_error", level=2, stage="backend", blocks=7):
    """Compile a relu chain through the repro wrapper with `compile_fn`; return repro.py's path."""
    run_dir._reset_for_tests()
    gm = _chain_gm(blocks)
    with config.patch(**{"repro.after": stage, "repro.level": level, "testing.inject_relu_bug": bug,
                         "debug.debug_dir": str(tmp_path)}):
        wrapped = repro_wrapper.wrap(compile_fn, stage)
        try:
            wrapped(gm, [torch.randn(8, 8), torch.randn(8, 8)])(torch.randn(8, 8), torch.randn(8, 8))
        except Exception:
            pass
        return os.path.join(run_dir.get_run_dir(), "repro", "repro.py")


# -- graph edits -------------------------------------------------------------------------------
def _annotated(blocks=4):
    from tracetorch.debug.minifier.search import _annotate_specs
    from tracetorch.debug.inputs import value_spec
    gm = _chain_gm(blocks, relu_at=2)
    specs = [value_spec(torch.randn(8, 8)), value_spec(torch.randn(8, 8))]
    _annotate_specs(gm, specs, 0, None)
    return gm


def test_truncate_keeps_a_prefix_and_returns_its_frontier():
    gm = _annotated()
    g = edits.truncate(gm.graph, 3)
    nodes = edits.compute_nodes(g)
    assert [n.name for n in nodes] == [n.name for n in edits.compute_nodes(gm.graph)[:3]]
    # returned: exactly the kept nodes nothing else kept reads
    assert {v.name for v in edits.output_values(g)} == {
        n.name for n in nodes if all(u.op == "output" for u in n.users)}


def test_replace_with_inputs_kills_producers_and_drops_unused_inputs():
    gm = _annotated()
    relu = next(n for n in gm.graph.nodes if is_relu(n))
    g = edits.replace_with_inputs(gm.graph, [relu.args[0].name])
    names = [n.name for n in edits.compute_nodes(g)]
    assert names[0] == relu.name  # nothing before the relu is left
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    assert all(p.users for p in placeholders)
    assert placeholders[0].meta[edits.SPEC]["shape"] == [8, 8]


def test_keep_outputs_and_dead_code():
    gm = _annotated()
    g = edits.truncate(gm.graph, 6)
    if len(edits.output_values(g)) > 1:
        g2 = edits.keep_outputs(g, [0])
        assert len(edits.output_values(g2)) == 1
        assert len(edits.compute_nodes(g2)) <= len(edits.compute_nodes(g))
    assert edits.keep_outputs(g, list(range(len(edits.output_values(g))))) is None


# -- failures and accuracy ---------------------------------------------------------------------
def test_failure_matching_and_check_str():
    target = Failure("compile_error", "RuntimeError", "boom in relu", "Traceback...\nRuntimeError: boom in relu")
    same = Failure("compile_error", "RuntimeError", "boom in relu (smaller)", "RuntimeError: boom in relu (smaller)")
    other_kind = Failure("runtime_error", "RuntimeError", "boom in relu", "RuntimeError: boom in relu")
    other_type = Failure("compile_error", "TypeError", "bad arg", "TypeError: bad arg")
    assert matches(same, target) and not matches(other_kind, target) and not matches(other_type, target)
    assert matches(other_type, target, check_str=r"bad arg") and not matches(same, target, check_str=r"bad arg")
    assert not matches(None, target)


def test_accuracy_compare_against_float64():
    x = torch.randn(16, 16)
    ref64 = x.double().relu()
    assert accuracy.compare(x.relu(), x.relu(), ref64) is None
    problem = accuracy.compare(x.relu() + 1, x.relu(), ref64)
    assert problem is not None and "accuracy mismatch" in problem
    assert "shape mismatch" in accuracy.compare(x[:2], x, x.double())
    assert "differ" in accuracy.compare(torch.tensor([1, 2]), torch.tensor([1, 3]), None)


# -- graph as code ----------------------------------------------------------------------------
def test_render_roundtrip_with_parameters_buffers_and_submodules():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.register_buffer("scale", torch.full((4,), 2.0))

        def forward(self, x):
            return torch.relu(self.lin(x) * self.scale).sum(0), x.shape[0]

    gm = fx.symbolic_trace(M())
    rendered = graph_code.render_module(gm, gm.graph)
    ns = {}
    exec(rendered.source, ns)
    back = graph_code.load_graph_module(ns, seed=0)
    assert [n.op for n in back.graph.nodes] == [n.op for n in gm.graph.nodes]
    state = {rendered.renames[k]: v for k, v in {"scale": gm.scale}.items()}
    state.update({f"{rendered.renames['lin']}.{k}": v for k, v in gm.lin.state_dict().items()})
    exact = graph_code.load_module(ns, seed=0, state=state)
    x = torch.randn(3, 4)
    torch.testing.assert_close(exact(x)[0], gm(x)[0])


# -- the candidate pool: crashes, hangs and broken scripts are results, not disasters ----------
def test_pool_survives_segfault_hang_and_broken_scripts(tmp_path):
    pool = CandidatePool(jobs=2, timeout=3)
    path = str(tmp_path / "cand.py")
    scripts = [("import ctypes\nctypes.string_at(0)\n", path),
               ("import time\ntime.sleep(60)\n", path),
               ("raise ValueError('not a repro')\n", path)]
    crash, hang, broken = pool.run_until(scripts)
    assert crash.failure.kind == "crash" and "SIGSEGV" in crash.failure.type
    assert hang.failure.kind == "timeout"
    assert broken.failure.kind == "invalid" and "not a repro" in broken.failure.message
    assert pool.started == 3


# -- stand-in backends through the repro wrapper -------------------------------------------------
def test_runtime_error_repro_records_the_call_inputs(tmp_path):
    repro = _write_repro(tmp_path, buggy_compile, bug="runtime_error")
    text = open(repro).read()
    assert "STAGE = 'backend'" in text and "tests.debug.standin_backend:buggy_compile" in text
    assert "'kind': 'runtime_error'" in text and "injected relu runtime error" in text
    r = run_script(repro)
    assert r.returncode == 1 and "injected relu runtime error" in r.stderr
    r = run_script(repro, "--check-str", "some other error")  # reproduces, but not that error
    assert r.returncode == 3 and "differently" in r.stderr


def test_flaky_failure_is_reported_not_minified(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAKY_COUNTER", str(tmp_path / "counter"))
    repro = _write_repro(tmp_path, flaky_compile)
    assert os.path.exists(repro)
    r = run_script(repro, "--minify", "--repeat", "2", "--jobs", "1")
    assert r.returncode == 3, r.stderr[-2000:]
    assert "flaky" in r.stderr and "1 of 2" in r.stderr
    assert not os.path.exists(os.path.join(os.path.dirname(repro), "repro_minified.py"))


def test_segfault_with_level_3_repro_and_minify(tmp_path):
    """Level 3 writes the repro before compiling, so a backend that kills the process still
    leaves one; the minifier runs crashing candidates safely and shrinks it to the relu."""
    prog = tmp_path / "crash.py"
    prog.write_text(
        "import torch, torch.fx as fx\n"
        "from tracetorch.compiler import config\n"
        "from tracetorch.debug import repro_wrapper\n"
        "from tests.debug.models import relu_chain\n"
        "from tests.debug.standin_backend import segfault_compile\n"
        "gm = fx.symbolic_trace(lambda x, w: relu_chain(x, w))\n"
        f"with config.patch(**{{'repro.after': 'backend', 'repro.level': 3, 'debug.debug_dir': {str(tmp_path)!r}}}):\n"
        "    repro_wrapper.wrap(segfault_compile, 'backend')(gm, [torch.randn(8, 8), torch.randn(8, 8)])\n")
    r = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert r.returncode < 0  # killed by the signal
    repro = next((tmp_path / "latest" / "repro").glob("repro.py"))
    assert "FAILURE = None" in repro.read_text()
    assert run_script(repro).returncode < 0
    r = run_script(repro, "--minify")
    assert r.returncode == 0, r.stderr[-2000:]
    small = compute_nodes(load_script_graph(repro.parent / "repro_minified.py"))
    assert len(small) <= 3 and any(is_relu(n) for n in small)


def test_frontend_stage_with_the_users_backend(tmp_path):
    """TRACE_REPRO_AFTER=frontend wraps the user's backend around the captured graph."""
    from tracetorch import compiler

    run_dir._reset_for_tests()
    compiler.reset()
    w = torch.randn(8, 8)
    opt = compiler.compile(lambda x: relu_chain(x, w), backend=buggy_compile)
    with config.patch(**{"repro.after": "frontend", "testing.inject_relu_bug": "compile_error",
                         "debug.debug_dir": str(tmp_path)}):
        with pytest.raises(Exception) as info:
            opt(torch.randn(8, 8))
    compiler.reset()
    assert "standin: injected relu compile error" in str(info.value)
    repro = os.path.join(run_dir.get_run_dir(), "repro", "repro.py")
    text = open(repro).read()
    assert "STAGE = 'frontend'" in text and "COMPILER = 'tests.debug.standin_backend:buggy_compile'" in text
    assert len(compute_nodes(load_script_graph(repro))) >= 50
    r = run_script(repro, "--minify")
    assert r.returncode == 0, r.stderr[-2000:]
    small = compute_nodes(load_script_graph(os.path.join(os.path.dirname(repro), "repro_minified.py")))
    assert len(small) <= 3 and any(is_relu(n) for n in small)


# -- the CLI -------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (["--jobs", "0"], "positive integer"),
    (["--check-str", "("], "not a valid regular expression"),
    (["--timeout", "soon"], "number of seconds"),
    (["--bogus"], "unrecognized arguments"),
    (["--minify", "--run"], "not allowed with"),
])
def test_bad_arguments_are_clear_errors(args, message, capsys):
    from tracetorch.debug import repro_cli

    with pytest.raises(SystemExit) as info:
        repro_cli._parser("repro.py", "run").parse_args(args)
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_bad_arguments_end_to_end_no_traceback(tmp_path):
    repro = _write_repro(tmp_path, buggy_compile, blocks=2)
    r = run_script(repro, "--jobs", "zero")
    assert r.returncode == 2 and "positive integer" in r.stderr and "Traceback" not in r.stderr


def test_hooks_load_the_debug_plugin_and_check_stages():
    from tracetorch.compiler import hooks

    hooks._reset_for_tests()
    try:
        fn = hooks.wrap_compiler(buggy_compile, "backend")
        assert hooks.plugins_loaded()
        assert fn is not buggy_compile and fn.__wrapped__ is not None
        with pytest.raises(ValueError, match="stage must be one of"):
            hooks.wrap_compiler(buggy_compile, "middle")
    finally:
        hooks._reset_for_tests()
        hooks.load_plugins()


def test_real_input_values_are_saved_only_when_asked(tmp_path):
    from tracetorch.debug import candidate

    run_dir._reset_for_tests()
    gm = _chain_gm()
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    with config.patch(**{"repro.after": "backend", "repro.save_real_inputs": True,
                         "testing.inject_relu_bug": "runtime_error", "debug.debug_dir": str(tmp_path)}):
        compiled = repro_wrapper.wrap(buggy_compile, "backend")(gm, [torch.randn(8, 8), torch.randn(8, 8)])
        with pytest.raises(RuntimeError):
            compiled(x, w)
        repro = os.path.join(run_dir.get_run_dir(), "repro", "repro.py")
    assert os.path.isfile(os.path.join(os.path.dirname(repro), "repro_inputs.pt"))
    ns = {"__name__": "t"}
    exec(open(repro).read(), ns)
    assert ns["REAL_INPUTS"] == "repro_inputs.pt" and ns["INPUTS"][0]["real_index"] == 0
    real, _ = candidate.load_real(ns, repro)
    assert torch.equal(real[0], x) and torch.equal(real[1], w)   # the values of the failing call
    try:
        outcome = candidate.evaluate(ns, script_path=repro)   # restores the recorded config...
    finally:
        config.reset_assignments()                            # ...which must not leak into other tests
    assert outcome.failure.kind == "runtime_error"
    # without the option, only metadata is written
    run_dir._reset_for_tests()
    repro2 = _write_repro(tmp_path / "plain", buggy_compile, bug="runtime_error")
    assert not os.path.exists(os.path.join(os.path.dirname(repro2), "repro_inputs.pt"))
