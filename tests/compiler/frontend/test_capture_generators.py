"""Generators are stepped lazily (compiler/frontend/generators.py): each next() runs the
inlined frame to its next yield, so side effects, mutations seen by the consumer and in-place
writes happen in CPython's order, in one graph; nn.Module tree walkers (modules(),
named_parameters(), ...) are read from the real module."""
import torch

from tests.compiler.frontend.capture_harness import Recorder, check

_LOG = []


def scaled(x, n):
    for i in range(n):
        yield x * (i + 1)


def chained(x):
    yield from scaled(x, 2)
    yield x - 1


def for_loop(x):
    out = x
    for t in chained(x):
        out = out + t
    return out


def consumers(x):
    a = list(scaled(x, 3))
    b = tuple(chained(x))
    return sum(scaled(x, 2)) + a[2] + b[1] + next(scaled(x, 4)) * any(True for _ in scaled(x, 1))


def noisy(x):
    _LOG.append(1)          # a side effect: must not run ahead of the consumer
    yield x


def side_effect_gen(x):
    out = x
    for t in noisy(x):
        out = out + t * len(_LOG)
    return out


def growing():
    acc = []
    for i in range(3):
        acc.append(i)
        yield acc           # lazily, the consumer sees [0], [0, 1], [0, 1, 2]


def sees_growing_list(x):
    out = x
    for acc in growing():
        out = out * len(acc)
    return out


def local_list_gen(x):
    parts = [x * i for i in range(3)]       # a list only the generator sees: fine
    parts.append(x)
    for p in parts:
        yield p


def uses_local_list(x):
    return sum(local_list_gen(x))


def bump(x):
    for _ in range(2):
        x.add_(1)
        yield x.sum()


def in_place_gen(x):
    out = []
    for s in bump(x):
        out.append(s + x.sum())     # reads x between items
    return out


def returns_value(x):
    yield x
    return 5


def delegates(x):
    n = yield from returns_value(x)
    yield x * n


def uses_return_value(x):
    return sum(delegates(x))


def stored_then_consumed(x):
    g = scaled(x, 2)        # stored first: nothing of its body runs until sum() pulls
    return sum(g)


class Tree(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.ModuleList([torch.nn.Linear(4, 4)]))
        self.register_buffer("shift", torch.ones(4))

    def forward(self, x):
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                x = m(x)
        for name, p in self.named_parameters():
            x = x + p.sum() * len(name)
        for b in self.buffers():
            x = x - b
        hooks = any(len(getattr(m, "_forward_hooks", {})) for m in self.modules())
        return x * len(list(self.children())) + hooks


def test_generators_single_graph():
    for fn in (for_loop, consumers):
        rec = check(fn, torch.randn(3))
        assert rec.breaks == [], [str(b) for b in rec.breaks]
        assert len(rec.graphs) == 1


def test_generator_with_side_effects_in_order():
    _LOG.clear()
    x = torch.randn(3)
    expected = side_effect_gen(x)
    log_eager = list(_LOG)
    _LOG.clear()
    rec = Recorder()
    got = rec.capture(side_effect_gen, (x,), {}).fn(x)
    assert torch.allclose(expected, got)
    assert _LOG == log_eager
    assert rec.breaks == [] and len(rec.graphs) == 1, [str(b) for b in rec.breaks]


def test_generator_visible_mutations_seen_item_by_item():
    rec = check(sees_growing_list, torch.randn(3))
    assert rec.breaks == [] and len(rec.graphs) == 1, [str(b) for b in rec.breaks]
    x = torch.randn(3)
    expected = in_place_gen(x.clone())      # it writes its input: run each on its own copy
    rec = Recorder()
    got = rec.capture(in_place_gen, (x.clone(),), {}).fn(x.clone())
    assert all(torch.allclose(a, b) for a, b in zip(expected, got))
    assert rec.breaks == [] and len(rec.graphs) == 1, [str(b) for b in rec.breaks]
    rec = check(uses_local_list, torch.randn(3))
    assert rec.breaks == [] and len(rec.graphs) == 1


def test_generator_return_value_through_yield_from():
    rec = check(uses_return_value, torch.randn(3))
    assert rec.breaks == [] and len(rec.graphs) == 1, [str(b) for b in rec.breaks]


def test_generator_stored_then_consumed():
    rec = check(stored_then_consumed, torch.randn(3))
    assert rec.breaks == [] and len(rec.graphs) == 1, [str(b) for b in rec.breaks]


def test_module_tree_walk_one_graph_and_guards():
    m = Tree()
    rec = check(Tree.forward, m, torch.randn(2, 4))
    assert rec.breaks == [], [str(b) for b in rec.breaks]
    assert len(rec.graphs) == 1
    guards = {(g.source, g.kind): g.expected for g in rec.results[0].guards}
    names = guards[("list(dict(L['self'].named_modules()))", "CONSTANT_MATCH")]
    assert names == ["", "a", "seq", "seq.0", "seq.1", "seq.1.0"]
    # the guard expression evaluates to the expected names on the real module
    assert list(dict(m.named_modules())) == names
