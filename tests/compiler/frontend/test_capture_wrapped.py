"""Functions decorated with functools.wraps: the frame is the wrapper's (*args, **kwargs) code.

Regression test: Hugging Face models wrap forward() this way (`can_return_tuple`); binding the
call against the wrapped signature instead left `kwargs` unbound in the resume function.
"""

from functools import wraps

import torch

from tracetorch import compiler


def returns_plain(func):
    @wraps(func)
    def wrapper(self, *args, **kwargs):
        plain = self.config_plain if hasattr(self, "config_plain") else False
        plain = kwargs.pop("plain", plain)
        out = func(self, *args, **kwargs)
        return out["y"] if plain else out
    return wrapper


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config_plain = False
        self.lin = torch.nn.Linear(4, 4)

    @returns_plain
    def forward(self, x, scale=1.0):
        return {"y": self.lin(x).relu() * scale}


def test_wraps_decorated_forward_matches_eager():
    torch.manual_seed(0)
    model = Model()
    compiled = compiler.compile(model, backend="eager")
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x)["y"], model(x)["y"])
    torch.testing.assert_close(compiled(x, scale=2.0)["y"], model(x, scale=2.0)["y"])
    torch.testing.assert_close(compiled(x, plain=True), model(x, plain=True))
    report = compiler.explain(model)(x)
    assert report.graph_break_count == 0
    assert report.graph_count == 1
