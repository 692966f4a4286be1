"""compiler.backend as a torch.compile backend: models, artifacts, cache, output code, relu bug."""

import logging
import os
import subprocess
import sys

import pytest
import torch

from tracetorch import compiler
from tracetorch import logs
from tracetorch.compiler import config
from cpp_test_utils import assert_same, check, compile_fn, kernel_count

pytestmark = pytest.mark.usefixtures("backend_cache_dir")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.fc2(torch.nn.functional.gelu(self.fc1(x)))).softmax(-1)


def test_torch_compile_mlp():
    torch.manual_seed(0)
    model = MLP().eval()
    opt = torch.compile(model, backend=compiler.backend)
    with torch.no_grad():
        for n in (4, 4, 6):
            x = torch.randn(n, 16)
            torch.testing.assert_close(opt(x), model(x), atol=1e-5, rtol=1e-5)


def test_fx_module_with_parameters_as_constants():
    model = MLP().eval()
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(3, 16)
    with torch.no_grad():
        rt = compiler.backend(gm, [x])
        assert_same(rt(x), model(x))
        assert kernel_count(rt) >= 2


def test_artifacts_and_records():
    names = ["aot_graphs", "ir_pre_fusion", "ir_post_fusion", "schedule", "fusion", "output_code", "kernel_code",
             "kernel"]
    with logs.testing.capture(artifacts=names) as events:
        with config.patch(**{"backend.cache_enabled": False}):
            check(lambda x: x.sin().cos() + x.softmax(-1), [torch.randn(4, 9)])
    seen = {e.name for e in events}
    for name in names:
        assert name in seen, name
    kernel = next(e for e in events if e.name == "kernel")
    payload = kernel.payload() if callable(kernel.payload) else kernel.payload
    assert payload["source"] and payload["provenance"]


def test_provenance_names_user_lines():
    class M(torch.nn.Module):
        def forward(self, x):
            y = x.sin()   # the line the kernel comment must point at
            return y * 2
    tracer = torch.fx.Tracer()
    tracer.record_stack_traces = True   # (stack traces start at a `forward` frame)
    graph = tracer.trace(M())
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    x = torch.randn(5, 3)
    rt = compiler.backend(gm, [x])
    assert_same(rt(x), M()(x))
    code = rt.compiled.code
    assert "test_backend.py" in code and "y = x.sin()" in code


def test_output_code_runs_standalone(tmp_path):
    rt = check(lambda x, w: torch.relu(x @ w).sum(-1), [torch.randn(4, 6), torch.randn(6, 5)])
    path = tmp_path / "output_code.py"
    path.write_text(rt.compiled.code)
    env = dict(os.environ, PYTHONPATH=ROOT, TRACE_BACKEND_CACHE_DIR=str(config.backend.cache_dir))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "(4,)" in proc.stdout


def test_second_compile_hits_the_disk_cache():
    with logs.testing.capture(level=logging.INFO) as events:
        f = lambda x: (x * 3).tanh()  # noqa: E731
        check(f, [torch.randn(7, 3)])
        check(f, [torch.randn(7, 3)])
    assert "cache_hit" in [e.name for e in events]


def test_input_mutation_is_written_back():
    def f(x, y):
        x.add_(1)
        return x * y
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    rt = compile_fn(f, [a.clone(), b])
    a1, a2 = a.clone(), a.clone()
    ref = f(a1, b)
    out = rt(a2, b)
    assert_same(out, ref)
    assert_same(a2, a1)


@pytest.mark.parametrize("mode", ["accuracy", "runtime_error", "compile_error"])
def test_inject_relu_bug(mode):
    f = lambda x: torch.relu(x) * 2  # noqa: E731
    x = torch.randn(3, 4)
    with config.patch(**{"testing.inject_relu_bug": mode}):
        if mode == "compile_error":
            with pytest.raises(Exception, match="compil"):
                compile_fn(f, [x])
            return
        rt = compile_fn(f, [x])
        if mode == "runtime_error":
            with pytest.raises(RuntimeError, match="relu"):
                rt(x)
        else:
            assert not torch.allclose(rt(x), f(x))
            torch.testing.assert_close(rt(x), (x + 1) * 2)


def test_unsupported_device_code_runs_eagerly():
    # a graph whose lowering hits an unsupported construct still gives eager results
    rt = compile_fn(lambda x: torch.fft.fft(x).real * 2, [torch.randn(8)])
    x = torch.randn(8)
    torch.testing.assert_close(rt(x), torch.fft.fft(x).real * 2)


def test_cache_key_includes_constant_shapes():
    # same graph code, same inputs, different weight shapes: two different compiled graphs
    x = torch.randn(4, 8)
    outs = []
    for width in (16, 32):
        m = torch.nn.Linear(8, width).eval()
        with torch.no_grad():
            rt = compiler.backend(torch.fx.symbolic_trace(torch.nn.Sequential(m)), [x])
            assert_same(rt(x), m(x))
        outs.append(rt.compiled.key)
    assert outs[0] != outs[1]


@pytest.mark.parametrize("fusion", [True, False])
def test_write_back_runs_after_every_reader(fusion):
    # outputs realized at the end still read the input's old value (the write-back runs last)
    def f(x, y):
        x.add_(1)
        return x * y, x.t() * 2
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with config.patch(**{"backend.fusion": fusion}):
        rt = compile_fn(f, [a.clone(), b])
    a1, a2 = a.clone(), a.clone()
    ref = f(a1, b)
    out = rt(a2, b)
    assert_same(out, ref)
    assert_same(a2, a1)


def test_cpp_compiler_crash_is_retried_serial_and_unvectorized(tmp_path, monkeypatch):
    """GCC 12's vectorizer crashed ("internal compiler error") on a fuzz kernel (400205): the
    build is retried without OpenMP and auto-vectorization, logged, and the kernel runs."""
    from tracetorch.compiler.backend.runtime import cpp_build
    real_run = subprocess.run
    calls = []

    def crashing_once(cmd, *args, **kwargs):
        if "-shared" in cmd:          # the builds (not the compiler's --version)
            calls.append(list(cmd))
            if len(calls) == 1:
                return subprocess.CompletedProcess(cmd, 1, "", "x.cpp: internal compiler error: in vect_get_vec_defs")
        return real_run(cmd, *args, **kwargs)
    monkeypatch.setattr(cpp_build.subprocess, "run", crashing_once)
    monkeypatch.setattr(cpp_build, "cache_dir", lambda: str(tmp_path))
    source = ('extern "C" int tt_answer() { int s = 0;\n#pragma omp simd reduction(+:s)\n'
              'for (int i = 0; i < 7; i++) s += i;\nreturn s; }\n')
    with logs.testing.capture(names={"cpp_compiler_crashed"}, level=logging.WARNING) as crashed:
        lib = cpp_build.load_library(source)
    assert lib.tt_answer() == 21
    assert len(crashed) == 1 and "-fopenmp" not in calls[1] and "-fno-tree-vectorize" in calls[1]
