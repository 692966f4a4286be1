"""weakref.ref(x) of a module / input tensor / user object created in traced code (LSTM's
forward re-creates its _flat_weight_refs when they went stale), and calls of dead weakrefs."""
import weakref

import torch

from tests.compiler.frontend.capture_harness import Recorder, check


class Holder:
    pass


def make_refs(m, x, h):
    h.refs = [weakref.ref(m), weakref.ref(x)]
    return x * 2 if h.refs[0]() is m else x


def call_ref(r, x):
    target = r()
    return x + 1 if target is None else x - 1


def _lstm():
    torch.manual_seed(0)
    m = torch.nn.LSTM(4, 8, batch_first=True)
    # replacing a weight leaves the old weakref dead: forward re-creates the refs
    m.weight_ih_l0 = torch.nn.Parameter(torch.randn(32, 4))
    return m


def test_new_weakrefs_are_replayed():
    m, x, h = torch.nn.Linear(2, 2), torch.randn(3), Holder()
    rec = check(make_refs, m, x, h)
    assert rec.breaks == [], [str(b) for b in rec.breaks]
    assert isinstance(h.refs[0], weakref.ref) and h.refs[0]() is m and h.refs[1]() is x


def test_dead_weakref_is_none_and_guarded():
    class T:
        pass
    t = T()
    r = weakref.ref(t)
    del t
    x = torch.randn(3)
    rec = Recorder()
    r_dead = rec.capture(call_ref, (r, x), {})
    assert rec.breaks == []
    assert torch.allclose(r_dead.fn(r, x), x + 1)
    alive = torch.nn.Linear(1, 1)
    guards = [g for g in r_dead.guards if g.kind == "SYMBOLIC" and "() is None" in g.source]
    assert guards and guards[0].source == "L['r']() is None"
    # the guard expression tells a live reference apart
    assert eval(guards[0].source, {"L": {"r": weakref.ref(alive)}}) is False


def test_lstm_with_replaced_weight_one_graph():
    eager, compiled = _lstm(), _lstm()
    x = torch.randn(2, 5, 4)
    rec = Recorder()
    r = rec.capture(type(compiled).forward, (compiled, x), {})
    got, expected = r.fn(compiled, x), eager(x)
    assert rec.breaks == [], [str(b) for b in rec.breaks]
    assert torch.allclose(got[0], expected[0], atol=1e-6)
    # the replayed refs point at the module's current weights, as eager's do
    assert not compiled._weights_have_changed()
    assert all(ref() is w for ref, w in zip(compiled._flat_weight_refs, compiled._flat_weights))
