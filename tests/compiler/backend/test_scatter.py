"""The scatter family (compiler/backend/lowering/scatter.py) through the C++ and the Triton code
generators (Triton: the interpreter on this CPU machine, real Triton where CUDA is available),
against eager: scatter (src, value), scatter_add, scatter_reduce, index_put (accumulate or not,
negative and broadcast indices, bool masks), index_add, float32 and bfloat16, the GraphConv
pattern with zero fallbacks, out-of-range indices, the scheduler's ordering of the in-place write.
"""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend import ir  # noqa: E402
from tests.compiler.backend.cpp_test_utils import assert_same, compile_fn, compiled_graph, fallback_count  # noqa: E402

pytestmark = pytest.mark.usefixtures("backend_cache_dir")

aten = torch.ops.aten
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
from tracetorch.compiler.backend.runtime.triton_launch import check_all_statuses  # noqa: E402


@pytest.fixture(params=["cpp", "triton"])
def codegen(request):
    """Both code generators: C++ (CPU tensors only) and Triton."""
    if request.param == "cpp":
        with config.patch(**{"backend.cpu_codegen": "cpp"}), torch.device("cpu"):
            yield "cpp"
    else:
        with config.patch(**{"backend.cpu_codegen": "triton"}), torch.device(DEVICE):
            yield "triton"


def check(fn, inputs, fallbacks=0):
    """Compile, compare every output with eager, and count the ATen fallbacks."""
    rt = compile_fn(fn, inputs)
    ref = fn(*[t.clone() for t in inputs])
    assert_same(rt(*inputs), ref)
    assert fallback_count(rt) == fallbacks, compiled_graph(rt).code
    return rt


def unique_rows(n_rows, shape):
    """An index of `shape` whose values along dim 0 are distinct in every column (scatter without
    a reduction is nondeterministic in ATen when two points hit one element)."""
    cols = shape[1] if len(shape) > 1 else 1
    idx = torch.stack([torch.randperm(n_rows)[:shape[0]] for _ in range(cols)], dim=-1)
    return idx.reshape(shape)


# ----------------------------------------------------------------------------- scatter family

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add_duplicates(codegen, dim):
    x = torch.randn(5, 6)
    src = torch.randn(7, 8)                   # larger than the index: only index's points count
    index = torch.randint(0, x.shape[dim], (4, 3) if dim == 0 else (5, 4))
    check(lambda x, i, s: x.scatter_add(dim, i, s), [x, index, src])


def test_scatter_src_and_value(codegen):
    x = torch.randn(6, 4)
    index = unique_rows(6, (3, 4))
    src = torch.randn(3, 4)
    check(lambda x, i, s: (x.scatter(0, i, s), x.scatter(0, i, 2.5), (x * 2).scatter(1, i.t()[:, :3] % 4, -1.0)),
          [x, index, src])


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_sum_mean(codegen, reduce, include_self):
    x = torch.randn(5, 3)
    index = torch.randint(0, 5, (6, 3))
    src = torch.randn(6, 3)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self), [x, index, src])


@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_scatter_reduce_other_modes(codegen, reduce):
    """C++ lowers them (serial loop); Triton has no atomic for them here: the ATen op runs."""
    x = torch.randn(5, 3)
    x[0, 0] = float("nan")                    # NaN propagates through amax/amin like ATen's
    index = torch.randint(0, 5, (6, 3))
    src = torch.randn(6, 3)
    check(lambda x, i, s: (x.scatter_reduce(0, i, s, reduce), x.scatter_reduce(0, i, s, reduce, include_self=False)),
          [x, index, src], fallbacks=0 if codegen == "cpp" else 2)


@pytest.mark.parametrize("reduce", ["mean", "prod", "amax", "amin"])
def test_index_reduce(codegen, reduce):
    """index_reduce along dim 1, duplicates, self included or not; C++ lowers every mode, Triton
    only mean (sum and count: atomic adds)."""
    x = torch.randn(3, 5)
    index = torch.tensor([4, 0, 4, 2])
    src = torch.randn(3, 4)
    check(lambda x, i, s: (x.index_reduce(1, i, s, reduce), x.index_reduce(1, i, s, reduce, include_self=False)),
          [x, index, src], fallbacks=0 if codegen == "cpp" or reduce == "mean" else 2)


def test_integer_mean_floors_on_cpp():
    """Integer means divide with floor (ATen's rule); Triton leaves them to ATen."""
    x = torch.randint(-9, 9, (4, 3))
    index = torch.randint(0, 4, (6, 3))
    src = torch.randint(-9, 9, (6, 3))
    with config.patch(**{"backend.cpu_codegen": "cpp"}):
        check(lambda x, i, s: (x.scatter_reduce(0, i, s, "mean"),
                               x.scatter_reduce(0, i, s, "mean", include_self=False)),
              [x, index, src])

def test_scatter_integer_and_zero_dim(codegen):
    x = torch.randint(-5, 5, (4, 3))
    index = torch.randint(0, 4, (5, 3))
    src = torch.randint(-5, 5, (5, 3))
    check(lambda x, i, s: x.scatter_add(0, i, s), [x, index, src])
    zero_dim = [torch.randn(()), torch.zeros((), dtype=torch.int64), torch.randn(())]
    check(lambda x, i, s: x.scatter_add(0, i, s), zero_dim)


def test_scatter_add_bfloat16(codegen):
    """bfloat16 accumulates in a float32 buffer and is rounded once at the end."""
    x = torch.randn(6, 5).bfloat16()
    index = torch.randint(0, 6, (4, 5))
    src = torch.randn(4, 5).bfloat16()
    check(lambda x, i, s: x.scatter_add(0, i, s), [x, index, src])


# ----------------------------------------------------------------------------------- index_put

def test_index_put_accumulate_duplicates_and_negative(codegen):
    x = torch.randn(6, 4)
    index = torch.tensor([0, 2, 2, -1, 5, -6])    # duplicates; negative indices wrap like ATen's
    v = torch.randn(6, 4)
    check(lambda x, i, v: (torch.index_put(x, (i,), v, accumulate=True),
                           torch.index_put(x, (i,), v[0], accumulate=True)), [x, index, v])


def test_index_put_unique(codegen):
    x = torch.randn(6, 4)
    index = torch.tensor([4, -6, 3])               # -6 is row 0
    v = torch.randn(3, 4)
    check(lambda x, i, v: (torch.index_put(x, (i,), v), aten.index_put.default(x, [None, i[:2] % 4], v.reshape(6, 2))),
          [x, index, v])


def test_index_put_broadcast_and_non_adjacent_indices(codegen):
    x = torch.randn(5, 3, 6)
    rows = torch.tensor([[0], [2], [4]])           # (3, 1) broadcast against (1, 2)
    cols = torch.tensor([[1, 5]])
    check(lambda x, r, c, v: (aten.index_put.default(x, [r, None, c], v),           # non-adjacent: dims first
                              aten.index_put.default(x, [None, r[:2, 0] % 3, c[0]], v[0, :, 0], True)),
          [x, rows, cols, torch.randn(3, 2, 3)])


def test_index_put_bool_mask(codegen):
    x = torch.randn(5, 4)
    mask = torch.rand(5) > 0.5
    check(lambda x, m, v: (torch.index_put(x, (m,), v), torch.index_put(x, (m,), v, accumulate=True),
                           torch.index_put(x, (x > 0,), torch.tensor(1.5))), [x, mask, torch.randn(4)])


def test_index_add_and_index_copy(codegen):
    x = torch.randn(4, 6)
    index = torch.tensor([5, 0, 5, 2])
    src = torch.randn(4, 4)
    check(lambda x, i, s: (x.index_add(1, i, s, alpha=0.5), x.index_copy(1, torch.tensor([1, 3, 0]), s[:, :3]),
                           x.index_fill(0, i[1:2], -2.0)), [x, index, src])


def test_put(codegen):
    """put: flat positions in self's row-major order (negative ones wrap), source read in the
    index's row-major order (any shape of the same size), 0-d self and a transposed self."""
    x = torch.randn(3, 4)
    acc_idx = torch.tensor([[0, -1, 5], [5, 11, 2]])      # duplicates: accumulate only
    uniq_idx = torch.tensor([[0, -1, 5], [6, 10, 2]])
    check(lambda x, i, j, s: (x.put(i, s, accumulate=True), x.put(j, s), x.put(j, s.reshape(6), accumulate=True),
                              x.t().put(j[0], s[1])), [x, acc_idx, uniq_idx, torch.randn(2, 3)])
    check(lambda x, i, s: (x.put(i, s), x.put(i, s, accumulate=True)),
          [torch.randn(()), torch.tensor(0), torch.randn(1)])

def test_index_put_accumulate_bfloat16(codegen):
    x = torch.randn(6, 3).bfloat16()
    index = torch.tensor([1, 1, 4])
    v = torch.randn(3, 3).bfloat16()
    check(lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True), [x, index, v])


def test_input_mutation_index_put_(codegen):
    """An in-place index_put_ on a graph input: the scatter result is written back to it."""
    def f(x, i, v):
        x.index_put_((i,), v, accumulate=True)
        return x * 2

    x, i, v = torch.randn(5, 3), torch.tensor([0, 4, 0]), torch.randn(3, 3)
    rt = compile_fn(f, [x.clone(), i, v])
    mine, ref = x.clone(), x.clone()
    assert_same(rt(mine, i, v), f(ref, i, v))
    assert_same(mine, ref)


# --------------------------------------------------------------------- the GraphConv pattern

def graph_conv(x, w, src, dst):
    """scripts/models/misc_zoo.py GraphConv: messages gathered from src, summed at dst, mean."""
    msg = x[src] @ w
    agg = torch.zeros_like(msg[:x.shape[0]]).scatter_add_(0, dst.unsqueeze(-1).expand_as(msg), msg)
    deg = torch.zeros(x.shape[0], dtype=x.dtype).scatter_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
    return torch.relu(agg / deg.clamp(min=1).unsqueeze(-1))


def test_graph_conv_lowered_without_fallbacks(codegen):
    x, w = torch.randn(10, 8), torch.randn(8, 8)
    src, dst = torch.randint(0, 10, (30,)), torch.randint(0, 10, (30,))
    check(graph_conv, [x, w, src, dst], fallbacks=0)


# ------------------------------------------------------------------------ out-of-range indices

def _eager_raises(fn, args):
    """ATen raises on the bad index. Checked on CPU copies: on CUDA, ATen's device-side assert
    would poison the CUDA context of the whole test process."""
    with torch.device("cpu"), pytest.raises((RuntimeError, IndexError)):
        fn(*[a.cpu() for a in args])


@pytest.mark.parametrize("case", ["scatter_add", "scatter_negative", "index_put"])
def test_out_of_range_index_raises(codegen, case):
    """ATen raises; the compiled graph must raise too (C++: status word; Triton: masked store and
    status word), never return a result."""
    x = torch.randn(5, 3)
    if case != "index_put":               # scatter does not wrap negative indices
        bad = 5 if case == "scatter_add" else -1
        fn = lambda x, i: x.scatter_add(0, i, torch.ones_like(x[:2]))
        args = [x, torch.tensor([[0, 1, bad], [0, 0, 0]])]
    else:
        fn, args = (lambda x, i: torch.index_put(x, (i,), torch.ones(3), accumulate=True)), [x, torch.tensor([1, -6])]
    _eager_raises(fn, args)
    rt = compile_fn(fn, args)
    assert fallback_count(rt) == 0
    with pytest.raises(RuntimeError):
        rt(*args)
        check_all_statuses()       # CUDA: the status word is read after the launch


# --------------------------------------------------------------------------------- scheduling

def test_scatter_gets_its_own_kernel_between_producer_and_readers():
    """The ScatterBuffer runs alone in its kernel, after the kernel producing its target and
    before every reader, and takes the target's storage in place."""
    from tracetorch.compiler.backend.lowering import lower_graph
    from tracetorch.compiler.backend.scheduler import schedule

    def f(x, i, s):
        y = (x + 1).scatter_add(0, i, s * 2)
        return y.sin(), y.sum(1)

    inputs = [torch.randn(5, 4), torch.randint(0, 5, (6, 4)), torch.randn(6, 4)]
    gm = make_fx(f)(*inputs)
    graph = lower_graph(gm, inputs)
    sched = schedule(graph)
    steps = sched.steps
    where = {n.name: k for k, s in enumerate(steps) if isinstance(s, ir.KernelGroup) for n in s.nodes}
    scatters = [b for b in graph.buffers if isinstance(b, ir.ScatterBuffer)]
    assert len(scatters) == 1
    sb = scatters[0]
    k = where[sb.name]
    assert steps[k].nodes == [sb]
    assert where[sb.target.name] < k
    readers = [where[b.name] for b in graph.buffers if sb.name in b.reads() and b.name in where]
    assert readers and all(r > k for r in readers)
    assert (sb.name, sb.target.name) in sched.plan.allocs[k]
    text = ir.format_ir([sb])
    assert "Scatter(ranges=[6, 4], mode=sum" in text and f"in place of {sb.target.name}" in text


# ------------------------------------------------------------------------------ embedding_bag

@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_lowered(codegen, mode):
    """Bags of 2, 0 (empty: offsets repeat) and 3 positions, padding_idx, per-sample weights, 2-D
    input (fixed-size bags) and bfloat16: each a scatter of the looked-up rows into their bag."""
    w, idx, off = torch.randn(10, 4), torch.tensor([1, 2, 4, 5, 4, 3, 9, 0]), torch.tensor([0, 2, 2, 5])
    F = torch.nn.functional
    check(lambda w, i, o: (F.embedding_bag(i, w, o, mode=mode), F.embedding_bag(i, w, o, mode=mode, padding_idx=4),
                           F.embedding_bag(i.reshape(2, 4), w, mode=mode)), [w, idx, off])
    check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode), [w.bfloat16(), idx, off])
    if mode == "sum":
        check(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
              [w, idx, off, torch.rand(8)])


def test_embedding_bag_unsupported_falls_back(codegen):
    w, idx = torch.randn(10, 4), torch.tensor([1, 2, 4, 5, 4, 3, 9, 0])
    F = torch.nn.functional
    check(lambda w, i, o: F.embedding_bag(i, w, o, mode="max"), [w, idx, torch.tensor([0, 2, 2, 5])], fallbacks=1)
    check(lambda w, i, o: F.embedding_bag(i, w, o, include_last_offset=True), [w, idx, torch.tensor([0, 2, 5, 8])],
          fallbacks=1)


def test_embedding_bag_out_of_range_raises(codegen):
    """An index past the table, or a first offset other than 0 (positions before it belong to no
    bag): ATen raises, so must the compiled graph."""
    F = torch.nn.functional
    w = torch.randn(10, 4)
    for idx, off in ((torch.tensor([1, 10, 3]), torch.tensor([0, 1])), (torch.tensor([1, 2, 3]), torch.tensor([1, 2]))):
        fn = lambda w, i, o: F.embedding_bag(i, w, o)  # noqa: E731
        _eager_raises(fn, [w, idx, off])
        rt = compile_fn(fn, [w, idx, off])
        assert fallback_count(rt) == 0
        with pytest.raises(RuntimeError):
            rt(w, idx, off)
            check_all_statuses()   # CUDA: the status word is read after the launch


def test_dynamic_sizes_one_graph(codegen):
    """Symbolic sizes: the source ranges, the scattered dim's bound and the strides are kernel
    arguments; one compiled graph serves every size."""
    def f(x, i, s, v, j):
        return x.scatter_add(0, i, s), torch.index_put(x, (j,), v, accumulate=True)

    def inputs(n):
        return [torch.randn(n, 4), torch.randint(0, n, (n + 2, 4)), torch.randn(n + 2, 4), torch.randn(n + 1, 4),
                torch.randint(-n, n, (n + 1,))]

    rt = compile_fn(f, inputs(5), dynamic=True)
    code = compiled_graph(rt).code
    assert "size(0)" in code and fallback_count(rt) == 0
    for n in (5, 3, 9):
        args = inputs(n)
        assert rt.check(args) == "", (n, rt.check(args))
        assert_same(rt(*args), f(*args))
    assert compiled_graph(rt).code is code


# ------------------------------------------------------------------ one element per row: pointwise

def nll_grad_like(logits, labels, g):
    """nll_loss's backward as its decomposition writes it: -1 scattered at each label into zeros,
    times the incoming gradient, then the softmax backward's row sum."""
    onehot = torch.zeros_like(logits).scatter(1, labels.unsqueeze(1), -1.0)
    grad = onehot * g
    return grad - logits.softmax(1) * grad.sum(1, keepdim=True)


@pytest.mark.parametrize("case", ["nll_grad", "src_dim0", "value_last_dim"])
def test_one_element_per_row_scatter_fuses_as_a_select(codegen, case):
    """A scatter whose index has size 1 along dim and self's sizes elsewhere writes one element per
    row: it is a select (a Pointwise) that fuses with its readers, not a ScatterBuffer kernel that
    writes the whole tensor for them to read back. Results match eager's."""
    if case == "nll_grad":
        fn = nll_grad_like
        args = [torch.randn(6, 50), torch.randint(0, 50, (6,)), torch.randn(6, 1)]
    elif case == "src_dim0":
        fn = lambda x, i, s: (x.scatter(0, i, s) * 2).sum(0)        # noqa: E731
        args = [torch.randn(5, 7), torch.randint(0, 5, (1, 7)), torch.randn(3, 9)]
    else:
        fn = lambda x, i: x.relu().scatter(-1, i, 2.5).exp()        # noqa: E731
        args = [torch.randn(4, 3, 6), torch.randint(0, 6, (4, 3, 1))]
    rt = check(fn, args)
    from tracetorch.compiler.backend.lowering import lower_graph
    graph = lower_graph(make_fx(fn)(*args), args)
    assert not any(isinstance(b, ir.ScatterBuffer) for b in graph.buffers)
    if codegen == "triton":            # the range check stays (status word)
        assert "index out of bounds" in compiled_graph(rt).code


def test_one_element_per_row_scatter_out_of_range_raises(codegen):
    """ATen raises on a scatter index out of range; the select form reports it too (C++: the
    status word; Triton: the index reads as 0 and the status word raises after the launch)."""
    fn = lambda x, i: x.scatter(1, i, -1.0) * 3      # noqa: E731
    args = [torch.randn(4, 5), torch.tensor([[1], [7], [0], [2]])]
    _eager_raises(fn, args)
    rt = compile_fn(fn, args)
    assert fallback_count(rt) == 0
    with pytest.raises(RuntimeError):
        rt(*args)
        check_all_statuses()
