"""Differential tests of the scan / sort / search / pooling / special-function lowerings.

Each case is compiled with the C++ generator and with the Triton generator (Triton interpreter on
CPU), compared with eager, and must run without any ATen fallback (static sizes). Inputs cover
float32 plus float16/bfloat16, contiguous, transposed (strided) and expanded (broadcast) tensors,
NaN and ties; dynamic sizes must stay correct (the scan/sort lowerings fall back there).
"""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import logging  # noqa: E402

import pytest  # noqa: E402

from tracetorch import logs  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import tracetorch.compiler.backend as backend  # noqa: E402
from tests.compiler.backend.cpp_test_utils import assert_same, fallback_count  # noqa: E402

pytest.importorskip("triton")

CODEGENS = ["cpp", "triton"]


def compile_fn(fn, inputs, dynamic=None):
    # make_fx (not symbolic_trace): the cases unpack the tuples of cummax, sort, ...
    return backend(make_fx(fn)(*inputs), list(inputs), dynamic=dynamic)


def _run(codegen, fn, inputs, dynamic=None):
    with config.patch(**{"backend.cpu_codegen": codegen}):
        rt = compile_fn(fn, inputs, dynamic=dynamic)
        out = rt(*inputs)
    assert_same(out, fn(*inputs))
    return rt


def _data(dtype=torch.float32):
    torch.manual_seed(0)
    x = torch.randn(6, 11).to(dtype)
    x[1, 3] = float("nan")
    x[2, 4] = x[2, 7]            # a tie
    return x


def scans(x):
    return (torch.cumsum(x, 1), torch.cumprod(x * 0.5, 0), torch.logcumsumexp(x, 1),
            *torch.cummax(x, 1), *torch.cummin(x, 0))


def sorts(x):
    v, i = torch.sort(x, 1)
    dv, di = torch.sort(x, stable=True, dim=0, descending=True)
    return (v, i, dv, di, *torch.topk(x, 3, 1), *torch.kthvalue(x, 2, 1), *torch.median(x, 1),
            *torch.nanmedian(x, 0), torch.median(x), torch.argsort(x, 1))


@pytest.mark.parametrize("codegen", CODEGENS)
@pytest.mark.parametrize("fn", [scans, sorts])
def test_scan_and_sort_lowered(codegen, fn):
    x = _data()
    assert fallback_count(_run(codegen, fn, [x])) == 0
    assert fallback_count(_run(codegen, fn, [x.t().contiguous().t()])) == 0   # strided input
    # broadcast input (* 1: eager's nanmedian over a stride-0 dim returns garbage, it works in place
    # on the expanded memory; the compiled code reads the broadcast input directly either way)
    assert fallback_count(_run(codegen, lambda b: fn(b.expand(6, 11) * 1), [x[:1].clone()])) == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_scan_and_sort_half_types(dtype):
    x = _data(dtype)
    assert fallback_count(_run("cpp", lambda a: (torch.cumsum(a, 1), *torch.cummax(a, 1), *torch.sort(a, 1)),
                               [x])) == 0


def test_scan_and_sort_dynamic_sizes_stay_correct():
    fn = lambda a: (torch.cumsum(a, 1), *torch.sort(a, 1))   # noqa: E731
    rt = _run("cpp", fn, [_data()], dynamic=True)
    for shape in [(3, 5), (7, 9)]:
        a = torch.randn(shape)
        assert_same(rt(a), fn(a))


def position_ids(mask, x):
    """GPT-2's position ids: the cumsum of an attention mask over 512 tokens; and a float cumsum
    and cumprod over as many elements."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0), x.cumsum(1), (1 + x * 1e-3).cumprod(1)


def test_long_triton_cumsums_are_one_kernel_each():
    """A cumsum or cumprod longer than SEQUENTIAL_MAX is one masked reduction kernel for Triton
    (lowering/scan.py _masked_reduction): element i reduces elements 0..i of its row; the log-step
    scan took ceil(log2(n)) launches (9 at 512; the float ones may share a kernel). Equal to eager
    (the integer sum exactly)."""
    torch.manual_seed(0)
    mask = torch.rand(4, 512) > 0.2
    x = torch.randn(4, 512)
    # (no on-disk cache: a cached graph is not lowered again, so its decisions are not logged)
    with config.patch(**{"backend.cache_enabled": False}), logs.testing.capture(level=logging.DEBUG) as events:
        rt = _run("triton", position_ids, [mask, x])
    code = rt.compiled.code
    assert sorted(e.fields["reduction"] for e in events if e.name == "scan_as_masked_reduction") == \
        ["prod", "sum", "sum"]
    assert code.count("@triton.jit") <= 3 and "tl.sum(" in code, code      # log-step: 27
    assert fallback_count(rt) == 0


def search(seq, v):
    return (torch.searchsorted(seq, v), torch.searchsorted(seq, v, right=True),
            torch.bucketize(v, seq[0], out_int32=True))


@pytest.mark.parametrize("codegen", CODEGENS)
def test_searchsorted_bucketize_lowered(codegen):
    seq = torch.sort(torch.randn(3, 9), 1).values
    seq[:, 4] = seq[:, 3]          # equal boundaries
    v = torch.randn(3, 5)
    v[0, 0] = float("nan")
    v[1, 1] = seq[1, 3]
    assert fallback_count(_run(codegen, search, [seq, v])) == 0


def pools(x):
    f = torch.nn.functional
    return (f.avg_pool3d(x, 2, stride=1, padding=1, count_include_pad=False), f.adaptive_avg_pool3d(x, (3, 2, 4)),
            *f.adaptive_max_pool3d(x, (3, 2, 4), return_indices=True),
            *f.adaptive_max_pool2d(x[0], (3, 5), return_indices=True))


@pytest.mark.parametrize("codegen", CODEGENS)
def test_pooling_lowered(codegen):
    x = torch.randn(2, 3, 5, 7, 6)
    x[0, 0, 1, 1, 1] = float("nan")
    assert fallback_count(_run(codegen, pools, [x])) == 0


def specials(x):
    s = torch.special
    return (torch.i0(x), s.i0e(x), s.i1(x), s.i1e(x), s.modified_bessel_i0(x), s.modified_bessel_i1(x),
            s.modified_bessel_k0(x), s.modified_bessel_k1(x), s.scaled_modified_bessel_k0(x),
            s.scaled_modified_bessel_k1(x), s.bessel_j0(x), s.bessel_j1(x), s.bessel_y0(x), s.bessel_y1(x),
            s.ndtri(torch.sigmoid(x)), torch.digamma(x), torch.polygamma(1, x), torch.angle(x))


def _special_inputs(dtype=torch.float32):
    x = torch.cat([torch.linspace(-40, 40, 161), torch.tensor([0.0, -0.0, 1e-6, 2.0, 5.0, 8.0, -3.0,
                                                                 float("inf"), float("nan")])])
    return x.to(dtype)


@pytest.mark.parametrize("codegen", CODEGENS)
def test_special_functions_lowered(codegen):
    assert fallback_count(_run(codegen, specials, [_special_inputs()])) == 0


def test_special_functions_float64():
    assert fallback_count(_run("cpp", specials, [_special_inputs(torch.float64)])) == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_special_functions_half_types(dtype):
    fn = lambda x: (torch.i0(x), torch.special.i1e(x), torch.digamma(x))  # noqa: E731
    assert fallback_count(_run("cpp", fn, [_special_inputs(dtype).clamp(-20, 20)])) == 0


def test_instance_norm_with_running_stats_lowered():
    fn = lambda x, rm, rv: torch.nn.functional.instance_norm(x, rm, rv, momentum=0.3)  # noqa: E731
    x, rm, rv = torch.randn(2, 3, 8), torch.randn(3), torch.rand(3) + 0.5
    ref_rm, ref_rv = rm.clone(), rv.clone()
    ref = fn(x, ref_rm, ref_rv)
    rt = compile_fn(fn, [x, rm.clone(), rv.clone()])
    out = rt(x, rm, rv)
    assert_same(out, ref)
    assert_same((rm, rv), (ref_rm, ref_rv))           # the running stats are updated like eager


def _max_pool_grads(x, g, kernel, stride, padding, ceil_mode):
    f = torch.nn.functional
    out, idx = f.max_pool2d(x, kernel, stride, padding, ceil_mode=ceil_mode, return_indices=True)
    return torch.ops.aten.max_pool2d_with_indices_backward(g[..., :out.shape[-2], :out.shape[-1]], x, kernel,
                                                           stride, padding, 1, ceil_mode, idx)


@pytest.mark.parametrize("codegen", CODEGENS)
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    (3, 2, 1, False),         # ResNet's stem: windows overlap, an element can be picked twice
    (2, 2, 0, False), (3, 1, 1, False), (3, 2, 0, True), ((3, 2), (2, 1), (1, 0), False)])
def test_max_pool2d_backward_lowered(codegen, kernel, stride, padding, ceil_mode):
    """max_pool2d's gradient as a gather over the windows that picked each element: eager's
    values, ties included (constant regions pick one element per window), no ATen fallback."""
    x = torch.randn(2, 3, 9, 10)
    x[0, 0, :4, :4] = 1.0                      # ties: ATen picks the first maximum
    g = torch.randn(2, 3, 10, 10)
    fn = lambda x, g: _max_pool_grads(x, g, kernel, stride, padding, ceil_mode)  # noqa: E731
    assert fallback_count(_run(codegen, fn, [x, g])) == 0
    xc = x.to(memory_format=torch.channels_last)
    assert fallback_count(_run(codegen, fn, [xc, g])) == 0


def _max_pool(x, kernel, stride, padding, dilation, ceil_mode):
    return torch.nn.functional.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode=ceil_mode,
                                          return_indices=True)


@pytest.mark.parametrize("codegen", CODEGENS)
@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (3, 2, 1, 1, False),      # ResNet's stem: the first window starts in the padding
    (2, 2, 0, 1, False), (3, 1, 1, 1, False), (3, 2, 0, 1, True), (3, 2, 1, 2, True),
    ((3, 2), (2, 1), (1, 0), 1, False)])
def test_max_pool2d_lowered_with_eager_values_indices_and_layout(codegen, kernel, stride, padding, dilation,
                                                                 ceil_mode):
    """max_pool2d with its indices, lowered whole: eager's values and indices with NaN (the last
    NaN of a window wins), -inf (a window of -inf and padding picks its first element inside the
    input) and ties (the first maximum), no ATen fallback, and eager's layout: a channels_last
    input gives channels_last outputs, as the convolutions around a pool in a CNN want."""
    x = torch.randn(2, 3, 9, 10)
    x[0, 0, :4, :4] = 1.0                      # ties
    x[0, 1, 2, 3] = x[0, 1, 3, 2] = float("nan")
    x[1, 2, :3, :3] = float("-inf")
    fn = lambda x: _max_pool(x, kernel, stride, padding, dilation, ceil_mode)  # noqa: E731
    for inp in (x, x.to(memory_format=torch.channels_last)):
        rt = _run(codegen, fn, [inp])
        assert fallback_count(rt) == 0
        for got, want in zip(rt(inp), fn(inp)):
            assert got.stride() == want.stride(), (got.stride(), want.stride())


def test_max_pool2d_half_types_and_integers():
    """bfloat16 pools exactly (a max rounds nothing); an integer input falls back to ATen for
    that op alone, as ATen's own integer support decides."""
    x = torch.randn(2, 4, 8, 8, dtype=torch.bfloat16)
    fn = lambda x: _max_pool(x, 3, 2, 1, 1, False)  # noqa: E731
    assert fallback_count(_run("cpp", fn, [x])) == 0
    xi = torch.randint(-50, 50, (2, 4, 8, 8))
    try:
        want = fn(xi)
    except RuntimeError:
        return                                 # this ATen build has no integer max pool
    with config.patch(**{"backend.cpu_codegen": "cpp"}):
        rt = compile_fn(fn, [xi])
        assert_same(rt(xi), want)


def test_max_pool2d_backward_half_types():
    x = torch.randn(2, 4, 8, 8, dtype=torch.bfloat16)
    g = torch.randn(2, 4, 8, 8, dtype=torch.bfloat16)
    fn = lambda x, g: _max_pool_grads(x, g, 3, 2, 1, False)  # noqa: E731
    assert fallback_count(_run("cpp", fn, [x, g])) == 0
