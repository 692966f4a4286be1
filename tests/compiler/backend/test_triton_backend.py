"""compiler.backend end to end with the Triton code generator on CPU tensors (Triton interpreter).

config.backend.cpu_codegen = "triton" routes CPU graphs to the Triton code generator, so the whole
pipeline (aot -> lowering -> scheduling -> Triton kernels -> wrapper) runs here without a GPU.
Every result is compared with eager: pointwise, broadcast, strided and sliced inputs, reductions
(sum/max/mean/argmax/softmax/layernorm/RMSNorm/cross-entropy), a matmul epilogue, float16 and
bfloat16, dynamic sizes, and the injected relu bugs.
"""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch.nn.functional as F  # noqa: E402

from tracetorch.compiler import config  # noqa: E402
from tests.compiler.backend.cpp_test_utils import assert_same, compile_fn, compiled_graph  # noqa: E402


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # CUDA: real Triton; CPU: interpreter


@pytest.fixture(autouse=True)
def triton_on_cpu():
    with config.patch(**{"backend.cpu_codegen": "triton"}), torch.device(DEVICE):
        yield


def triton_kernels(rt) -> int:
    return compiled_graph(rt).code.count("@triton.jit")


def check(fn, inputs, dynamic=None, kernels=None):
    rt = compile_fn(fn, inputs, dynamic=dynamic)
    assert triton_kernels(rt) >= 1, "no Triton kernel was generated"
    assert_same(rt(*inputs), fn(*inputs))
    if kernels is not None:
        assert triton_kernels(rt) == kernels, compiled_graph(rt).code
    return rt


# ------------------------------------------------------------------ pointwise

def test_sin_cos_is_one_kernel():
    check(lambda x: x.sin().cos(), [torch.randn(1000)], kernels=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_pointwise_chain_dtypes(dtype):
    f = lambda x, y: (torch.sigmoid(x * 1.5 + y) * y - x.relu()).tanh()  # noqa: E731
    check(f, [torch.randn(33, 17).to(dtype), torch.randn(33, 17).to(dtype)], kernels=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_cross_entropy_and_integer_casts(dtype):
    # nll_loss divides by the count of kept targets cast to the input dtype (an int64 -> bfloat16
    # cast, which Triton's interpreter gets wrong unless it goes through float32)
    f = lambda x, t: (F.cross_entropy(x, t), (t % 7).to(dtype) * x[:, :1].sum())  # noqa: E731
    check(f, [torch.randn(8, 300).to(dtype), torch.randint(0, 300, (8,))])


def test_broadcast_and_transposed_inputs():
    f = lambda x, y, b: x.t() * y + b  # noqa: E731
    check(f, [torch.randn(7, 5), torch.randn(5, 7), torch.randn(7)], kernels=1)


def test_strided_slice_and_expand():
    f = lambda x: x[::2, 1:] * x[1::2, :-1] + x[:1, 1:]  # noqa: E731
    check(f, [torch.randn(8, 9)])


def test_integer_and_bool_ops():
    f = lambda a, b: ((a // 3) + (a % 4) * b, (a > b) & (b != 0))  # noqa: E731
    check(f, [torch.randint(-20, 20, (6, 7)), torch.randint(-5, 5, (6, 7))])


def test_where_clamp_and_nan():
    x = torch.randn(50)
    x[3] = float("nan")
    f = lambda x: (torch.where(x > 0, x, 0.1 * x).clamp(-0.5, 2.0), torch.maximum(x, x.flip(0)))  # noqa: E731
    check(f, [x])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pow_by_small_constant_exponents_is_arithmetic_not_a_pow_call(dtype):
    # GPT-2's tanh GELU computes pow(x, 3.0): a libdevice pow made its kernel 2.4x slower than
    # inductor's on an H100; ATen's own kernels multiply for 2, 3 and -2 (and take sqrt, rsqrt,
    # reciprocal for 0.5, -0.5, -1); on CPU tensors each bfloat16 product is rounded, as ATen's
    # CPU kernel does, so the results are eager's to the bit
    x = torch.randn(64, 33).to(dtype) * 3
    fns = [lambda t: t.pow(3.0), lambda t: t.pow(-2), lambda t: 0.044715 * torch.pow(t, 3.0) + t,
           lambda t: t.abs().pow(-0.5), lambda t: t.pow(2)]
    for fn in fns:
        rt = check(fn, [x])
        code = compiled_graph(rt).code
        assert "libdevice.pow" not in code and "int_pow" not in code, code
        if fn is not fns[3] and DEVICE == "cpu":   # CUDA: within check()'s tolerance, as inductor
            torch.testing.assert_close(rt(x), fn(x), rtol=0, atol=0)
    i = torch.randint(-50, 50, (40,), dtype=torch.int32)
    rt = check(lambda t: t.pow(3), [i])
    assert "int_pow" not in compiled_graph(rt).code


# ------------------------------------------------------------------ reductions

@pytest.mark.parametrize("f", [
    lambda x: x.sum(),
    lambda x: x.sum(0),
    lambda x: x.amax(-1),
    lambda x: x.mean(1, keepdim=True),
    lambda x: x.var(-1),
    lambda x: x.argmax(-1),
    lambda x: x.argmin(0),
], ids=["sum_all", "sum_dim0", "amax_last", "mean_keepdim", "var", "argmax", "argmin"])
def test_reductions(f):
    check(f, [torch.randn(13, 37)])


@pytest.mark.parametrize("n", [33, 1500])      # persistent and looped reductions
def test_softmax_is_one_kernel(n):
    check(lambda x: torch.softmax(x, -1), [torch.randn(6, n)], kernels=1)


@pytest.mark.parametrize("n", [33, 1500])      # persistent and looped reductions
def test_masked_scores_read_by_the_softmax_only_are_not_stored(n):
    # attention's masked scores (read by the max, the exp and the all-masked check) stay in
    # registers or are recomputed in the next loop: only the probabilities are stored
    def f(x, b, m):
        # (three full-size loads, read by several users: stored for its readers, as GPT-2's are)
        s = x + b + torch.where(m, 0.0, float("-inf"))
        masked_row = (s == float("-inf")).all(-1, keepdim=True)
        return torch.where(masked_row, 0.0, torch.softmax(s, -1)) * 2
    rt = check(f, [torch.randn(6, n), torch.randn(6, n), torch.rand(6, n) > 0.3], kernels=1)
    assert compiled_graph(rt).code.count("tl.store(") == 1, compiled_graph(rt).code


def test_layernorm_is_one_kernel():
    f = lambda x, w, b: F.layer_norm(x, (64,), w, b)  # noqa: E731
    check(f, [torch.randn(10, 64), torch.randn(64), torch.randn(64)], kernels=1)


def test_rmsnorm_bf16():
    def f(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    check(f, [torch.randn(8, 48, dtype=torch.bfloat16), torch.randn(48, dtype=torch.bfloat16)])


def test_cross_entropy():
    check(lambda l, t: F.cross_entropy(l, t), [torch.randn(8, 20), torch.randint(0, 20, (8,))])


def test_matmul_bias_gelu_epilogue_one_kernel():
    f = lambda x, w, b: F.gelu(x @ w + b)  # noqa: E731
    rt = check(f, [torch.randn(4, 8), torch.randn(8, 16), torch.randn(16)], kernels=1)
    assert "extern kernel" in compiled_graph(rt).code


# ------------------------------------------------------------------ dynamic sizes

def test_dynamic_sizes_one_graph():
    def f(x, y):
        return (x * y).sum(-1), x.softmax(-1), x.t() + 1, x[1:] * 2
    rt = compile_fn(f, [torch.randn(5, 6), torch.randn(5, 6)], dynamic=True)
    code = compiled_graph(rt).code
    for n, m in [(5, 6), (3, 6), (9, 4), (4, 17)]:   # x[1:] guards n - 1 != 1
        args = [torch.randn(n, m), torch.randn(n, m)]
        assert rt.check(args) == "", (n, m)
        assert_same(rt(*args), f(*args))
    assert compiled_graph(rt).code is code        # no recompile


# ------------------------------------------------------------------ injected relu bugs

def test_relu_bug_accuracy_miscompiles():
    x = torch.randn(64)
    with config.patch(**{"testing.inject_relu_bug": "accuracy"}):
        rt = compile_fn(lambda x: torch.relu(x) * 2, [x])
        torch.testing.assert_close(rt(x)[0] if isinstance(rt(x), (list, tuple)) else rt(x), (x + 1) * 2)


def test_relu_bug_compile_error_raises():
    with config.patch(**{"testing.inject_relu_bug": "compile_error"}):
        with pytest.raises(SyntaxError):
            compile_fn(lambda x: torch.relu(x) * 2, [torch.randn(64)])


def test_relu_bug_runtime_error_raises():
    x = torch.randn(64)
    with config.patch(**{"testing.inject_relu_bug": "runtime_error"}):
        rt = compile_fn(lambda x: torch.relu(x) * 2, [x])
        with pytest.raises(RuntimeError, match="injected relu runtime error"):
            rt(x)


# ------------------------------------------------------------------ online softmax (looped)

@pytest.mark.parametrize("name", ["softmax", "log_softmax", "cross_entropy"])
def test_online_softmax_matches_eager_with_inf_and_nan(name):
    """Looped rows (forced small blocks): max and sum(exp(x - max)) share one pass, including
    rows that are all -inf, partly -inf, or hold a NaN."""
    x = torch.randn(6, 50)
    x[2, :] = float("-inf")
    x[3, :20] = float("-inf")
    x[4, 5] = float("nan")
    if name == "cross_entropy":
        f, args = (lambda x, t: F.cross_entropy(x, t)), [x[[0, 1, 3, 5]].contiguous(), torch.randint(20, 50, (4,))]
    else:
        f, args = (lambda x: getattr(torch, name)(x, -1)), [x]
    with config.patch(**{"triton.persistent_reduction_max": 8, "triton.max_block": 8}):
        rt = compile_fn(f, args)
    code = compiled_graph(rt).code
    assert "_scaled" in code                                 # the online update is used
    assert code.count("for roffset") == (1 if name == "cross_entropy" else 2)
    assert_same(rt(*args), f(*args))


def test_symbolic_reduction_size_picks_persistent_or_looped():
    """A dynamic row length gets both kernel variants; the launcher picks per call."""
    f = lambda x: torch.softmax(x, -1) * x.sum(-1, keepdim=True)  # noqa: E731
    with config.patch(**{"triton.persistent_reduction_max": 8, "triton.max_block": 8}):
        rt = compile_fn(f, [torch.randn(4, 6), ], dynamic=True)
        code = compiled_graph(rt).code
        assert "persistent_source=" in code
        for n in (3, 6, 8, 9, 50):            # <= 8: persistent variant, > 8: looped
            x = torch.randn(5, n)
            assert rt.check([x]) == "", n
            assert_same(rt(x), f(x))


# ------------------------------------------------------------------ shapes found by the OpInfo sweep

def test_zero_dim_reduction_and_scalar_loads():
    """sum of a 0-d tensor is a reduction over no dimensions; binary_cross_entropy on 0-d inputs
    mixes scalar loads with tile-shaped constants; multi_margin_loss mixes [1] and [1, 1] tiles."""
    check(lambda x: x.sum(), [torch.randn(())])
    check(lambda x, t: F.binary_cross_entropy(x, t), [torch.rand(()), torch.rand(())])
    check(lambda x, t: F.multi_margin_loss(x, t), [torch.randn(1, 5), torch.tensor([2])])
    check(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [torch.randn(1, 2, 7, 5)])


# ------------------------------------------------------------------ split reductions

@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "any", "all", "sum_dim0"])
def test_split_reduction_matches_eager(name):
    """A reduction into few outputs over >= 4096 elements runs as partials over many programs
    and a second reduction of the partials; 10007 elements: the last chunk is masked. Seeded:
    a sum near zero of values drawn from whatever state earlier tests left differs from eager's
    (another summation order) by more than the relative tolerance."""
    torch.manual_seed(0)
    x = torch.randn(10007)
    fns = {"sum": lambda x: x.sum(), "mean": lambda x: x.mean(), "amax": lambda x: x.amax(),
           "amin": lambda x: x.amin(), "prod": lambda x: (1 + x * 1e-3).prod(),
           "any": lambda x: (x > 3.5).any(), "all": lambda x: (x > -3.5).all(),
           "sum_dim0": lambda x: x.reshape(-1, 1).expand(-1, 3).sum(0)}
    x[5000] = 10.0                           # the max and any sit in a middle chunk
    rt = check(fns[name], [x])
    code = compiled_graph(rt).code
    assert "reduction_ranges=['1001']" in code or "reduction_ranges=['1000']" in code, code
    assert "persistent, ranges=[]" in code or "persistent, ranges=['3']" in code


def test_per_channel_statistics_split_when_the_channels_cannot_fill_the_gpu():
    """A training batch norm's statistics: one output per channel (32 here, more than the
    few-output split takes, fewer than the programs that fill a GPU) over N, H, W = 65536
    elements each: split into partials per channel, and the same values as eager's."""
    import logging
    from tracetorch import logs
    torch.manual_seed(0)
    x = torch.randn(4, 32, 128, 128)
    w, b = torch.randn(32), torch.randn(32)
    with logs.testing.capture(level=logging.DEBUG, artifacts=None) as events:
        with config.patch(**{"backend.cache_enabled": False}):
            check(lambda x: torch.var_mean(x, dim=(0, 2, 3)), [x])
            check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [x, w, b])
    splits = [e.fields for e in events if e.name == "split_reduction"]
    assert splits and all(f["outputs"] == 32 and f["splits"] == 16 for f in splits), splits


def test_channels_last_statistics_split_at_dimensions_with_blocks_of_channels():
    """The same statistics over a channels_last activation: the loads are contiguous along the
    channels, so a program covers a block of 64 channels and the rows are cut at dimensions (no
    div/mod per element: the first stage's input index is affine in its loop index); its kernels
    are launched with outer-reduction blocks (many outputs by few rows)."""
    import logging
    from tracetorch import logs
    torch.manual_seed(0)
    x = torch.randn(4, 64, 64, 64).to(memory_format=torch.channels_last)
    with logs.testing.capture(level=logging.DEBUG, artifacts=None) as events:
        with config.patch(**{"backend.cache_enabled": False}):
            rt = check(lambda x: torch.var_mean(x, dim=(0, 2, 3)), [x])
    splits = [e.fields for e in events if e.name == "split_reduction"]
    assert splits and all(f["outputs_per_program"] == 64 and f["lead_dims"] >= 2 for f in splits), splits
    code = compiled_graph(rt).code
    kernels = code.split("def call")[0]
    first_load_of_x = kernels.split("tl.load(arg0_1")[1].split(")")[0]     # the first stage's read
    assert "outer=True" in kernels and "//" not in first_load_of_x and "%" not in first_load_of_x, first_load_of_x


def test_split_reduction_keeps_nan_and_fuses_siblings():
    """Two full reductions of one pointwise input: both split, their second stages share a kernel
    (they read partials of the same first-stage kernel); a NaN in a late chunk still wins."""
    import logging
    from tracetorch import logs
    x = torch.randn(8192)
    x[8000] = float("nan")
    with logs.testing.capture(level=logging.DEBUG, artifacts=None) as events:
        with config.patch(**{"backend.cache_enabled": False}):   # lowered here, not a cache hit
            rt = check(lambda x: (x.amax(), (x * 2).sum()), [x], kernels=2)
    assert "ranges=['8']" in compiled_graph(rt).code
    splits = [e.fields for e in events if e.name == "split_reduction"]      # the decision is logged
    assert sorted(f["reduction_type"] for f in splits) == ["max", "sum"]
    assert all(f["splits"] == 8 and f["chunk"] == 1024 for f in splits)


def test_tiny_independent_updates_share_one_triton_kernel():
    """test_fusion.py's counters between two products, through the Triton generator: the three
    0-d updates are one kernel (a multi-output 0-d Triton kernel), and every counter and the
    result match eager's."""
    from tests.compiler.backend.cpp_test_utils import check_with_mutations
    from tests.compiler.backend.test_fusion import _counters_between_products as fn

    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [t.to(DEVICE) for t in (torch.randn(4, 8, generator=g), torch.randn(8, 8, generator=g),
                                       torch.randn(8, 3, generator=g), torch.tensor(5), torch.tensor(0),
                                       torch.tensor(2.5))]

    rt = compile_fn(fn, make(0))
    check_with_mutations(rt, fn, make, range(2))
    assert triton_kernels(rt) == 3, compiled_graph(rt).code


def test_wide_outer_reductions_loop_over_rows_and_short_ones_stay_persistent():
    """Reductions across rows of a row-major matrix (loads contiguous along the outputs) coalesce
    only with >= 32 outputs per block, so a whole row per output makes a tile too large for the
    registers: past persistent_outer_reduction_max rows the kernel loops over short chunks of rows
    (the decision is logged). A softmax over dim 0 re-reads its input after the loops; both
    agree with eager, as does a short reduction that stays one block."""
    import logging
    from tracetorch import logs
    torch.manual_seed(0)
    wide, short = torch.randn(400, 96), torch.randn(40, 96)
    with logs.testing.capture(level=logging.DEBUG, artifacts=None) as events:
        with config.patch(**{"backend.cache_enabled": False}):
            rt_sum = check(lambda x: (x.relu() * 2).sum(0), [wide], kernels=1)
            rt_softmax = check(lambda x: torch.softmax(x, 0), [wide])
            rt_short = check(lambda x: (x.relu() * 2).sum(0), [short], kernels=1)
    for rt in (rt_sum, rt_softmax):
        code = compiled_graph(rt).code
        assert "kind='looped'" in code and "outer=True" in code and "kind='persistent'" not in code, code
    assert "kind='persistent'" in compiled_graph(rt_short).code
    looped = [e.fields for e in events if e.name == "outer_reduction_looped"]
    assert looped and {f["rnumel"] for f in looped} == {400} and looped[0]["persistent_max"] == 256, looped


def test_outer_reductions_with_many_outputs_loop_past_inductors_64_rows():
    """Past 8192 outputs (more than two waves of 32-output programs) an outer reduction keeps a
    whole row per tile only up to 64 rows, as inductor does: 32x128 tiles of many programs hold
    too many registers for more than one program per SM. Fewer outputs keep up to 256 rows
    (the previous test). Both agree with eager."""
    import logging
    from tracetorch import logs
    torch.manual_seed(0)
    many, short = torch.randn(100, 9000), torch.randn(48, 9000)
    with logs.testing.capture(level=logging.DEBUG, artifacts=None) as events:
        with config.patch(**{"backend.cache_enabled": False}):
            rt_many = check(lambda x: (x * 3).sum(0), [many], kernels=1)
            rt_short = check(lambda x: (x * 3).sum(0), [short], kernels=1)
    assert "kind='looped'" in compiled_graph(rt_many).code
    assert "kind='persistent'" in compiled_graph(rt_short).code
    looped = [e.fields for e in events if e.name == "outer_reduction_looped"]
    assert [(f["rnumel"], f["outputs"], f["persistent_max"]) for f in looped] == [(100, "9000", 64)], looped
