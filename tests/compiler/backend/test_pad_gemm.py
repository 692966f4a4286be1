"""Matrix products padded to aligned sizes (pad_gemm.py) compute what eager computes, return
eager's strides, and are padded only where asked. The GPU is where padding pays; on the CPU
config.backend.pad_gemm="always" runs the same rewrite."""

import logging

import pytest
import torch

from tracetorch import compiler
from tracetorch.logs.testing import capture
from tracetorch.compiler import config
from tracetorch.compiler.backend import pad_gemm


def _run(fn, args, mode):
    with config.patch({"backend.pad_gemm": mode, "backend.cache_enabled": False}), \
            capture(names={"gemm_padded"}, level=logging.INFO) as events:
        out = torch.compile(fn, backend=compiler.backend)(*args)
        torch._dynamo.reset()
    return out, events


def _lm_head(h, w):
    return h @ w.t()                 # a GPT's output head: N = vocabulary, not a multiple of 8


def _addmm(b, x, w):
    return torch.addmm(b, x, w).relu()


def _bmm_then_use(a, b):
    return torch.bmm(a, b).sum(-1)    # the sliced product feeds a reduction inside the graph


def _odd_k(a, b):
    return a @ b


CASES = [
    ("lm_head", _lm_head, lambda: (torch.randn(64, 768), torch.randn(50257 // 64, 768)), (0, 7)),
    ("addmm_bias", _addmm, lambda: (torch.randn(1003), torch.randn(128, 512), torch.randn(512, 1003)), (0, 5)),
    ("bmm_internal", _bmm_then_use, lambda: (torch.randn(4, 128, 256), torch.randn(4, 256, 1001)), (0, 7)),
    ("odd_k", _odd_k, lambda: (torch.randn(256, 1001), torch.randn(1001, 512)), (7, 0)),
    # B seen transposed: padded as the row-major matrix it views (pad_gemm._pad), K and N alike
    ("odd_k_transposed", _lm_head, lambda: (torch.randn(256, 1001), torch.randn(512, 1001)), (7, 0)),
    ("odd_kn_transposed", _lm_head, lambda: (torch.randn(256, 1001), torch.randn(1003, 1001)), (7, 5)),
]


@pytest.mark.parametrize("name,fn,make,pads", CASES, ids=[c[0] for c in CASES])
def test_padded_products_match_eager(name, fn, make, pads):
    args = make()
    out, events = _run(fn, args, "always")
    ref = fn(*args)
    torch.testing.assert_close(out, ref, atol=1e-3, rtol=1e-4)
    assert out.stride() == ref.stride(), "a padded graph output must keep eager's strides"
    padded = [(e.fields["pad_k"], e.fields["pad_n"]) for e in events]
    assert padded and set(padded) == {pads}


def _weight_grad(g, x):
    return g.t() @ x                 # a weight gradient: A seen transposed, its leading dim is M


def test_a_transposed_operand_with_misaligned_rows_is_padded_by_rows():
    g, x = torch.randn(512, 1003), torch.randn(512, 256)
    out, events = _run(_weight_grad, (g, x), "always")
    ref = _weight_grad(g, x)
    torch.testing.assert_close(out, ref, atol=1e-3, rtol=1e-4)
    assert out.stride() == ref.stride()
    assert [(e.fields["pad_m"], e.fields["pad_k"], e.fields["pad_n"]) for e in events] == [(5, 0, 0)]


def test_float32_products_align_to_four_elements_under_tf32():
    """16 bytes: 4 float32 elements where TF32 tensor cores run the product, else untouched
    ("auto" on a CUDA graph; "always" keeps 8 on the CPU here)."""
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert pad_gemm._align(torch.float32) == 4
        torch.backends.cuda.matmul.allow_tf32 = False
        assert pad_gemm._align(torch.float32) is None
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert pad_gemm._align(torch.bfloat16) == 8


def test_not_padded_when_off_or_small_or_aligned():
    args = (torch.randn(64, 768), torch.randn(50257 // 64, 768))
    for mode in ("off", "auto"):          # auto: CPU float32 products are left alone
        out, events = _run(_lm_head, args, mode)
        torch.testing.assert_close(out, _lm_head(*args), atol=1e-3, rtol=1e-4)
        assert not events
    small = (torch.randn(4, 8), torch.randn(5, 8))              # launch-bound: not worth it
    aligned = (torch.randn(64, 768), torch.randn(1024, 768))    # nothing to pad
    for a in (small, aligned):
        out, events = _run(_lm_head, a, "always")
        torch.testing.assert_close(out, _lm_head(*a))
        assert not events


def test_growth_limit():
    """Padding a dimension of 9 to 16 nearly doubles the work: left alone."""
    assert pad_gemm.MAX_GROWTH * 9 < pad_gemm._pad_to(9) - 9


def test_transposed_operand_is_padded_in_its_own_order():
    """The padded copy of a transposed B is the row-major matrix padded, then seen transposed:
    its strides are (1, padded rows), so the copy runs along rows (a transposing copy of GPT-2's
    77 MB embedding matrix took 0.26 ms per call on the H200)."""
    seen = {}

    def backend(gm, example_inputs):
        pad_gemm.pad_products(gm)
        seen["b"] = [n.args[1].meta["val"] for n in gm.graph.nodes
                     if n.op == "call_function" and n.target is torch.ops.aten.mm.default]
        return gm
    from torch._functorch.aot_autograd import aot_module_simplified
    with config.patch({"backend.pad_gemm": "always"}):
        h, w = torch.randn(64, 768), torch.randn(785, 768)
        aot = (lambda gm, ex: aot_module_simplified(gm, ex, fw_compiler=backend))   # torch's, only to trace
        out = torch.compile(_lm_head, backend=aot)(h, w)
        torch._dynamo.reset()
    torch.testing.assert_close(out, _lm_head(h, w), atol=1e-3, rtol=1e-4)
    [b] = seen["b"]
    assert tuple(b.shape) == (768, 792) and b.stride() == (1, 768), (b.shape, b.stride())


def _squared_head(h, w):
    return (h @ w.t()).square().sum()    # its gradient g feeds g @ w and g.t() @ h


def test_both_gradients_of_a_misaligned_product_share_one_padded_copy():
    """g @ w pads g's columns (K) and g.t() @ h pads g.t()'s rows (M): the same padded matrix,
    made once (it was two kernels writing it twice: 273 us each per GPT-2 step on the H100)."""
    h = torch.randn(256, 512, requires_grad=True)
    w = torch.randn(1001, 512, requires_grad=True)
    with config.patch({"backend.pad_gemm": "always", "backend.cache_enabled": False}), \
            capture(names={"gemm_padded"}, level=logging.INFO) as events:
        loss = torch.compile(_squared_head, backend=compiler.backend)(h, w)
        loss.backward()
        torch._dynamo.reset()
    h2, w2 = h.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    ref = _squared_head(h2, w2)
    ref.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(h.grad, h2.grad, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-2)
    backward = [(e.fields["pad_m"], e.fields["pad_k"], e.fields["shared_copies"]) for e in events
                if e.fields["pad_m"] or e.fields["pad_k"]]
    assert sorted(backward) == [(0, 7, 0), (7, 0, 1)] or sorted(backward) == [(0, 7, 1), (7, 0, 0)], backward


def test_a_dynamic_batch_stays_symbolic_and_every_size_matches_eager():
    """int() of a symbolic M guarded it to its example value: the dynamic graph's code served
    that batch only, the on-disk cache then handed it to other batch sizes (wrong shapes on the
    GPU, where padding is on). N, static, is still padded; M is read without a guard."""
    model = torch.nn.Sequential(torch.nn.Linear(512, 1003), torch.nn.ReLU(), torch.nn.Linear(1003, 512))
    with config.patch({"backend.pad_gemm": "always", "backend.cache_enabled": False}), \
            capture(names={"gemm_padded", "backend_guarded", "frame_compiled"}, level=logging.DEBUG) as events, \
            torch.no_grad():
        fn = compiler.compile(model)
        for n in (40, 56, 64, 40, 48):
            x = torch.randn(n, 512)
            torch.testing.assert_close(fn(x), model(x), atol=1e-3, rtol=1e-4)
    names = [e.name for e in events]
    assert "backend_guarded" not in names
    assert names.count("frame_compiled") == 2, "one static graph, then one dynamic graph for every batch"
    padded = [(e.fields["pad_k"], e.fields["pad_n"]) for e in events if e.name == "gemm_padded"]
    assert padded == [(0, 5), (5, 0)] * 2, "both graphs pad N of the first product and K of the second"
