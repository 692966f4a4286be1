"""Decompositions of our own (compiler/aot/decompose.py OWN), for ops torch's tables leave whole:
compiled through both code generators and compared with eager."""
import pytest
import torch

from tracetorch.compiler import config
from tracetorch.compiler.backend import compile_fx


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addbmm_decomposition_matches_eager(codegen, beta, alpha):
    """addbmm has no decomposition in torch's tables: ours (bmm + batch sum) must equal eager,
    including beta=0 ignoring a NaN input and an input that broadcasts."""
    torch.manual_seed(0)
    inp = torch.randn(3, 5)
    if beta == 0:
        inp = torch.full((5,), float("nan"))
    b1, b2 = torch.randn(4, 3, 2), torch.randn(4, 2, 5)

    def fn(inp, b1, b2):
        return torch.addbmm(inp, b1, b2, beta=beta, alpha=alpha)
    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(inp, b1, b2)
    with config.patch(**{"backend.cpu_codegen": codegen}):
        out = compile_fx(gm, [inp, b1, b2])(inp, b1, b2)
    out = out[0] if isinstance(out, (tuple, list)) else out
    torch.testing.assert_close(out, fn(inp, b1, b2))


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_integer_addcmul_takes_value_in_its_own_type(codegen):
    """ATen's addcmul casts `value` to an integer result's type first (0.5 -> 0); torch's
    decomposition multiplied by 0.5 through a float fma, and its in-place form raised for a float
    value, so the whole graph ran eagerly (fuzz 370330). A float result keeps the float value."""
    import logging

    from tracetorch import compiler, logs

    def fn(a, b, c):
        a.addcmul_(b, b, value=0.5)
        c.addcmul_(b, c, value=0.5)
        return a + 1, torch.addcmul(b, b, b, value=2.7), torch.addcmul(b, c, c, value=0.5), c

    a = torch.arange(6, dtype=torch.uint8)
    b = torch.tensor([1, -3, 5, 7, -2, 0])
    c = torch.randn(6)
    want = fn(a.clone(), b, c.clone())
    with config.patch(**{"backend.cpu_codegen": codegen, "backend.fallback_on_error": False}), \
            logs.testing.capture(names={"graph_runs_eagerly", "aot_runs_eagerly"}, level=logging.WARNING,
                                 artifacts=None) as eagerly:
        got = compiler.compile(fn)(a.clone(), b, c.clone())
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert [dict(e.fields) for e in eagerly] == []
