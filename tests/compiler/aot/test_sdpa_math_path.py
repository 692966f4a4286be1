"""Attention that ATen would run on its unfused math path is traced into its decomposition (which
our backend fuses); otherwise it stays one tracetorch::sdpa node. ATen only answers the question
for CUDA tensors during tracing, so these CPU tests stand in ATen's answer."""

import logging

import pytest
import torch
import torch.nn.functional as F

from tracetorch import compiler
from tracetorch.compiler.aot import decompose
from tracetorch.compiler.aot.inference import aot_module
from tracetorch.logs.testing import capture


def _attention(q, k, v, bias):
    # T5's form: an additive float bias (position bias + mask) and no scaling
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0) * 2


def _graphs(fn, args):
    seen = []

    def inner(gm, example_inputs):
        seen.append(gm)
        return gm.forward
    compiled = aot_module(torch.fx.symbolic_trace(fn), list(args), inner)
    return compiled, seen[0]


def _targets(gm):
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=g, dtype=dtype) for _ in range(3))
    bias = torch.randn(2, 4, 6, 6, generator=g, dtype=dtype)
    bias[:, :, :, -1] = float("-inf")         # masked keys, as a padding mask writes them
    return q, k, v, bias


@pytest.mark.parametrize("math_path", [False, True])
def test_attention_kept_whole_unless_aten_would_run_math(monkeypatch, math_path):
    monkeypatch.setattr(decompose, "torch_would_run_math", lambda *a: math_path)
    args = _inputs()
    with capture(names={"sdpa_math_path_traced"}, level=logging.INFO) as events:
        compiled, gm = _graphs(_attention, args)
    kept = torch.ops.tracetorch.sdpa.default in _targets(gm)
    assert kept is not math_path
    assert bool(events) is math_path          # the decision is logged
    torch.testing.assert_close(compiled(*args), _attention(*args))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_math_path_decomposition_matches_eager_end_to_end(monkeypatch, dtype):
    """Through the whole backend (fused kernels), on fresh values at the second call."""
    monkeypatch.setattr(decompose, "torch_would_run_math", lambda *a: True)
    fn = compiler.compile(_attention)
    for seed_shift in (0, 1):
        args = [t + seed_shift for t in _inputs(dtype)]
        tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(fn(*args), _attention(*args), **tol)


def test_cpu_values_never_asked():
    """CPU fake tensors always get 'math' from ATen (the real CPU call takes the flash kernel),
    so the question is asked for CUDA tensors only."""
    q, k, v, bias = _inputs()
    assert decompose.torch_would_run_math(q, k, v, bias, 0.0, False, 1.0) is False


def _bool_mask_attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25)


@pytest.mark.parametrize("mask_kind", ["causal_expanded", "padding"])
def test_math_path_with_a_boolean_mask_matches_eager(monkeypatch, mask_kind):
    """A boolean mask (True = attend) means 0 / -inf to attention, never 1 / 0: the math op adds
    its mask as given, so the boolean one is converted first, as scaled_dot_product_attention
    does. Llama's causal mask is this case: an expanded boolean tensor."""
    monkeypatch.setattr(decompose, "torch_would_run_math", lambda *a: True)
    q, k, v, _ = _inputs()
    if mask_kind == "causal_expanded":
        i = torch.arange(6)
        mask = (i[None, :] <= i[:, None])[None, None].expand(2, 1, 6, 6)
    else:
        mask = torch.ones(2, 4, 6, 6, dtype=torch.bool)
        mask[1, :, :, -2:] = False
    fn = compiler.compile(_bool_mask_attention)
    for shift in (0.0, 1.0):
        args = (q + shift, k - shift, v, mask)
        torch.testing.assert_close(fn(*args), _bool_mask_attention(*args))


def test_kernel_choice_is_asked_outside_the_trace_on_real_tensors():
    """Asked during a fake trace, ATen's choice comes from real tensors of the same layout (the
    fake answer differed from the real call's on the GPU) and leaves no node in the graph (the
    recorded node is tagged random and kept CUDA graphs off)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    q, k, v, bias = _inputs()
    q = q.transpose(1, 2).contiguous().transpose(1, 2)        # a permuted layout, as ViT's qkv split
    answers = []

    def fn(q, k, v, bias):
        answers.append(decompose.aten_sdp_choice(q, k, v, bias, 0.0, False, 1.0))
        return q + 1
    gm = make_fx(fn, tracing_mode="fake")(q, k, v, bias)
    assert answers == [int(torch._fused_sdp_choice(q, k, v, bias, 0.0, False, scale=1.0))]
    assert torch.ops.aten._fused_sdp_choice.default not in _targets(gm)


def test_kernel_choice_not_asked_for_symbolic_sizes():
    from torch.fx.experimental.proxy_tensor import make_fx
    answers = []

    def fn(q, k, v, bias):
        answers.append(decompose.aten_sdp_choice(q, k, v, bias, 0.0, False, 1.0))
        return q + 1
    make_fx(fn, tracing_mode="symbolic")(*_inputs())
    assert answers == [None]


def test_kernel_choice_at_example_sizes_guards_nothing():
    """For choices that change speed only (making an expanded mask contiguous), symbolic sizes
    are asked at their example values: the answer is the static one, and no size is guarded
    (a guard would turn a dynamic batch static)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    q, k, v, bias = _inputs()
    bias = bias[:, :, :1].expand_as(bias)                     # an expanded mask, as BERT's
    answers, guards = [], []

    def fn(q, k, v, bias):
        env = q.shape[0].node.shape_env
        before = len(env.guards)
        answers.append(decompose.aten_sdp_choice(q, k, v, bias, 0.0, False, 1.0, at_example_sizes=True))
        answers.append(decompose.aten_sdp_choice(q, k, v, bias, 0.0, False, 1.0, at_example_sizes=True,
                                                 mask_contiguous=True))
        guards.extend(env.guards[before:])
        return q + 1
    make_fx(fn, tracing_mode="symbolic")(q, k, v, bias)
    assert answers == [int(torch._fused_sdp_choice(q, k, v, bias, 0.0, False, scale=1.0)),
                       int(torch._fused_sdp_choice(q, k, v, bias.contiguous(), 0.0, False, scale=1.0))]
    assert guards == []


def test_kernel_choice_is_asked_under_functionalization_too():
    """Our aot trace functionalizes: a real tensor's requires_grad_() raises there ("inside of a
    function being transformed by a functorch transform"), so the probe used to answer None for
    every attention of every model and ATen picked at run time (T5's 12 attentions with a
    permuted bias then ran its unfused float32 math path; sdpa_choices.py on the H200)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    q, k, v, bias = _inputs()
    answers = []

    def fn(q, k, v, bias):
        answers.append(decompose.aten_sdp_choice(q, k, v, bias, 0.0, False, 1.0))
        return q + 1
    make_fx(torch.func.functionalize(fn), tracing_mode="fake")(q, k, v, bias)
    assert answers == [int(torch._fused_sdp_choice(q, k, v, bias, 0.0, False, scale=1.0))]


@pytest.mark.parametrize("masked", [float("-inf"), -65504.0])
def test_additive_mask_is_atens_conversion(masked):
    """The boolean mask made additive as ATen's convert_boolean_attn_mask(_cudnn) makes it:
    where(not mask, masked, scalar 0 of the query's dtype), rounded to that dtype."""
    mask = torch.tensor([[True, False, True], [False, False, True]])
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        want = torch.where(mask.logical_not(), masked, torch.scalar_tensor(0.0, dtype=dtype))
        got = decompose._additive_mask(mask, dtype, masked)
        assert got.dtype == want.dtype and torch.equal(got, want), (dtype, got, want)


def test_once_per_tensor_is_by_identity():
    """The mask conversion is made once per traced mask object, looked up by identity (a
    WeakKeyDictionary compared tensors with ==, elementwise: "Boolean value of Tensor with more
    than one value is ambiguous", and GPT-2 ran eagerly on the GPU)."""
    a, b = torch.ones(4, dtype=torch.bool), torch.ones(4, dtype=torch.bool)
    made = []

    def make(t):
        made.append(t)
        return torch.where(t, 0.0, float("-inf"))
    first = decompose.once_per_tensor(a, "k", lambda: make(a))
    assert decompose.once_per_tensor(a, "k", lambda: make(a)) is first
    other = decompose.once_per_tensor(b, "k", lambda: make(b))
    assert other is not first and len(made) == 2
    assert decompose.once_per_tensor(a, "other key", lambda: make(a)) is not first
