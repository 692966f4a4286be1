"""Extern kernel calls in the output code: attention, called by its cheap runtime name, gets
every argument the graph gives it in a form the runtime function accepts."""
import pytest
import torch

from tracetorch import compiler


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


def test_gpt_style_attention_output_needs_no_copy(monkeypatch):
    """The attention output is planned in the layout ATen gives it (the query's memory order), so
    the output code does not copy it into other strides on every call."""
    from tracetorch.compiler.backend.runtime import wrapper_support
    copies = []
    real = wrapper_support.ensure_layout

    def counting(t, size, stride):
        out = real(t, size, stride)
        copies.append(out is not t)
        return out
    monkeypatch.setattr(wrapper_support, "ensure_layout", counting)

    def f(x, w):
        b, s, _ = x.shape
        q, k, v = (x @ w).view(b, s, 3, 4, 16).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(b, s, 64).relu()

    torch.manual_seed(0)
    x, w = torch.randn(2, 8, 64), torch.randn(64, 192)
    compiler.reset()
    torch.testing.assert_close(compiler.compile(f)(x, w), f(x, w))
    assert not any(copies), copies
