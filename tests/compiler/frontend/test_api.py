"""The public API: compile (functions, decorators, modules, callables), backends, bad usage.

Capture is replaced by the corpus stand-in (runs the function as is, guards its arguments), so
these test the API surface independently of bytecode capture.
"""
import sys
import types

import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler import backends
from tracetorch.compiler.errors import CompilerError, InvalidUsageError, UnknownBackendError
from tracetorch.compiler.frontend import eval_frame
from tests.compiler.frontend.corpus.stand_in import StandIn


@pytest.fixture
def capture(monkeypatch):
    stand_in = StandIn()
    monkeypatch.setattr(eval_frame, "capture_impl", stand_in)
    compiler.reset()
    yield stand_in
    compiler.reset()


def f(x, y=1.0):
    return x * y + 1


def test_plain_and_decorator_forms(capture):
    x = torch.randn(3)
    torch.testing.assert_close(compiler.compile(f, backend="eager")(x), f(x))

    @compiler.compile
    def g(x):
        return x.sin()

    @compiler.compile(backend="eager", fullgraph=True)
    def h(x):
        return x.cos()

    torch.testing.assert_close(g(x), x.sin())
    torch.testing.assert_close(h(x), x.cos())
    assert g.__name__ == "g" and g.__wrapped__.__name__ == "g"
    assert [name for name, _, _ in capture.calls] == ["g", "h"] or len(capture.calls) == 3


def test_module_wrapper_forwards_attributes_and_state_dict(capture):
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    m.custom = "hello"
    cm = compiler.compile(m, backend="eager")
    x = torch.randn(2, 4)
    torch.testing.assert_close(cm(x), m(x))
    assert isinstance(cm, torch.nn.Module) and cm.custom == "hello" and cm[0] is m[0]
    assert list(cm.state_dict()) == list(m.state_dict()) == ["0.weight", "0.bias"]
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    fresh.load_state_dict(cm.state_dict())
    cm.load_state_dict(fresh.state_dict())
    assert [n for n, _ in cm.named_parameters()] == ["0.weight", "0.bias"]
    cm.eval()
    assert not m.training                       # train()/eval() reach the original module
    assert capture.calls[0][0] == "forward"


def test_module_with_instance_forward(capture):
    m = torch.nn.Linear(4, 4)
    m.forward = lambda x: x * 3
    torch.testing.assert_close(compiler.compile(m, backend="eager")(torch.ones(2)), torch.full((2,), 3.0))


def test_callable_object_partial_and_builtin(capture):
    class Doubler:
        def __call__(self, x):
            return x * 2

    import functools
    x = torch.randn(3)
    torch.testing.assert_close(compiler.compile(Doubler(), backend="eager")(x), x * 2)
    torch.testing.assert_close(compiler.compile(functools.partial(f, y=3.0), backend="eager")(x), f(x, 3.0))
    torch.testing.assert_close(compiler.compile(torch.sin, backend="eager")(x), torch.sin(x))


def test_bound_method(capture):
    class A:
        k = 2.0

        def run(self, x):
            return x * self.k

    a = A()
    x = torch.randn(3)
    torch.testing.assert_close(compiler.compile(a.run, backend="eager")(x), x * 2)


@pytest.mark.parametrize("bad, match", [
    (3, "got int: 3. It is not callable"),
    ("f", "got str: 'f'. It is not callable"),
    (torch.nn.Linear, "Pass an instance of the class, not the class itself"),
])
def test_non_callable_is_a_clear_error(bad, match):
    with pytest.raises(InvalidUsageError, match=match):
        compiler.compile(bad)


def test_bad_options_are_clear_errors():
    with pytest.raises(UnknownBackendError, match="Valid backends: 'default', 'eager', 'aot_eager', 'inductor'"):
        compiler.compile(f, backend="nope")
    with pytest.raises(UnknownBackendError, match="Did you mean 'eager'"):
        compiler.compile(f, backend="eagre")
    with pytest.raises(UnknownBackendError, match="must be a name"):
        compiler.compile(f, backend=3)
    with pytest.raises(InvalidUsageError, match="dynamic= must be None"):
        compiler.compile(f, dynamic="yes")
    with pytest.raises(InvalidUsageError, match="fullgraph= must be True or False"):
        compiler.compile(f, fullgraph=1)
    with pytest.raises(InvalidUsageError, match="options= must be a dict"):
        compiler.compile(f, options=["x"])
    with pytest.raises(Exception, match="frontend"):
        compiler.compile(f, options={"frontend.no_such_option": 1})
    assert issubclass(InvalidUsageError, CompilerError) and issubclass(InvalidUsageError, TypeError)
    with pytest.raises(InvalidUsageError, match="not callable"):
        compiler.explain(3)


def test_custom_backend_receives_graph_contract(capture):
    seen = []

    def my_backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    assert backends.lookup_backend(my_backend) is my_backend
    assert backends.lookup_backend("eager") is backends.eager


def test_eager_backend_runs_graph_as_is():
    gm = torch.fx.symbolic_trace(lambda x: x.relu() + 1)
    x = torch.randn(4)
    torch.testing.assert_close(backends.lookup_backend("eager")(gm, [x])(x), x.relu() + 1)


def test_optimizer_step_dispatch(monkeypatch):
    p = torch.nn.Parameter(torch.randn(3))
    opt = torch.optim.SGD([p], lr=0.1)
    calls = []
    fake = types.ModuleType("tracetorch.compiler.optim")
    fake.compile_optimizer_step = lambda step, backend, options: calls.append((step, backend, options)) \
        or "compiled-step"
    monkeypatch.setitem(sys.modules, "tracetorch.compiler.optim", fake)
    assert compiler.compile(opt.step, backend="eager") == "compiled-step"
    assert calls[0][1] == "eager" and calls[0][0] == opt.step and calls[0][2] is None
    # mode= and options= reach the optimizer step (its update graphs compile under them)
    compiler.compile(opt.step, mode="reduce-overhead", options={"backend.cache_enabled": False})
    assert calls[1][2] == {"backend.cudagraphs": True, "backend.cache_enabled": False}


def test_optimizer_step_falls_back_without_compiler_optim(monkeypatch, capture):
    monkeypatch.setitem(sys.modules, "tracetorch.compiler.optim", None)      # import fails
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    opt = torch.optim.SGD([p], lr=0.5)
    step = compiler.compile(opt.step, backend="eager")
    step()
    torch.testing.assert_close(p.detach(), torch.full((3,), 0.5))


def test_import_compiler_does_not_import_backend():
    import subprocess
    code = ("import sys; from tracetorch import compiler; assert 'tracetorch.compiler.backend' not in sys.modules; "
            "compiler.compile(lambda x: x, backend='eager'); "
            "assert 'tracetorch.compiler.backend' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": "."})
    assert out.stdout.strip() == "ok", out.stderr


def test_compiling_a_compiled_object_starts_from_the_original(capture):
    g = compiler.compile(f, backend="eager")
    h = compiler.compile(g, backend="eager", dynamic=False)
    assert h is not g and h.__wrapped__ is f
    assert compiler.compile(g) is not g
    m = torch.nn.Linear(2, 2)
    cm = compiler.compile(compiler.compile(m, backend="eager"), backend="eager")
    assert cm._orig_mod is m
    x = torch.randn(2)
    torch.testing.assert_close(h(x), f(x))
    torch.testing.assert_close(cm(x), m(x))


def test_module_forward_hooks_run_around_compiled_forward(capture):
    m = torch.nn.Linear(3, 3)
    seen = []
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m.register_forward_hook(lambda mod, args, out: seen.append(out.shape) or out + 1)
    x = torch.randn(2, 3)
    expected = m(x)
    got = compiler.compile(m, backend="eager")(x)
    torch.testing.assert_close(got, expected)
    assert seen == [torch.Size([2, 3])] * 2


def test_generator_functions_run_as_they_are(capture):
    def gen(x):
        yield x * 2

    g = compiler.compile(gen, backend="eager")
    x = torch.randn(2)
    torch.testing.assert_close(next(g(x)), x * 2)
    assert capture.calls == []
