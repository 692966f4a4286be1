"""Float scalar graph inputs (SymFloat from the frontend's automatic dynamic, or a Python float
given to the backend with dynamic=True) are compiled, not run eagerly: the value reaches C++
kernels as a double argument, Triton kernels as an fp64 argument, ATen fallbacks as a Python
float, and one compiled graph serves every value (no recompile, no eager run, no value in the
cache key or in the input check's memo).

Both code generators run on CPU tensors: C++, and Triton under TRITON_INTERPRET=1 (as in
test_triton_backend.py). Every result is compared with eager.
"""
import logging
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tracetorch import compiler  # noqa: E402
import tracetorch.compiler.backend as backend  # noqa: E402
from tracetorch import logs  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from tests.compiler.backend.cpp_test_utils import assert_same, compiled_graph, fallback_count  # noqa: E402

VALUES = (0.5, -1.75, 3.0e-3, 1.0, 3.7, 1.0 / 3.0)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # CUDA: real Triton; CPU: C++ or interpreter

SKIPPED = ("compiled_graph_skipped", "graph_runs_eagerly", "aot_runs_eagerly", "backend_compile_failed")


@pytest.fixture(params=["cpp", "triton"])
def codegen(request):
    # the disk cache off: a hit would skip the lowering whose events the tests check
    patch = {"backend.cpu_codegen": request.param, "backend.cache_enabled": False}
    if request.param == "cpp" and DEVICE != "cpu":
        # CUDA tensors always go to Triton; run the C++ variant on CPU tensors there
        with config.patch(**patch):
            yield "cpp", "cpu"
        return
    with config.patch(**patch):
        yield request.param, DEVICE


@pytest.fixture
def events():
    with logs.testing.capture(level=logging.DEBUG, artifacts={"perf_hint", "perf_hints", "recompile"}) as got:
        yield got


def names(events):
    return [e.name for e in events]


def compile_with_float(fn, inputs):
    """The backend on a symbolic_trace graph (or an fx.GraphModule), floats as runtime scalars
    (dynamic=True)."""
    gm = fn if isinstance(fn, torch.fx.GraphModule) else torch.fx.symbolic_trace(fn)
    return backend(gm, list(inputs), dynamic=True)


def check_values(fn, make_inputs, codegen, events, values=VALUES):
    """Compile once with values[0], run every value through the same compiled graph, compare
    each with eager, and check that nothing ran eagerly."""
    lang, device = codegen
    rt = compile_with_float(fn, make_inputs(values[0], device))
    graph = compiled_graph(rt)
    if lang == "triton":
        assert "@triton.jit" in graph.code and ": tl.float64" in graph.code, graph.code
    else:
        assert 'extern "C" int ' in graph.code and "double fv" in graph.code, graph.code
    for v in values:
        inputs = make_inputs(v, device)
        assert_same(rt(*inputs), fn(*inputs))
    assert not set(names(events)) & set(SKIPPED), [e for e in events if e.name in SKIPPED]
    return rt


def tensor(shape, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype).to(device)


DTYPES = [torch.float32, torch.float64]


# ------------------------------------------------------------------ pointwise

@pytest.mark.parametrize("dtype", DTYPES)
def test_pointwise_math(codegen, events, dtype):
    def f(x, s):
        return torch.sin(x) * s + x / s - s
    check_values(f, lambda s, d: [tensor((7, 13), dtype, d), s], codegen, events)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_arithmetic_is_computed_in_the_wrapper(codegen, events, dtype):
    def f(x, s):
        t = s * 2.5 - 1.0 / s      # Python float math on the SymFloat: the wrapper does it
        return x * t + (s + 0.1) * (s - 0.2)
    rt = check_values(f, lambda s, d: [tensor((33,), dtype, d), s], codegen, events)
    assert "# float scalar" in compiled_graph(rt).code


def test_ints_of_a_float(codegen, events):
    import math

    def f(x, s):   # s // 0.3 traces as float(math.floor(s / 0.3)); all computed by the wrapper
        return x * (s // 0.3) + x * math.floor(s) - math.ceil(s * 3)
    rt = check_values(f, lambda s, d: [tensor((20,), torch.float32, d), s], codegen, events)
    assert "math.floor(" in compiled_graph(rt).code


def test_torch_tensor_of_a_float_stays_symbolic(codegen, events):
    import operator
    # x + torch.tensor(s, device=x.device) * 2, built by hand (symbolic_trace cannot trace
    # torch.tensor of a Proxy). torch.tensor reads a C++ double, which would specialize the
    # SymFloat: the aot stage writes it as scalar_tensor
    g = torch.fx.Graph()
    x, s = g.placeholder("x"), g.placeholder("s")
    t = g.call_function(torch.tensor, (s,), {"device": torch.device(codegen[1])})
    g.output(g.call_function(operator.add, (x, g.call_function(operator.mul, (t, 2)))))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    check_values(gm, lambda s, d: [tensor((9,), torch.float32, d), s], codegen, events)
    assert "aot_scalar_tensor_rewrite" in names(events)
    assert "float_input_specialized" not in names(events)


def test_integer_tensor_times_float(codegen, events):
    def f(x, s):
        return x * s, torch.where(x > 0, s, x.float())
    check_values(f, lambda s, d: [torch.arange(-6, 6, device=d).reshape(3, 4), s], codegen, events)


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_floats_and_clamp(codegen, events, dtype):
    def f(x, lo, hi):
        return torch.clamp(x, min=lo, max=hi) * hi
    lang, device = codegen
    rt = compile_with_float(f, [tensor((5, 9), dtype, device), -0.25, 0.75])
    compiled_graph(rt)
    for lo, hi in ((-0.25, 0.75), (-1.5, 0.1), (0.3, 2.0)):
        x = tensor((5, 9), dtype, device)
        assert_same(rt(x, lo, hi), f(x, lo, hi))
    assert not set(names(events)) & set(SKIPPED)


# ------------------------------------------------------------------ reductions

@pytest.mark.parametrize("dtype", DTYPES)
def test_reduction_epilogue(codegen, events, dtype):
    def f(x, s):
        return x.sum(-1) * s + s, (x - x.mean(-1, keepdim=True)) * s
    check_values(f, lambda s, d: [tensor((6, 40), dtype, d), s], codegen, events)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_with_temperature(codegen, events, dtype):
    def f(x, temperature):
        return torch.softmax(x / temperature, -1)
    check_values(f, lambda s, d: [tensor((4, 50), dtype, d), s], codegen, events, values=(0.5, 2.0, 0.7, 1.3))


# ------------------------------------------------------------------ ATen fallback and extern

def payloads(events, name):
    return [str(e.payload() if callable(e.payload) else e.payload) for e in events if e.name == name]


@pytest.mark.parametrize("dtype", DTYPES)
def test_op_that_needs_the_value_falls_back_alone(codegen, events, dtype):
    def f(x, s):
        return torch.constant_pad_nd(x * s, [1, 2], s).cos()   # its lowering reads the value in Python
    rt = check_values(f, lambda s, d: [tensor((3, 5), dtype, d), s], codegen, events)
    assert fallback_count(rt) == 1, compiled_graph(rt).code
    assert any("symbolic float" in p for p in payloads(events, "perf_hints"))


def test_float_specialized_by_a_double_argument_stays_correct(events):
    # F.pad takes `float? value` (a C++ double): tracing specializes the SymFloat. The compiled
    # graph then serves that value only, logged; other values run eagerly, never a wrong result.
    def f(x, s):
        return F.pad(x * s, (1, 2), value=s).cos()
    x = torch.randn(3, 5)
    with config.patch(**{"backend.cpu_codegen": "cpp"}):
        rt = compile_with_float(f, [x, 0.5])
    compiled_graph(rt)
    for v in (0.5, 1.5, -2.0):
        assert_same(rt(x, v), f(x, v))
    assert "float_input_specialized" in names(events)
    assert any("specialized" in p for p in payloads(events, "perf_hints"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_extern_kernel_gets_the_float(codegen, events, dtype):
    def f(b, x, w, s):
        return torch.addmm(b, x, w, beta=s, alpha=2.0) * s
    lang, device = codegen
    mk = lambda s, d: [tensor((6,), dtype, d, 1), tensor((4, 5), dtype, d, 2),  # noqa: E731
                       tensor((5, 6), dtype, d, 3), s]
    check_values(f, mk, codegen, events, values=(0.5, -2.0, 1.25))


# ------------------------------------------------------------------ cache key, input check

def test_cache_key_and_input_check_do_not_hold_the_value(events):
    from tracetorch.compiler.aot.inference import InferenceRuntime

    def f(x, s):
        return x * s + 1.0
    x = torch.randn(16)
    with config.patch(**{"backend.cpu_codegen": "cpp"}):
        a = compile_with_float(f, [x, 0.5])
        b = compile_with_float(f, [x, 4.25])
    assert isinstance(a, InferenceRuntime)
    assert compiled_graph(a).key == compiled_graph(b).key
    for v in VALUES:
        assert_same(a(x, v), f(x, v))
    # one memo entry for every float value (none of the input check's guards reads it)
    assert len(a.check.memo) == 1
    assert not set(names(events)) & set(SKIPPED)


def test_output_code_runs_standalone(tmp_path):
    import subprocess
    import sys

    def f(x, s):
        return torch.cos(x) * (s * 3.0)
    with config.patch(**{"backend.cpu_codegen": "cpp"}):
        rt = compile_with_float(f, [torch.randn(8), 0.25])
    p = tmp_path / "out.py"
    p.write_text(compiled_graph(rt).code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(8,)" in r.stdout


# ------------------------------------------------------------------ end to end

def test_compile_end_to_end_one_graph_for_every_value(events):
    def f(x, s):
        y = (x * 2).sum() * s
        return torch.sin(x) * s + y

    compiler.reset()
    opt = compiler.compile(f)
    x = torch.randn(8)
    with config.patch(**{"backend.cache_enabled": False}):   # lower it here: its events are checked
        for s in (0.5, 1.5, 2.5, -0.75, 10.0):
            assert_same(opt(x, s), f(x, s))
    recompiles = [e for e in events if e.name == "recompile"]
    assert len(recompiles) == 1, recompiles   # automatic dynamic: the float's first change only
    assert "float_scalar_input" in names(events)
    assert not set(names(events)) & set(SKIPPED), [e for e in events if e.name in SKIPPED]


def test_input_check_evaluates_guards_on_a_float():
    # a guard the trace put on the float's symbol is checked at run time with its value, and the
    # memo is keyed by value then (unguarded floats share one entry: see the cache-key test)
    import sympy
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from tracetorch.compiler.aot.inference import InputCheck

    env = ShapeEnv()
    s = env.create_symfloatnode(env.create_unspecified_symbol(0.5, ConstantSource("s")), hint=0.5)
    sym = s.node.expr

    class Guard:
        expr = sympy.Gt(sym, 0)
    check = InputCheck([torch.empty(3), s], [Guard()], env)
    assert check([torch.empty(3), 0.5]) == "" and check([torch.empty(3), 7.25]) == ""
    assert "fails" in check([torch.empty(3), -1.0])
    assert "expected a float" in check([torch.empty(3), 2])
    assert len(check.memo) == 4


class _Scaled(torch.nn.Module):
    """Python floats on a module: torch.compile(dynamic=True) passes each as a 0-d tensor input
    whose value the graph reads with .item()."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.scale = 0.5

    def forward(self, x):
        return self.norm(x) * self.scale


def test_dynamo_dynamic_module_floats_compile_and_follow_their_values(events):
    """The .item() of such an input (its fake keeps the symbol Dynamo made) is read by the
    wrapper: the graph compiles instead of running eagerly (it raised DataDependentOutputException
    in aot, then 'extern call with output SymFloat' in the backend). LayerNorm's eps becomes a
    C++ double in the trace: Dynamo guards it and recompiles when it changes."""
    torch._dynamo.reset()
    model = _Scaled()
    opt = torch.compile(model, backend=compiler.backend, dynamic=True)
    with config.patch(**{"backend.cache_enabled": False}), torch.no_grad():
        for n, scale, eps in ((4, 0.5, 1e-5), (7, 2.5, 1e-5), (7, 2.5, 0.25), (3, -1.0, 0.25)):
            model.scale, model.norm.eps = scale, eps
            x = torch.randn(n, 16)
            assert_same(opt(x), model(x))
    torch._dynamo.reset()
    assert "input_item_read" in names(events)
    assert not set(names(events)) & set(SKIPPED), [e for e in events if e.name in SKIPPED]
