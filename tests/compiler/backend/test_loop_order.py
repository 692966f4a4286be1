"""Pointwise kernels nest their loops in the order their result is stored (ir.ComputedBuffer.
in_storage_order): a channels-last or transposed result is written, and its same-layout inputs
read, at consecutive addresses. Values and strides are compared with eager; the generated code
is checked for the contiguous store (one flat index, no div/mod on the way to the address)."""
import logging
import os
import re

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import sympy  # noqa: E402

from tracetorch import compiler  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend import ir  # noqa: E402
from tracetorch.logs.testing import capture  # noqa: E402


def _relu_add(x, y):
    return torch.relu(x) * 2 + y


def _bias_gelu_transposed(x, b):
    return torch.nn.functional.gelu(x.transpose(1, 2) + b)      # eager keeps x's (transposed) order


def _compiled(fn, args, codegen):
    with config.patch({"backend.cpu_codegen": codegen, "backend.cache_enabled": False}), \
            capture(names={"output_code"}, level=logging.DEBUG) as events:
        out = compiler.compile(fn)(*args)
    return out, "\n".join(e.payload for e in events)


CASES = {
    "channels_last": (_relu_add, lambda n: (torch.randn(2, n, 5, 6).to(memory_format=torch.channels_last),
                                            torch.randn(2, n, 5, 6).to(memory_format=torch.channels_last))),
    "transposed": (_bias_gelu_transposed, lambda n: (torch.randn(3, n, 7), torch.randn(n))),
}


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_permuted_results_match_eager_and_store_contiguously(case, codegen):
    fn, make = CASES[case]
    args = make(8)
    out, code = _compiled(fn, args, codegen)
    ref = fn(*args)
    torch.testing.assert_close(out, ref)
    assert out.stride() == ref.stride()
    if codegen == "triton":
        stores = re.findall(r"tl\.store\(\w+ \+ \((.*?)\), ", code)
        assert stores and all(s == "xindex" for s in stores), stores


def test_new_sizes_after_a_dynamic_recompile_keep_eager_values_and_strides():
    fn, make = CASES["channels_last"]
    with config.patch({"backend.cache_enabled": False}):
        opt = compiler.compile(fn)
        for n in (8, 3, 11):
            args = make(n)
            out, ref = opt(*args), fn(*args)
            torch.testing.assert_close(out, ref)
            assert out.stride() == ref.stride()


def test_storage_order_of_a_layout():
    size = [sympy.Integer(n) for n in (2, 8, 5, 6)]
    cl = [240, 1, 48, 8]
    assert ir.dense_order(size, [sympy.Integer(s) for s in cl]) == [1, 3, 2, 0]
    assert ir.dense_order(size, [sympy.Integer(s) for s in (240, 30, 6, 1)]) == [3, 2, 1, 0]
    assert ir.dense_order(size, [sympy.Integer(s) for s in (480, 30, 6, 1)]) is None   # a gap: not dense


def _cl_result_of_mostly_nchw_loads(x_cl, a, b, c):
    return x_cl * 2 + a * b - c          # eager: channels-last result (the first operand's layout)


def _max_pool_backward_into_cl(x_cl, grad, idx):
    # a max pool's backward (reads the pooled gradient and indices of each window: NCHW) feeding
    # a channels-last ReLU backward, as in ResNet-50's stem
    g = torch.ops.aten.max_pool2d_with_indices_backward(grad, x_cl, [3, 3], [2, 2], [1, 1], [1, 1], False, idx)
    return torch.where(x_cl <= 0, 0.0, g)


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_loops_follow_the_loads_when_most_of_them_disagree_with_the_result(codegen):
    """A channels-last result computed from several NCHW loads is nested as the loads are (the
    store then strides, once, instead of every load striding): values and strides as eager's;
    in the Triton kernel the NCHW loads read at consecutive addresses."""
    x = torch.randn(2, 8, 6, 6).to(memory_format=torch.channels_last)
    a, b, c = (torch.randn(2, 8, 6, 6) for _ in range(3))
    with capture(names={"loop_order_from_loads"}, level=logging.DEBUG) as decisions:
        out, code = _compiled(_cl_result_of_mostly_nchw_loads, (x, a, b, c), codegen)
    ref = _cl_result_of_mostly_nchw_loads(x, a, b, c)
    torch.testing.assert_close(out, ref)
    assert out.stride() == ref.stride()
    # the decision is logged: the loads' order [N, C, H, W] over the result's [N, H, W, C]
    assert [(e.fields["order"], e.fields["store_order"]) for e in decisions] == [([0, 1, 2, 3], [0, 2, 3, 1])]
    if codegen == "triton":
        loads = re.findall(r"tl\.load\(\w+ \+ \((.*?)\), ", code)
        assert sum(idx == "xindex" for idx in loads) == 3, loads


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_a_max_pool_backward_feeding_a_channels_last_result_reads_its_windows_in_order(codegen):
    x = torch.randn(2, 8, 12, 12).to(memory_format=torch.channels_last)
    pooled, idx = torch.ops.aten.max_pool2d_with_indices(x.contiguous(), [3, 3], [2, 2], [1, 1])
    grad = torch.randn_like(pooled)
    out, code = _compiled(_max_pool_backward_into_cl, (x, grad, idx), codegen)
    ref = _max_pool_backward_into_cl(x, grad, idx)
    torch.testing.assert_close(out, ref)
    assert out.stride() == ref.stride()
    if codegen == "triton":
        # the gathers index the pooled tensors with the innermost loop (the width) at unit stride:
        # no load multiplies the channel by the pooled plane's size on the innermost variable
        kernel = code[code.index("@triton.jit"):]
        inner = re.search(r"\n    (x\d+) = \(xindex % (\d+)\)", kernel)
        assert inner is None or int(inner.group(2)) != 8, "loops nested channels innermost"
