"""Each guard kind, with the real capture: new values with the same guarded properties never
recompile; changing exactly the guarded property recompiles once, with the right reason; both
variants then hit their own cache entries."""
import logging

import pytest
import torch

from tracetorch import compiler
from tracetorch import logs

LAYER = torch.nn.Linear(3, 3)


class Toggle(torch.nn.Module):
    def forward(self, x):
        return x * 2 if self.training else x - 1


def tensor_fn(x):
    return x * 2 + 1


def const_fn(x, n):
    return x * n if n > 2 else x - n


def list_fn(xs):
    return sum(xs)


def seq_fn(xs):
    return xs[0] + xs[1]


def global_module_fn(x):
    return LAYER(x)


def grad_fn(x):
    return x * 3


def _t(*shape, **kw):
    return lambda: torch.randn(*shape, **kw)


def _swap_layer():
    global LAYER
    old = LAYER
    LAYER = torch.nn.Linear(3, 3)
    return old


CASES = {
    # name: (fn, base args maker, changed args maker, reason substring, dynamic)
    "dtype": (tensor_fn, lambda: (torch.randn(3),), lambda: (torch.randn(3).double(),),
              "dtype mismatch. expected Float, actual Double", False),
    "size": (tensor_fn, lambda: (torch.randn(3),), lambda: (torch.randn(4),),
             "size mismatch at index 0. expected 3, actual 4", False),
    "rank": (tensor_fn, lambda: (torch.randn(3),), lambda: (torch.randn(3, 1),),
             "rank mismatch. expected 1, actual 2", False),
    "stride": (tensor_fn, lambda: (torch.randn(2, 3),), lambda: (torch.randn(3, 2).t(),),
               "stride mismatch", False),
    "requires_grad": (tensor_fn, lambda: (torch.randn(3),), lambda: (torch.randn(3, requires_grad=True),),
                      "requires_grad mismatch", False),
    "constant": (const_fn, lambda: (torch.randn(3), 3), lambda: (torch.randn(3), 1),
                 "'n' value mismatch. expected 3, actual 1", False),
    "length": (list_fn, lambda: ([torch.randn(3), torch.randn(3)],),
               lambda: ([torch.randn(3), torch.randn(3), torch.randn(3)],), "len(L['xs']) == 2", False),
    "type": (seq_fn, lambda: ([torch.randn(3), torch.randn(3)],), lambda: ((torch.randn(3), torch.randn(3)),),
             "", False),
    "symbolic": (tensor_fn, lambda: (torch.randn(5),), lambda: (torch.randn(1),), "", True),
}


@pytest.fixture
def recompiles():
    got = []
    sink = logs.add_sink(lambda e: got.append(e.payload) if e.name == "recompiles" else None,
                         level=logging.DEBUG, artifacts={"recompiles"})
    compiler.reset()
    yield got
    logs.remove_sink(sink)


class Counter:
    def __init__(self):
        self.n = 0

    def __call__(self, gm, example_inputs):
        self.n += 1
        return gm.forward


def _check(f, fn, args):
    torch.testing.assert_close(f(*args), fn(*args))


@pytest.mark.parametrize("case", list(CASES))
def test_guard_kind_recompiles_only_on_its_change(case, recompiles):
    fn, base, changed, reason, dynamic = CASES[case]
    c = Counter()
    f = compiler.compile(fn, backend=c, dynamic=dynamic)
    for _ in range(3):
        _check(f, fn, base())            # fresh values, same guarded properties
    assert recompiles == [] and c.n == 1
    _check(f, fn, changed())
    assert len(recompiles) == 1 and reason in recompiles[0], recompiles
    for _ in range(2):
        _check(f, fn, base())
        _check(f, fn, changed())
    assert len(recompiles) == 1 and c.n == 2


def test_training_flag(recompiles):
    m = Toggle()
    f = compiler.compile(m, backend="eager")
    x = torch.randn(3)
    _check(f, m, (x,))
    _check(f, m, (x,))
    m.eval()
    _check(f, m, (x,))
    assert len(recompiles) == 1 and "training" in recompiles[0]
    m.train()
    _check(f, m, (x,))
    assert len(recompiles) == 1


def test_grad_mode_and_default_dtype(recompiles):
    f = compiler.compile(grad_fn, backend="eager")
    x = torch.randn(3, requires_grad=True)
    _check(f, grad_fn, (x,))
    with torch.no_grad():
        _check(f, grad_fn, (x,))
    assert len(recompiles) == 1 and "grad mode" in recompiles[0]
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _check(f, grad_fn, (x,))
    finally:
        torch.set_default_dtype(old)
    assert len(recompiles) == 2 and "default dtype" in recompiles[1]


def test_global_module_identity(recompiles):
    f = compiler.compile(global_module_fn, backend="eager")
    x = torch.randn(2, 3)
    _check(f, global_module_fn, (x,))
    _check(f, global_module_fn, (x,))
    old = _swap_layer()
    try:
        _check(f, global_module_fn, (x,))     # a different module object: must not reuse
    finally:
        globals()["LAYER"] = old
    assert len(recompiles) == 1
