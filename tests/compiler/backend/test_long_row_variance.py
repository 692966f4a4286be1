"""var/std over long rows (a training batch norm's statistics) take one pass of shifted sums
(lowering/reductions.py `_var_one_pass`). Compared with eager on both code generators, on data
where a sum-of-squares formula loses everything (a large mean), constant rows (exactly 0), an
outlier as the shift, keepdim and correction variants and bfloat16; and, with the Triton code
generator, the statistics read the input once: one split reduction, two kernels, where the
two-pass form took six."""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from tracetorch.compiler import config  # noqa: E402
from tests.compiler.backend.cpp_test_utils import assert_same, compile_fn, compiled_graph  # noqa: E402

GENERATORS = ["cpp", "triton"]


def stats(x):
    v, m = torch.var_mean(x, dim=(0, 2, 3))
    s = torch.std(x, dim=(0, 2, 3), keepdim=True, correction=0)
    vk, mk = torch.var_mean(x, dim=(0, 2, 3), keepdim=True, correction=0)
    return v, m, s, vk, mk, torch.var(x)


def _inputs(kind, dtype=torch.float32, shape=(8, 6, 32, 32)):    # rows of 8 * 32 * 32 = 8192 elements
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g)
    if kind == "large_mean":
        x = x * 0.5 + 3e4
    elif kind == "constant":
        x = torch.full_like(x, 0.1)
    elif kind == "outlier_first":
        x[0, :, 0, 0] = 1e3                              # the shift is far from the mean
    return x.to(dtype)


def _compare(x, gen):
    with config.patch(**{"backend.cpu_codegen": gen}):
        rt = compile_fn(stats, [x])
        out = rt(x)
    ref = stats(x)
    return rt, out, ref


@pytest.mark.parametrize("gen", GENERATORS)
@pytest.mark.parametrize("kind", ["plain", "large_mean", "outlier_first"])
def test_long_row_statistics_match_eager(gen, kind):
    _, out, ref = _compare(_inputs(kind), gen)
    assert_same(out, ref)


@pytest.mark.parametrize("gen", GENERATORS)
def test_constant_rows_have_zero_variance(gen):
    _, out, ref = _compare(_inputs("constant"), gen)
    assert_same(out, ref)
    for v in (out[0], out[2], out[3]):
        assert torch.equal(v, torch.zeros_like(v))      # every deviation is exactly 0


@pytest.mark.parametrize("gen", GENERATORS)
def test_bfloat16_statistics(gen):
    _, out, ref = _compare(_inputs("plain", torch.bfloat16), gen)
    assert_same(out, ref)


def test_statistics_read_the_input_once():
    x = torch.randn(32, 16, 64, 64)                      # 64K elements per row: a split reduction

    def f(x):
        return torch.var_mean(x, dim=(0, 2, 3), correction=0)

    with config.patch(**{"backend.cpu_codegen": "triton"}):
        rt = compile_fn(f, [x])
        assert_same(rt(x), f(x))
    code = compiled_graph(rt).code
    # partial sums of (x - k) and (x - k)**2 in one kernel, their totals and the finished
    # statistics in a second
    assert code.count("@triton.jit") == 2, code


@pytest.mark.parametrize("kind", ["plain", "large_mean", "constant"])
def test_short_rows_a_split_cuts_take_one_pass_too(kind):
    """Rows shorter than the long-row floor that a split reduction still cuts (many channels over a
    small N*H*W, channels_last: ResNet-50's last stage) take the one-pass form as well: two split
    sums, two kernels, where the two-pass form took six launches for three reads of x."""
    import logging
    from tracetorch import logs
    x = _inputs(kind, shape=(16, 512, 8, 16))           # rows of 16 * 8 * 16 = 2048 elements
    x = x.to(memory_format=torch.channels_last)

    def f(x):
        return torch.var_mean(x, dim=(0, 2, 3), correction=0)

    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False}), \
            logs.testing.capture(level=logging.DEBUG, artifacts=None) as events:
        rt = compile_fn(f, [x])
        out = rt(x)
    assert_same(out, f(x))
    if kind == "constant":
        assert torch.equal(out[0], torch.zeros_like(out[0]))
    splits = [e.fields for e in events if e.name == "split_reduction"]
    assert len(splits) == 2 and all(s["rnumel"] == 2048 and s["lead_dims"] for s in splits), splits
    assert compiled_graph(rt).code.count("@triton.jit") == 2, compiled_graph(rt).code
