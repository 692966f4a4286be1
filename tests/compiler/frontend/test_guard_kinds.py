"""Every guard kind is one entry in guards.GUARD_KINDS that answers all three questions the
module asks of a kind (fast-check code, failure explanation, description) itself, so that no
kind falls through to the base class's NotImplementedError on some path."""
import pytest

from tracetorch.compiler.frontend import guards
from tracetorch.compiler.frontend.guards import GUARD_KINDS, Guard, GuardKind, kind_of


def _overrides(entry, *names):
    return any(getattr(type(entry), n) is not getattr(GuardKind, n) for n in names)


@pytest.mark.parametrize("name", sorted(GUARD_KINDS))
def test_entry_is_complete(name):
    entry = GUARD_KINDS[name]
    assert entry.name == name
    assert _overrides(entry, "emit", "condition"), "no fast-check code"
    assert _overrides(entry, "explain", "mismatch"), "no failure explanation"
    assert _overrides(entry, "describe"), "no description"
    assert 0 <= entry.order < 9     # 9 is where unknown kinds sort


def test_kinds_lists_the_entries():
    assert guards.KINDS == tuple(GUARD_KINDS)
    assert set(guards.KINDS) == {"TENSOR_MATCH", "CONSTANT_MATCH", "TYPE_MATCH", "ID_MATCH", "LENGTH_CHECK",
                                 "NN_MODULE_TRAINING", "GRAD_MODE", "DEFAULT_DTYPE", "SYMBOLIC", "AMBIENT", "HASATTR"}


def test_global_state_kinds_come_first():
    order = sorted(GUARD_KINDS.values(), key=lambda k: k.order)
    assert {k.name for k in order[:3]} == {"GRAD_MODE", "DEFAULT_DTYPE", "AMBIENT"}


def test_unknown_kind_explains_and_renders_but_does_not_compile():
    g = Guard("L['q']", "WEIRD", 1)
    assert kind_of(g).order == 9
    assert guards.explain_failure(g, {"q": 1}, {}) == "unknown guard kind 'WEIRD'"
    assert guards.describe(g) == "WEIRD: L['q'] 1"

    def f(q):
        return q
    with pytest.raises(ValueError, match="unknown guard kind 'WEIRD'"):
        guards.GuardSet([g], f)
