"""Extern kernel calls in the output code: attention, called by its cheap runtime name, gets
every argument the graph gives it in a form the runtime function accepts."""
import pytest
import torch

import compiler


@pytest.mark.parametrize("scale", [None, 0.25])
@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_with_scale_and_mask_matches_eager(scale, masked):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 16) for _ in range(3))
    mask = torch.randn(2, 1, 8, 8) if masked else None

    def f(q, k, v, mask):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        return out.relu()

    compiler.reset()
    torch.testing.assert_close(compiler.compile(f)(q, k, v, mask), f(q, k, v, mask))
