"""Guards produced by capture_frame, checked with frontend-runtime's GuardSet: each guard
kind holds on the capture's own inputs and fails on exactly the change it is about.
Dynamic dims give SymInt placeholders and SYMBOLIC guards; one capture serves other sizes."""
import torch

from tracetorch.compiler.frontend.guards import GuardSet
from tests.compiler.frontend.capture_harness import Recorder, same

FACTOR = 2
WEIGHT = torch.randn(3)


def uses_global(x):
    return x * FACTOR + WEIGHT


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, scale=1.0):
        if self.training:
            x = x * 2
        return self.lin(x) * scale


def capture(fn, *args, dynamic_dims=None, **kwargs):
    r = Recorder().capture(fn, args, kwargs, dynamic_dims=dynamic_dims)
    return r, GuardSet(r.guards, fn)


def kinds(r):
    return {(g.source, g.kind) for g in r.guards}


def test_tensor_and_global_guards():
    x = torch.randn(4, 3)
    r, gs = capture(uses_global, x)
    k = kinds(r)
    assert ("L['x']", "TENSOR_MATCH") in k and ("G['WEIGHT']", "TENSOR_MATCH") in k
    assert ("G['FACTOR']", "CONSTANT_MATCH") in k
    assert ("", "GRAD_MODE") in k and ("", "DEFAULT_DTYPE") in k
    assert gs.check(x)
    assert not gs.check(torch.randn(5, 3))                       # size
    assert not gs.check(x.double())                              # dtype
    assert not gs.check(x.t().contiguous().t())                  # stride
    assert not gs.check(x.clone().requires_grad_())              # requires_grad
    with torch.no_grad():
        assert not gs.check(x)                                   # grad mode
    global FACTOR
    FACTOR = 3
    try:
        assert not gs.check(x)                                   # global scalar
    finally:
        FACTOR = 2
    assert gs.check(x)
    for g in r.guards:
        if g.kind == "TENSOR_MATCH":
            assert g.user_location and g.user_location.startswith(__file__)


def test_module_guards():
    m = Block()
    x = torch.randn(2, 3)
    r, gs = capture(Block.forward, m, x)
    k = kinds(r)
    assert ("L['self']", "ID_MATCH") in k
    assert ("L['self']", "NN_MODULE_TRAINING") in k
    assert ("L['self'].lin.weight", "TENSOR_MATCH") in k
    assert ("L['scale']", "CONSTANT_MATCH") in k
    assert gs.check(m, x)
    assert not gs.check(Block(), x)                              # another module object
    m.eval()
    assert not gs.check(m, x)                                    # training flag
    m.train()
    assert not gs.check(m, x, scale=2.0)                         # Python scalar
    assert same(r.fn(m, x), m(x))


def test_containers_guards():
    def f(xs, opts):
        out = xs[0]
        for t in xs[1:]:
            out = out + t
        return out * opts["k"]
    xs = [torch.randn(2), torch.randn(2)]
    r, gs = capture(f, xs, {"k": 2})
    assert gs.check(xs, {"k": 2})
    assert not gs.check(xs + [torch.randn(2)], {"k": 2})         # list length
    assert not gs.check(xs, {"k": 3})                            # dict value
    assert not gs.check(xs, {"k": 2, "j": 1})                    # dict keys
    assert not gs.check(tuple(xs), {"k": 2})                     # type
    assert same(r.fn(xs, {"k": 2}), f(xs, {"k": 2}))


def test_function_identity_guard():
    def helper(t):
        return t + 1

    def f(x, fn):
        return fn(x) * 2
    x = torch.randn(3)
    r, gs = capture(f, x, helper)
    assert ("L['fn']", "ID_MATCH") in kinds(r)
    assert gs.check(x, helper) and not gs.check(x, lambda t: t - 1)


def dyn(x, y):
    n = x.shape[0]
    z = x.reshape(n * 3) * 2
    if n > 2:
        z = z + 1
    return z.view(n, 3) + y, x.size(0) * 2


def test_dynamic_dims_symbolic():
    x, y = torch.randn(5, 3), torch.randn(5, 3)
    r, gs = capture(dyn, x, y, dynamic_dims={"L['x']": {0}, "L['y']": {0}})
    gm = r.graphs[0]
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert not isinstance(ph[0].meta["example_value"].shape[0], int)   # a SymInt
    sym = [g for g in r.guards if g.kind == "SYMBOLIC"]
    assert sym, r.guards
    text = " ".join(str(g.expected) for g in sym)
    assert "L['x'].size()[0]" in text and "L['y'].size()[0]" in text
    tm = [g for g in r.guards if g.kind == "TENSOR_MATCH" and g.source == "L['x']"][0]
    assert tm.expected["shape"] == (None, 3)
    # one capture serves other sizes; `n > 2` was specialized into a guard
    for n in (3, 7, 11):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        assert gs.check(x, y)
        assert same(r.fn(x, y), dyn(x, y))
    assert not gs.check(torch.randn(2, 3), torch.randn(2, 3))     # n > 2 no longer holds
    assert not gs.check(torch.randn(4, 3), torch.randn(5, 3))     # sizes must stay equal


def test_static_by_default():
    x, y = torch.randn(5, 3), torch.randn(5, 3)
    r, gs = capture(dyn, x, y)
    assert not [g for g in r.guards if g.kind == "SYMBOLIC"]
    assert not gs.check(torch.randn(6, 3), torch.randn(6, 3))


def test_globals_of_other_modules_are_guarded(tmp_path, monkeypatch):
    (tmp_path / "capture_helpers_mod.py").write_text(
        "EPS = 0.5\n"
        "def scale(t):\n"
        "    return t * EPS\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import capture_helpers_mod as mod

    def f(x, fn):
        return fn(x) + 1
    x = torch.randn(3)
    r, gs = capture(f, x, mod.scale)
    assert ("L['fn'].__globals__['EPS']", "CONSTANT_MATCH") in kinds(r)
    assert gs.check(x, mod.scale)
    monkeypatch.setattr(mod, "EPS", 0.25)
    assert not gs.check(x, mod.scale)


def test_aliased_inputs_and_inplace_identity():
    def f(x, y):
        z = x
        z += 1                       # in-place: z is still x
        return z is x, x is y, y * 2
    a = torch.zeros(3)
    r, gs = capture(f, a, a)
    assert ("L['y'] is L['x']", "SYMBOLIC") in kinds(r)
    assert gs.check(a, a) and not gs.check(a, torch.zeros(3))
    b, c = torch.zeros(3), torch.zeros(3)
    assert same(r.fn(b, b), f(c, c))
    assert same(b, c)


def test_hooks_added_later_fail_the_guards():
    m = Block()
    x = torch.randn(2, 3)

    def f(x):
        return m(x)
    r, gs = capture(f, x)
    assert gs.check(x)
    handle = m.lin.register_forward_hook(lambda mod, inp, out: out * 0)
    try:
        assert not gs.check(x)
    finally:
        handle.remove()
    assert gs.check(x)
