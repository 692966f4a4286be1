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


def test_a_matmul_argument_in_its_own_layout_is_passed_without_a_view():
    """A weight used as it is needs no as_strided before the matmul (host time on every call);
    a reshaped or transposed one, and one at a storage offset, still get theirs and stay right."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from cpp_test_utils import check

    def f(x, w, b):
        h = torch.nn.functional.linear(x, w, b).relu()        # (4, 6, 8): its matmul reshapes x
        return h @ w, h[:, 1:] @ w[:, 2:]                     # w as given; views at offsets
    torch.manual_seed(0)
    x, w, b = torch.randn(4, 6, 8), torch.randn(8, 8), torch.randn(8)
    x_off = torch.randn(4 * 6 * 8 + 3)[3:].view(4, 6, 8)     # an input at a storage offset
    for inputs in ([x, w, b], [x_off, w, b]):
        compiler.reset()
        code = check(f, inputs).compiled.code
        mm_lines = [line for line in code.splitlines() if "torch.mm(" in line or "torch.bmm(" in line
                    or "torch.addmm(" in line]
        assert mm_lines
        assert not any("arg1_1.as_strided((8, 8), (8, 1)" in line for line in mm_lines), mm_lines
        assert ".storage_offset()" not in code.replace("storage_offset() + ", "")


def test_an_alias_read_by_an_extern_call_is_not_copied():
    """alias(x) shares x's memory: an extern kernel reading it reads x itself, no copy kernel
    (the attention backward read alias(saved output): one copy per layer of a ViT's backward).
    An alias the graph returns is still a tensor of its own, with x's values."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from cpp_test_utils import check, extern_count, kernel_count

    def f(x, w):
        return torch.mm(torch.ops.aten.alias(x), w).relu()

    def g(x, w):
        return torch.ops.aten.alias(x), torch.ops.aten.detach(x) @ w
    torch.manual_seed(0)
    x, w = torch.randn(6, 8), torch.randn(8, 4)
    compiler.reset()
    rt = check(f, [x, w])
    assert extern_count(rt) == 1 and kernel_count(rt) == 1      # the matmul, then the relu
    compiler.reset()
    out = check(g, [x, w])(x, w)
    assert out[0] is not x and torch.equal(out[0], x)


def test_an_empty_tensor_handed_to_aten_is_allocated_without_a_fill():
    """Dropout in training: bernoulli(empty_like(x), p) never reads the empty tensor's values;
    it is allocated (torch.empty_strided) with no kernel filling it, one zero-fill kernel per
    dropout layer less. The mask (and so every value) is eager's under the same seed."""
    from tracetorch import logs
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.25)).train()
    x = torch.randn(16, 8)
    compiler.reset()
    compiled = compiler.compile(model)
    with logs.testing.capture(artifacts=["kernel"]) as events:
        compiled(x)                               # compile
    sources = [(e.payload() if callable(e.payload) else e.payload)["source"] for e in events if e.name == "kernel"]
    assert sources and not any("empty" in s for s in sources), sources
    torch.manual_seed(1)
    got = compiled(x)
    torch.manual_seed(1)
    want = model(x)
    torch.testing.assert_close(got, want)


def test_a_copy_already_in_its_layout_is_not_made_for_an_extern_call():
    """`o.transpose(1, 2).contiguous()` of an attention output that ATen already stores in the
    query's [batch, tokens, heads, dim] order (as CUDA attention does) is that very memory: the
    projection's matmul reads it, with no copy kernel (the view lowering sees through it; a
    regression test). A copy into another layout still happens."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from cpp_test_utils import check, kernel_count

    def f(o, w):
        b, h, s, d = o.shape
        return o.transpose(1, 2).contiguous().view(b * s, h * d) @ w
    torch.manual_seed(0)
    w = torch.randn(12, 5)
    stored_bshd = torch.randn(2, 4, 3, 4).transpose(1, 2)      # [b, h, s, d] over [b, s, h, d] memory
    compiler.reset()
    assert kernel_count(check(f, [stored_bshd, w])) == 0
    compiler.reset()
    assert kernel_count(check(f, [torch.randn(2, 3, 4, 4), w])) == 1     # [b, h, s, d] memory: a copy


def test_allocations_pass_a_device_made_once():
    # a device string is parsed at every allocation (~0.5 us; ~700 allocations per ResNet-50
    # training step): the output code makes each device once and allocations pass it
    from cpp_test_utils import check       # (compiles, runs, compares every output with eager)

    def f(x, w):
        return (x.sin() @ w).relu() + x.cos()
    rt = check(f, [torch.randn(8, 8), torch.randn(8, 8)])
    code = rt.compiled.code
    call = code[code.index("def call"):]
    assert "device_cpu = torch.device('cpu')" in code[:code.index("def call")]
    assert "empty_strided(" in call and "device=device_cpu)" in call and "device='" not in call
