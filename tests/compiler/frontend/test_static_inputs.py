"""The compiled graph's module parameters are read once (static_inputs.py), not walked per call.

Every call is compared with eager, across the mutations that must be seen: a replaced parameter,
a replaced submodule, in-place updates, train/eval, properties (read every call), and roots that
are not modules (a new list of tensors each call)."""
import logging
import types

import pytest
import torch
from torch import nn

from tracetorch import compiler
from tracetorch import logs
from tracetorch.compiler.frontend.static_inputs import StaticInputCall


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self._gain = torch.ones(4)

    @property
    def gain(self):                    # not a static read: runs on every call
        return self._gain

    def forward(self, x):
        x = self.fc(x)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x * self.gain


@pytest.fixture
def walks():
    with logs.testing.capture(names={"static_inputs_resolved"}, level=logging.DEBUG,
                              artifacts="all") as got:
        yield got


def _check(opt, model, x):
    with torch.no_grad():
        torch.testing.assert_close(opt(x), model(x))


def test_parameters_read_once_and_mutations_seen(walks):
    compiler.reset()
    torch.manual_seed(0)
    model = Net().eval()
    opt = compiler.compile(model, backend="eager")
    x = torch.randn(3, 4)
    for _ in range(4):
        _check(opt, model, x)
    assert len(walks) == 1, "the parameter chains were walked more than once without a mutation"

    with torch.no_grad():
        model.fc.weight.mul_(2)          # in place: same Parameter object, new values
    _check(opt, model, x)
    assert len(walks) == 1

    model.fc.weight = nn.Parameter(torch.randn(4, 4))      # a new Parameter: setattr is watched
    _check(opt, model, x)
    model.layers[1] = nn.Linear(4, 4)                       # a new submodule in the container
    _check(opt, model, x)
    _check(opt, model, x)
    assert len(walks) >= 2

    model._gain = torch.full((4,), 3.0)  # behind a property: read on every call
    _check(opt, model, x)


class WithConfig(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.cfg = types.SimpleNamespace(bias=torch.zeros(4))   # a plain object, not a module

    def forward(self, x):
        return self.fc(x) + self.cfg.bias


def test_reads_through_plain_objects_run_every_call():
    compiler.reset()
    model = WithConfig().eval()
    opt = compiler.compile(model, backend="eager")
    x = torch.randn(2, 4)
    _check(opt, model, x)
    model.cfg.bias = torch.full((4,), -1.0)     # no module setattr: only a per-call read sees it
    _check(opt, model, x)


def test_a_module_mutated_on_every_call_stops_being_cached(walks):
    compiler.reset()
    torch.manual_seed(0)
    model = Net().eval()
    opt = compiler.compile(model, backend="eager")
    x = torch.randn(3, 4)
    for i in range(StaticInputCall.MAX_WALKS + 6):
        model.fc.weight = nn.Parameter(torch.randn(4, 4))
        _check(opt, model, x)
    assert len(walks) <= StaticInputCall.MAX_WALKS + 1


def test_non_module_roots_are_read_every_call(walks):
    compiler.reset()

    def f(xs):
        return xs[0] * 2 + xs[1]

    opt = compiler.compile(f, backend="eager")
    for _ in range(3):
        xs = [torch.randn(5), torch.randn(5)]        # a new list each call
        torch.testing.assert_close(opt(xs), f(xs))
    assert len(walks) <= 1


def test_default_backend_and_train_eval_switch():
    compiler.reset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2)).eval()
    opt = compiler.compile(model)
    x = torch.randn(3, 4)
    _check(opt, model, x)
    model.train()
    torch.manual_seed(1)
    with torch.no_grad():
        out = opt(x)
    torch.manual_seed(1)
    with torch.no_grad():
        ref = model(x)
    torch.testing.assert_close(out, ref)
    model.eval()
    _check(opt, model, x)


def test_a_module_reached_through_a_wrappers_args_is_read_once(walks):
    """A forward behind a decorator's `wrapped(*args, **kwargs)` (transformers wraps many): the
    parameters come from `args[0]`, a new tuple each call; the module it holds is the root, so
    its chains are walked once, and a replaced parameter or another module is still seen."""
    import functools
    compiler.reset()
    torch.manual_seed(0)

    def passes_through(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapped

    forward = passes_through(Net.forward)
    model, other = Net().eval(), Net().eval()
    opt = compiler.compile(forward, backend="eager")
    x = torch.randn(3, 4)
    for _ in range(4):
        with torch.no_grad():
            torch.testing.assert_close(opt(model, x=x), model(x))
    assert len(walks) == 1, "the parameter chains were walked more than once without a mutation"
    assert walks[0].fields["resolved"] == walks[0].fields["inputs"] - 1, "only x should be read per call"
    model.fc.weight = nn.Parameter(torch.randn(4, 4))
    with torch.no_grad():
        torch.testing.assert_close(opt(model, x=x), model(x))
        torch.testing.assert_close(opt(other, x=x), other(x))
        torch.testing.assert_close(opt(model, x=x), model(x))
