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
