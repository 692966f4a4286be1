"""id() of an object that existed before the call, and a bound method's __func__.

Hugging Face's kernel-hub decorator (transformers 5.2x, the `kernels` package) runs this in
every attention forward: `registry[id(fn)] = (wrapper, wrapper.forward.__func__)` with `fn` a
module held in a closure, then publishes the registry through a plain-Python stand-in for a
ContextVar (what `kernels` uses so that compilers can trace it). Both reads were graph breaks;
Dynamo answers id() of a guarded object with a constant (ID_MATCH keeps the object) and
`method.__func__` with the function the method was bound from."""
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import CountingBackend

class Slot:
    """A ContextVar-like holder in plain Python: set() returns the previous value as a token."""

    def __init__(self):
        self.value = None

    def get(self):
        return self.value

    def set(self, value):
        previous, self.value = self.value, value
        return previous

    def reset(self, token):
        self.value = token


_ACTIVE = Slot()


class Scale(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


class Routed(torch.nn.Module):
    """Picks its scale from a registry keyed by id(), as the kernel-hub decorator does."""

    def __init__(self, key, impl):
        super().__init__()
        self.key = key
        self.impl = impl
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        registry = dict(_ACTIVE.get() or {})
        registry[id(self.key)] = (self.impl, self.impl.forward.__func__)
        token = _ACTIVE.set(registry)
        try:
            owner, fn = _ACTIVE.get()[id(self.key)]
            return fn(owner, self.lin(x)).relu()
        finally:
            _ACTIVE.reset(token)


def test_id_of_a_module_and_method_func_trace_as_one_graph():
    torch.manual_seed(0)
    model = Routed(Scale(1.0), Scale(3.0)).eval()
    x = torch.randn(2, 4)
    report = compiler.explain(model)(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    compiled = compiler.compile(model)
    torch.testing.assert_close(compiled(x), model(x))
    assert _ACTIVE.get() is None          # the slot is back to what it was


def test_id_is_guarded_by_identity():
    """The id is a constant of the compiled code: another object there is a recompile, with
    the other object's result."""
    torch.manual_seed(0)
    model = Routed(Scale(1.0), Scale(3.0)).eval()
    backend = CountingBackend()
    compiled = compiler.compile(model, backend=backend)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    model.key = Scale(1.0)
    model.impl = Scale(-2.0)
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.graphs == 2


def made_in_the_frame(x):
    y = x + 1
    seen = {id(y): y}                      # a tensor made while tracing: no id yet
    return seen[id(y)] * 2


def test_id_of_an_object_made_while_tracing_breaks_and_stays_correct():
    x = torch.randn(3)
    report = compiler.explain(made_in_the_frame)(x)
    assert report.graph_break_count >= 1
    assert any("id()" in str(b.reason) for b in report.break_reasons), str(report)
    torch.testing.assert_close(compiler.compile(made_in_the_frame)(x), made_in_the_frame(x))
