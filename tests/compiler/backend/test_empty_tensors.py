"""Zero-element results: lowered as empty buffers (nothing to compute), through both code
generators, equal to eager in shape, dtype and strides; non-empty results that read empty inputs
(a sum over an empty dimension, a matmul with an empty inner dimension) still compute."""
import pytest
import torch

from tracetorch import logs

from tracetorch.compiler import config
from tracetorch.compiler.backend import compile_fx

CASES = {
    "stack_empty": (lambda x, i: torch.stack([x[:0], x[:0] * 2]), ),
    "slice_mul": (lambda x, i: x[:, :0] * 2 + 1, ),
    "cat_with_empty": (lambda x, i: torch.cat([x[:0], x]).sin(), ),
    "unflatten_empty": (lambda x, i: x[:0].reshape(0, 2, 2).cos(), ),
    "gather_empty_index": (lambda x, i: torch.gather(x, 1, i[:, :0]), ),
    "sum_over_empty": (lambda x, i: x[:, :0].sum(1) + x[:, 0], ),
    "matmul_empty_inner": (lambda x, i: x[:, :0] @ x[:0, :], ),
    "repeat_zero": (lambda x, i: x.repeat(0, 2), ),
}


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(CASES))
def test_empty_results_match_eager(name, codegen):
    fn = CASES[name][0]
    torch.manual_seed(0)
    x = torch.randn(4, 4)
    idx = torch.randint(0, 4, (4, 3))
    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(x, idx)
    with logs.testing.capture(artifacts=["perf_hints"]) as hints:
        with config.patch(**{"backend.cpu_codegen": codegen, "backend.fallback_on_error": False}):
            out = compile_fx(gm, [x, idx])(x, idx)
    eager = [str(e.payload) for e in hints if e.name == "perf_hints" and "eagerly" in str(e.payload)]
    assert not eager, eager
    ref = fn(x, idx)
    out = out[0] if isinstance(out, (tuple, list)) else out
    torch.testing.assert_close(out, ref)
    assert out.shape == ref.shape and out.dtype == ref.dtype

