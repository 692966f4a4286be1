"""Guards on reads outside the module tree, resolved once and re-checked by identity per call
(static_sources.Slot, mutation.Fingerprint): a module's globals, closure cells, a function's
defaults, a plain object's attributes, class attributes, methods reached through a class, and
hasattr answers. Each case changes what was read after the first call and compares the compiled
result with eager's: the change must be seen (a stale entry re-checks its guards, then reuses
or recompiles), and an unchanged call must not walk the sources.
"""
import types

import torch
from torch import nn

from tracetorch import compiler
from tracetorch.compiler.frontend.cache import _all_caches
from tracetorch.compiler.frontend.static_sources import Slot, StaticSources, slot_read

SCALE = 2.0


class Settings:
    """A plain configuration object, as models keep one (no custom attribute lookup)."""

    def __init__(self):
        self.act = "relu"
        self.shift = 1.0


class Net(nn.Module):
    bias_on = True                      # a class-level plain value the forward reads

    def __init__(self, settings):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.settings = settings

    def activation(self, x):
        return torch.relu(x) if self.settings.act == "relu" else torch.tanh(x)

    def forward(self, x):
        y = self.activation(self.fc(x)) * SCALE
        if self.bias_on:
            y = y + self.settings.shift
        if hasattr(self, "extra"):
            y = y * self.extra
        return y


def _check(compiled, model, x):
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))


def _entries(fn_code):
    return [e for c in list(_all_caches) if c.code is fn_code for e in c.entries]


def _setup():
    compiler.reset()
    torch.manual_seed(0)
    model = Net(Settings()).eval()
    compiled = compiler.compile(model)
    x = torch.randn(3, 4)
    _check(compiled, model, x)
    _check(compiled, model, x)
    return model, compiled, x


def test_unchanged_calls_check_no_resolved_reads_on_the_hot_path():
    model, compiled, x = _setup()
    (entry,) = _entries(Net.forward.__code__)
    source = entry.guard_set.source
    # the settings' values, the class attribute, the method and the global are all resolved
    for text in ("settings", "bias_on", "activation", "SCALE", "hasattr"):
        assert text not in source.split("def ___check_guards")[1], (text, source)
    assert not entry.guard_set.stale


def test_a_plain_objects_attribute_changed_after_compiling_is_seen():
    model, compiled, x = _setup()
    model.settings.act = "tanh"
    _check(compiled, model, x)
    model.settings.shift = -3.0
    _check(compiled, model, x)


def test_a_global_the_forward_reads_changed_after_compiling_is_seen():
    global SCALE
    model, compiled, x = _setup()
    try:
        SCALE = 5.0
        _check(compiled, model, x)
    finally:
        SCALE = 2.0
    _check(compiled, model, x)


def test_a_class_attribute_and_an_instance_override_are_seen():
    model, compiled, x = _setup()
    try:
        Net.bias_on = False
        _check(compiled, model, x)
    finally:
        Net.bias_on = True
    _check(compiled, model, x)
    model.bias_on = False              # an instance value now shadows the class's
    _check(compiled, model, x)


def test_a_method_replaced_on_the_class_or_the_instance_is_seen():
    model, compiled, x = _setup()
    original = Net.activation
    try:
        Net.activation = lambda self, x: torch.sigmoid(x)
        _check(compiled, model, x)
    finally:
        Net.activation = original
    _check(compiled, model, x)
    model.activation = types.MethodType(lambda self, x: x * 3, model)
    _check(compiled, model, x)


def test_an_attribute_that_appears_later_is_seen_through_hasattr():
    model, compiled, x = _setup()
    model.extra = 0.5
    _check(compiled, model, x)
    del model.extra
    _check(compiled, model, x)


def test_a_closure_cell_and_function_defaults_are_slots():
    def make(k):
        def f(x, scale=2.0):
            return x * k * scale
        return f

    f = make(3.0)
    cell = f.__closure__[0]
    ok, value, slots = slot_read(cell, ".", "cell_contents", "L['f'].__closure__[0]")
    assert ok and value == 3.0 and slots[0].kind == "attr"
    ok, value, slots = slot_read(f, ".", "__defaults__", "L['f']")
    assert ok and value == (2.0,) and slots == (Slot(f, "attr", "__defaults__", (2.0,), "L['f']"),)
    ok, value, slots = slot_read(f, ".", "__globals__", "L['f']")
    assert ok and value is f.__globals__ and slots == ()       # read-only: nothing to re-check


def test_reads_through_custom_attribute_lookup_or_properties_are_not_resolved():
    class Lookup:
        def __getattribute__(self, name):
            return object.__getattribute__(self, name)

    class WithProperty:
        @property
        def p(self):
            return 1

    obj = Lookup()
    obj.a = 1
    assert slot_read(obj, ".", "a", "L['o']")[0] is False
    assert slot_read(WithProperty(), ".", "p", "L['o']")[0] is False


def test_hasattr_on_a_module_is_implied_only_while_the_answer_is_pinned():
    m = nn.Linear(2, 2)
    statics = StaticSources([("L['m']", m)])
    assert statics.attribute_fixed(m, "weight", True, "L['m']")
    assert statics.attribute_fixed(m, "missing", False, "L['m']")
    assert "missing" in statics.deps[id(m)].names          # its absence is fingerprinted
