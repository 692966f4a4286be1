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
