"""Guards on the module tree: resolved once, fingerprinted for mutation (static_sources.py,
mutation.py).

A compiled module's guards read the module tree once, when built; each call checks a fingerprint
of what was read (nothing in torch is patched), and a mutation makes exactly the cache entries
that read what changed stale at their next call: they re-check every guard by walking the
sources, and recompile only if one fails, with the mutation and the failing guard in the
`recompiles` log. Every result is compared with eager.
"""
import logging

import pytest
import torch
from torch import nn

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import CountingBackend
from tracetorch import logs
from tracetorch.compiler.frontend import mutation


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.norm = nn.LayerNorm(4)
        self.drop = nn.Dropout(0.5)
        self.scale = 2.0                 # a plain float attribute the forward reads

    def forward(self, x):
        x = self.fc(x)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.drop(self.norm(x)) * self.scale


@pytest.fixture
def events():
    with logs.testing.capture(level=logging.DEBUG, artifacts={"recompiles", "recompile"}) as got:
        yield got


def _recompile_texts(events):
    return [e.payload for e in events if e.name == "recompiles"]


def _setup(events):
    compiler.reset()
    torch.manual_seed(0)
    model = Net().eval()
    backend = CountingBackend()
    compiled = compiler.compile(model, backend=backend)
    x = torch.randn(2, 4)
    with torch.no_grad():
        _check(compiled, model, x)
    return model, compiled, backend, x


def _check(compiled, model, x):
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))


def _entries(compiled):
    return compiled._compiled_forward.__func__._tracetorch_cache.entries


def test_unmutated_calls_hit_the_resolved_check_and_skip_module_guards(events):
    model, compiled, backend, x = _setup(events)
    for _ in range(3):
        _check(compiled, model, torch.randn(2, 4))
    assert backend.graphs == 1 and not _recompile_texts(events)
    gs = _entries(compiled)[0].guard_set
    assert not gs.stale and gs.implied > 0
    assert "___r" in gs.source and "self.layers" not in gs.source     # no path is walked


def test_unrelated_mutation_invalidates_nothing(events):
    model, compiled, backend, x = _setup(events)
    gs = _entries(compiled)[0].guard_set
    model.unused = 3                                  # an attribute no guard read
    model.register_buffer("extra", torch.zeros(1))    # a buffer the forward does not use
    model.fc.note = "hello"
    assert not gs.stale
    _check(compiled, model, x)
    assert backend.graphs == 1 and not _recompile_texts(events)


def test_same_metadata_parameter_replaced_revalidates_without_recompiling(events):
    model, compiled, backend, x = _setup(events)
    gs = _entries(compiled)[0].guard_set
    model.fc.weight = nn.Parameter(torch.randn(4, 4))
    assert not gs.unchanged()                        # seen by the next call's fingerprint
    _check(compiled, model, x)                       # the new weight is used, no recompile
    assert backend.graphs == 1 and not gs.stale and gs.rebuilds == 1


def test_training_flag_toggle_recompiles_once_then_both_entries_serve(events):
    model, compiled, backend, x = _setup(events)
    model.train()
    torch.manual_seed(1)
    with torch.no_grad():
        got = compiled(x)
    torch.manual_seed(1)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x))
    assert backend.graphs == 2
    [text] = _recompile_texts(events)
    assert "was mutated: attribute 'training' changed" in text, text
    assert "training" in text and "expected False, actual True" in text, text
    model.eval()
    _check(compiled, model, x)
    model.train()
    model.eval()
    _check(compiled, model, x)
    assert backend.graphs == 2 and len(_recompile_texts(events)) == 1


@pytest.mark.parametrize("mutate, reason", [
    (lambda m: setattr(m, "fc", nn.Linear(4, 4)),
     "module L['self'] was mutated: attribute 'fc' changed; identity mismatch for 'self.fc'"),
    (lambda m: m.layers.append(nn.Linear(4, 4)),
     "module L['self'].layers was mutated: its submodules or parameters changed"),
    (lambda m: m.layers.insert(0, nn.Linear(4, 4)),
     "module L['self'].layers was mutated: its submodules or parameters changed"),
    (lambda m: m.layers.__delitem__(0), "module L['self'].layers was mutated"),
    (lambda m: setattr(m, "scale", 3.0),
     "module L['self'] was mutated: attribute 'scale' changed; L['self'].scale == 2.0: 'self.scale' value mismatch. "
     "expected 2.0, actual 3.0"),
    (lambda m: m.norm.register_parameter("weight", nn.Parameter(torch.randn(4), requires_grad=False)),
     "module L['self'].norm was mutated: attribute 'weight' changed; tensor 'self.norm.weight' "
     "requires_grad mismatch"),
    # .to() converts parameters in place (same objects): the tensor check catches it
    (lambda m: m.to(torch.float64), "dtype mismatch. expected Float, actual Double"),
    (lambda m: delattr(m.norm, "bias"), "module L['self'].norm was mutated: attribute 'bias' changed"),
])
def test_each_mutation_invalidates_and_recompiles_with_a_readable_reason(events, mutate, reason):
    model, compiled, backend, x = _setup(events)
    mutate(model)
    if next(model.parameters()).dtype == torch.float64:
        x = x.double()
    if not hasattr(model.norm, "bias"):
        model.norm.bias = None        # LayerNorm reads self.bias: keep the eager model runnable
    _check(compiled, model, x)
    assert backend.graphs == 2
    [text] = _recompile_texts(events)
    assert reason in text, text
    _check(compiled, model, torch.randn(*x.shape, dtype=x.dtype))   # the new entry now hits
    assert backend.graphs == 2


def test_in_place_tensor_changes_are_still_guarded_per_call(events):
    model, compiled, backend, x = _setup(events)
    gs = _entries(compiled)[0].guard_set
    model.fc.weight.requires_grad_(False)             # no setattr: caught by the tensor check
    assert not gs.stale
    _check(compiled, model, x)
    assert backend.graphs == 2
    [text] = _recompile_texts(events)
    assert "tensor 'self.fc.weight' requires_grad mismatch" in text, text
    with torch.no_grad():
        model.layers[0].weight.data = torch.randn(4, 4, dtype=torch.float64).float().t()  # stride
    _check(compiled, model, x)
    assert backend.graphs == 3
    assert "tensor 'self.layers[0].weight' stride mismatch" in _recompile_texts(events)[1]


def test_forward_hook_added_later_is_seen(events):
    model, compiled, backend, x = _setup(events)
    handle = model.fc.register_forward_hook(lambda mod, inp, out: out * 10)
    _check(compiled, model, x)
    handle.remove()
    _check(compiled, model, x)
    assert backend.graphs >= 2


def test_entries_that_keep_being_mutated_fall_back_to_walking(events):
    model, compiled, backend, x = _setup(events)
    gs = _entries(compiled)[0].guard_set
    for i in range(gs.MAX_REBUILDS + 2):
        model.fc.weight = nn.Parameter(torch.randn(4, 4))
        _check(compiled, model, x)
    assert backend.graphs == 1
    assert not gs.static_modules and gs.check is gs.walking_check()
    model.fc.weight = nn.Parameter(torch.randn(4, 4))
    _check(compiled, model, x)
    assert backend.graphs == 1


def test_fingerprint_is_per_module_and_per_name():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    fp = mutation.Fingerprint([(a, "a", {"weight", "missing"})])
    b.weight = nn.Parameter(torch.randn(2, 2))        # another module
    a.bias = nn.Parameter(torch.randn(2))             # another name
    assert fp.unchanged() and fp.describe() is None
    a.missing = 1                                     # a name that was absent appears
    assert not fp.unchanged() and "'missing'" in fp.describe()
    del a.missing
    assert fp.unchanged()
    a.weight = nn.Parameter(torch.randn(2, 2))
    assert not fp.unchanged() and fp.describe() == "module a was mutated: attribute 'weight' changed"


def test_compiling_patches_nothing_in_torch():
    """Compiling and running modules and functions leaves every class attribute of torch.nn.Module
    (and its subclasses used here), torch.Tensor and builtins as it was."""
    import builtins
    import collections
    import functools
    import itertools
    import operator
    import torch.nn.functional as F
    watched = [nn.Module, nn.Linear, nn.ModuleList, nn.Sequential, nn.ModuleDict, nn.LayerNorm,
               nn.Softmax, torch.Tensor, torch._C.TensorBase, torch, F, functools, itertools,
               operator, collections, collections.OrderedDict, dict, list]
    before = {c: dict(vars(c)) for c in watched}
    before_builtins = dict(vars(builtins))
    model = Net().eval()
    compiled = compiler.compile(model, backend="eager")
    _check(compiled, model, torch.randn(2, 4))
    model.fc.weight = nn.Parameter(torch.randn(4, 4))
    _check(compiled, model, torch.randn(2, 4))
    f = compiler.compile(lambda x: torch.nn.Softmax(dim=1)(x) + 1, backend="eager")
    f(torch.randn(2, 3))

    def g(x):
        d = collections.OrderedDict(a=x)
        keys = d.keys()
        d["b"] = functools.reduce(operator.add, itertools.chain([x], [x]))
        return d["b"] * len(keys)
    compiler.compile(g, backend="eager")(torch.randn(2))
    for c in watched:
        after = vars(c)
        changed = sorted(k for k in set(after) | set(before[c]) if after.get(k) is not before[c].get(k))
        assert not changed, (c, changed)
    changed = sorted(k for k in set(vars(builtins)) | set(before_builtins)
                     if vars(builtins).get(k) is not before_builtins.get(k) and k != "_")
    assert not changed, changed
    # and torch.compile still builds modules in traced code afterwards (it failed with
    # "'Softmax' object has no attribute 'dim'" while nn.Module.__setattr__ was replaced)
    # (Dynamo itself patches nn.Module on its first use: checked above, before it runs)
    torch._dynamo.reset()
    out = torch.compile(lambda x: torch.nn.Softmax(dim=1)(x), backend="eager")(torch.ones(2, 3))
    torch.testing.assert_close(out, torch.full((2, 3), 1 / 3))


class Stack(nn.Module):
    """No module reads `training`: toggling it must not touch the cache."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_train_eval_without_training_reads_keeps_the_entry_fresh_and_containers_watched(events):
    compiler.reset()
    model, backend = Stack(), CountingBackend()
    compiled = compiler.compile(model, backend=backend)
    x = torch.randn(2, 4)
    _check(compiled, model, x)
    gs = _entries(compiled)[0].guard_set
    model.train()
    model.eval()
    assert gs.unchanged()
    setattr(model.layers, "2", nn.Linear(4, 4))       # a new item, through plain setattr
    assert not gs.unchanged()
    _check(compiled, model, x)
    assert backend.graphs == 2


def test_a_parameter_replaced_by_an_equal_one_is_a_mutation():
    """The fingerprint compares the objects a resolution read by identity, not with == (a
    faster tuple comparison would): a one-element tensor answers == by value, so a new Parameter
    equal to the old would pass for unchanged, the compiled code would keep reading the old one,
    and an in-place update of the new parameter would not show in the compiled result."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([2.0]))

        def forward(self, x):
            return x * self.w

    m = Scaled()
    fn = compiler.compile(m)
    x = torch.randn(3)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), m(x))
        m.w = nn.Parameter(torch.tensor([2.0]))     # equal value, another object
        fn(x)
        m.w.add_(1.0)
        torch.testing.assert_close(fn(x), m(x))
