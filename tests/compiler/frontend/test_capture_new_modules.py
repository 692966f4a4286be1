"""nn.Modules created inside the compiled frame (frontend/new_modules.py): built without a
graph break when their construction is nn.Module.__init__ alone, rebuilt at runtime when they
escape; anything else stays a graph break with its reason."""
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import CountingBackend


class Scale(torch.nn.Module):
    def forward(self, x):
        self.factor = 3
        return x * self.factor


class WithInit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)     # uses the RNG: not built at trace time

    def forward(self, x):
        return self.lin(x)


def _run(fn, *args):
    compiler.reset()
    backend = CountingBackend()
    explain = compiler.explain(fn)(*args)
    compiler.reset()
    return compiler.compile(fn, backend=backend)(*args), backend, explain


def test_module_escapes_rebuilt_with_its_attributes():
    def f(x):
        m = Scale()
        return m(x) + 1, m

    x = torch.randn(3, 4)
    (got, m), backend, report = _run(f, x)
    expected, _ = f(x)
    torch.testing.assert_close(got, expected)
    assert type(m) is Scale and m.factor == 3 and m.training
    assert backend.graphs == 1 and report.graph_break_count == 0


def test_module_with_own_init_still_breaks_with_reason():
    def f(x):
        return WithInit()(x) * 2

    x = torch.randn(2, 4)
    report = compiler.explain(f)(x)
    compiler.reset()
    torch.manual_seed(0)       # the Linear's weights come from the RNG, in both runs alike
    got = compiler.compile(f, backend="eager")(x)
    torch.manual_seed(0)
    torch.testing.assert_close(got, f(x))
    assert report.graph_break_count >= 1
    assert any("WithInit" in str(r.reason) for r in report.break_reasons)


def test_training_flag_assignment_breaks():
    class Toggle(torch.nn.Module):
        def forward(self, x):
            return x + 1

    def f(x):
        m = Toggle()
        m.training = False
        return m(x)

    x = torch.randn(2)
    got, _, report = _run(f, x)
    torch.testing.assert_close(got, f(x))
    assert report.graph_break_count == 1
