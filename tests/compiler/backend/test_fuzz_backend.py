"""The differential fuzzer (tests/compiler/backend/fuzz/) in CI: a bounded number of seeded
programs per target, each compiled and compared with eager over its calls (new values and new
sizes included). A failure prints the delta-reduced program. At scale: scripts/fuzz_backend.py.

Rounding differences (compare.is_rounding: no farther from a float64 reference than eager; or
ulp_envelope.within: inside eager's own answers when its inexact math rounds by an ulp the other
way) and output-stride differences are allowed here; wrong values and crashes are not.
"""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from tests.compiler.backend.fuzz.generator import generate  # noqa: E402
from tests.compiler.backend.fuzz.reducer import report  # noqa: E402
from tests.compiler.backend.fuzz.runner import run_program  # noqa: E402

#: (target, first seed, programs): CI seeds are fixed; the script draws other ranges
#: (C++ programs cost a compiler run per graph, a few seconds here; Triton ones run interpreted)
BUDGET = {"cpp": (1000, 10), "triton": (2000, 24), "frontend": (3000, 6)}


@pytest.mark.parametrize("target", sorted(BUDGET))
def test_fuzz_programs_match_eager(target, backend_cache_dir):
    first, n = BUDGET[target]
    failures = []
    ran = 0
    for seed in range(first, first + n):
        prog = generate(seed, max_lines=12)
        res = run_program(prog, target, max_calls=2)
        if res.status == "invalid":
            continue
        ran += 1
        if res.status in ("wrong", "crash"):
            failures.append(report(prog, target))
    assert ran >= n // 2, f"only {ran} of {n} programs were valid eager programs"
    assert not failures, "\n".join(failures)


def test_reducer_keeps_the_failure_and_shrinks():
    """The reducer's contract on a program made to fail: a compiled result that differs."""
    from tests.compiler.backend.fuzz import runner
    prog = generate(7, max_lines=10)
    calls = []

    def broken(fn):
        def run(*args):
            calls.append(1)
            out = fn(*args)
            leaves = out if isinstance(out, tuple) else (out,)
            return tuple(x + 1 if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else
                         (~x if isinstance(x, torch.Tensor) and x.dtype == torch.bool else
                          (x + 1 if isinstance(x, torch.Tensor) else x)) for x in leaves)
        return run

    runner.TARGETS["broken"] = (broken, {})
    try:
        assert run_program(prog, "broken").status == "wrong"
        text = report(prog, "broken")
    finally:
        del runner.TARGETS["broken"]
    assert "wrong" in text and text.count("\n    ") <= prog.source().count("\n    ")


def test_reference_sums_are_exact():
    """The float64 reference sums exactly: 1e30 - 1e30 cancel whatever the order, so the small
    terms survive (float64 in ATen's lane order absorbs them, repeating eager's float32 answer)."""
    from tests.compiler.backend.fuzz.compare import exact_sums
    x = torch.tensor([[-1.5, 1e30, -1e30, -0.5, 0.25], [1.0, 2.0, float("nan"), 3.0, 4.0]], dtype=torch.float64)
    with exact_sums():
        s, m, ns, full = x.sum(1, keepdim=True), x.mean(1), x.nansum(1), x[:1].sum()
    assert s.shape == (2, 1) and s[0, 0].item() == -1.75 and torch.isnan(s[1, 0])
    assert m[0].item() == -1.75 / 5 and ns[1].item() == 10.0 and full.item() == -1.75


def test_reference_sums_of_a_0d_tensor_run_as_they_are():
    """`v.norm().mean(-1)`: a reduction of a 0-d tensor is its value; the exact-sum rule divided
    by its 0 dims and the whole rounded reference was lost (fuzz 481589)."""
    from tests.compiler.backend.fuzz.compare import exact_sums
    from tests.compiler.backend.fuzz.rounded_reference import rounded_reference
    x = torch.tensor(2.5)
    with exact_sums():
        assert x.mean(-1).item() == 2.5 and x.sum(0).item() == 2.5
    assert rounded_reference(lambda t: (t.norm().mean(-1),), [torch.tensor([3.0, 4.0])])[0].item() == 5.0


def test_reference_products_are_exact():
    """Products too: overflow and underflow follow the order of factors (1e200 * 1e200 * 0 is NaN
    left to right, 0 exactly); only a NaN factor or an infinity times a zero gives NaN."""
    from tests.compiler.backend.fuzz.compare import exact_sums
    x = torch.tensor([[1e200, 1e200, 0.0, 2.0], [3.0, -2.0, 0.5, 1.0], [float("inf"), 0.0, 1.0, 1.0],
                      [1e-300, 1e-300, 1e300, 1e300]], dtype=torch.float64)
    with exact_sums():
        rows, cols, kept = x.prod(1), x.prod(0), x.prod(1, keepdim=True)
    from fractions import Fraction
    exact = float(Fraction(1e-300) ** 2 * Fraction(1e300) ** 2)      # the floats' own product: not 1.0
    assert rows[0].item() == 0.0 and rows[1].item() == -3.0 and torch.isnan(rows[2]) and rows[3].item() == exact
    assert kept.shape == (4, 1) and torch.equal(kept[:, 0].nan_to_num(), rows.nan_to_num())
    assert cols[0].item() == float("inf") and cols[1].item() == 0.0 and torch.signbit(cols[1])   # -0.0
    assert cols[3].item() == 2e300


def test_reference_remainders_are_exact():
    """Fuzz 431063: ATen's vectorized float64 remainder is a - floor(a / b) * b, NaN for
    1e308 % 0.3 in a full vector; the reference computes C's exact fmod (Python's % for
    remainder's sign), so a compiled exact answer is judged right and a NaN there is not."""
    from tests.compiler.backend.fuzz.compare import exact_sums, is_rounding
    a = torch.full((16,), 1e308, dtype=torch.float64)
    b = torch.full((16,), 0.3, dtype=torch.float64)
    with exact_sums():
        r, f = a % b, torch.fmod(torch.tensor([-7.5, 7.5]), 2.0)
    assert torch.allclose(r, torch.full((16,), 1e308 % 0.3, dtype=torch.float64)) and f.tolist() == [-1.5, 1.5]
    eager = a % b
    if torch.isnan(eager).any():         # the vectorized path (a machine with a vector unit)
        assert is_rounding(eager, r, r) and not is_rounding(r, eager, r)


def test_rounding_rule_nan_cases():
    """compare's d(x, r): eager NaN where the reference is a number bounds nothing; the
    reference and eager both NaN require NaN; an infinite reference allows no finite value."""
    from tests.compiler.backend.fuzz.compare import is_rounding
    nan, inf = float("nan"), float("inf")

    def rounding(e, c, r):
        return is_rounding(torch.tensor([e]), torch.tensor([c]), torch.tensor([r], dtype=torch.float64))

    assert rounding(nan, 0.0, 0.0)                  # eager invalid (ATen's vectorized fmod)
    assert not rounding(nan, 5.0, nan)              # all but the compiled code say NaN
    assert rounding(1.0, nan, nan)                  # eager's value is decided by rounding
    assert not rounding(inf, 5.0, inf)
    assert rounding(inf, 3.4e38, 1e39)              # overflow at the edge of float32's range
    assert rounding(1.0, 1.0 + 2e-6, 1.0 + 1.5e-6) and not rounding(1.0 + 1e-6, 1.1, 1.0)


def test_isinf_of_a_cancelling_sum_is_rounding(backend_cache_dir):
    """Fuzz seed 340210: isinf(x / s) where s = 1e30 - 1e30 + small terms is 0 in ATen's lane
    order (so eager's quotient is inf) and not in our loop's; the exact sum is -4.57, so eager's
    True is the rounding artifact, and the outcome is rounding, not wrong."""
    res = run_program(generate(340210), "cpp", max_calls=2)
    assert res.status == "rounding", res


def test_a_fake_stride_that_eager_does_not_give_is_upstream(backend_cache_dir):
    """Fuzz seed 420188: eager's `0.1 ** x` on a column-major x returns a contiguous tensor,
    PyTorch's fake tensor (meta) says column-major; so a traced `flatten` copies where eager's
    is a view, and a later in-place op on the base shows in eager's result only. PyTorch's
    own aot_eager (what inductor's graphs see) answers the same as ours: upstream, not wrong."""
    def fn(x):
        y = torch.empty_strided(x.shape, (1, 4, 28), dtype=x.dtype)
        y[:] = x
        p = 0.1 ** y
        flat = p.flatten()
        p.clamp_(-1, 1)
        return flat,

    x = -torch.rand(4, 7, 3, dtype=torch.float16)
    assert (0.1 ** torch.empty_strided(x.shape, (1, 4, 28))).is_contiguous()   # eager's kernel
    torch._dynamo.reset()
    assert not torch.equal(torch.compile(fn, backend="aot_eager")(x.clone())[0], fn(x.clone())[0])

    class OneCall:             # the runner's view of a program: a function and its calls' inputs
        calls = [None]

        def function(self):
            return fn

        def make_inputs(self, k):
            return [x.clone()]

    res = run_program(OneCall(), "cpp")
    assert res.status == "upstream" and "torch_aot_eager" in res.detail, res


def _amplified_atan2(a, b, big):
    """Fuzz 360397's shape: `% small` makes atan2's 1-ulp error a large relative one, and `huge //`
    that turns it into a different float (ATen's atan2f is 1 ulp off on some lanes)."""
    v = torch.atan2(a, b) % torch.frac(b * 7)
    return big // v


def _atan2_inputs():
    g = torch.Generator().manual_seed(3)
    return [torch.rand(16, generator=g) + 0.5, torch.rand(16, generator=g) * 3 + 1, torch.full((16,), 9.1e9)]


@pytest.mark.parametrize("ulps", [1, 6])
def test_ulp_envelope_bounds_one_ulp_of_inexact_math(ulps):
    """A compiled atan2 that rounds by one ulp the other way stays inside eager's envelope
    however much the program amplifies it; one that is 6 ulps off (a wrong formula) does not."""
    from tests.compiler.backend.fuzz.ulp_envelope import envelope, within
    inputs = _atan2_inputs()
    bounds = envelope(_amplified_atan2, inputs)
    a, b, big = inputs
    exact = torch.atan2(a.double(), b.double()).float()
    off = exact
    for _ in range(ulps):   # every other element moved, away from eager's own answer
        off = torch.where(torch.arange(16) % 2 == 0, torch.nextafter(off, torch.full_like(off, 9.0)), off)
    compiled = big // (off % torch.frac(b * 7))
    eager = _amplified_atan2(*inputs)
    assert not torch.equal(compiled, eager)       # the amplification is real
    assert within(compiled, bounds[0]) == (ulps == 1)


def test_ulp_envelope_needs_an_inexact_call():
    """A program of exactly rounded ops (add, div, floor) has no envelope: any difference there
    is judged by the float64 reference alone."""
    from tests.compiler.backend.fuzz.ulp_envelope import envelope
    assert envelope(lambda x: (x + 1) // 0.1, [torch.randn(8)]) is None


def _moved(t, ulps):
    for _ in range(abs(ulps)):
        t = torch.nextafter(t, torch.full_like(t, float("inf") if ulps > 0 else float("-inf")))
    return t


@pytest.mark.parametrize("ulps", [2, 3])
def test_ulp_envelope_moves_two_calls_at_once(ulps):
    """Two inexact results off in opposite directions add up in a difference: eager's envelope
    moves every pair of calls each way, so 2 ulps each (its ULPS) stay inside; 3 do not."""
    from tests.compiler.backend.fuzz.ulp_envelope import envelope, within
    g = torch.Generator().manual_seed(5)
    a = torch.rand(16, generator=g) + 1
    b = a + torch.rand(16, generator=g) * 1e-3      # nearly equal: the difference shows the ulps

    def fn(a, b):
        return (torch.exp(a) - torch.exp(b)) * 1000

    compiled = (_moved(torch.exp(a), ulps) - _moved(torch.exp(b), -ulps)) * 1000
    assert within(compiled, envelope(fn, [a, b])[0]) == (ulps == 2)


@pytest.mark.parametrize("dropped", [False, True])
def test_ulp_envelope_bounds_a_sum_by_its_terms(dropped):
    """Fuzz 400190: terms of +-200 that cancel to about 60, summed in float32 in another order
    (Triton's tree), differ by many ulps of the sum, and exp2 amplifies that; the envelope moves
    a sum by its terms' magnitude, so that stays inside. A term lost from the sum does not."""
    from tests.compiler.backend.fuzz.ulp_envelope import envelope, within
    g = torch.Generator().manual_seed(11)
    x = (torch.rand(32, 7, generator=g) - 0.5) * 400

    def fn(x):
        return torch.exp2(x.nansum(1) / 8)

    tree = x.clone()
    while tree.shape[1] > 1:             # pairwise, float32 throughout
        if tree.shape[1] % 2:
            tree = torch.cat([tree, torch.zeros(32, 1)], 1)
        tree = tree[:, 0::2] + tree[:, 1::2]
    s = tree[:, 0] - (x[:, 0] * 1e-3 if dropped else 0)
    assert within(torch.exp2(s / 8), envelope(fn, [x])[0]) == (not dropped)


@pytest.mark.parametrize("wrong", [False, True])
def test_a_sum_whose_bound_spans_zero_may_cancel_exactly(wrong):
    """Fuzz 471527: terms of +-1e30 with small ones between sum to 0.01 in eager's order and to
    exactly 0.0 in another, and `x != 0` flips; the envelope's one-ulp moves put such a sum on 0.
    A nonzero sum whose bound does not reach 0 cannot be 0."""
    from tests.compiler.backend.fuzz.ulp_envelope import envelope, within
    x = torch.tensor([[1e30, -1e30, 0.25], [1.0, 2.0, 3.0]])

    def fn(x):
        return (x.nansum(1) != 0,)

    assert fn(x)[0].tolist() == [True, True]      # eager: (1e30 - 1e30) + 0.25
    compiled = torch.tensor([False, not wrong])   # (1e30 + 0.25) - 1e30 is 0; row 1 is 6 in any order
    assert within(compiled, envelope(fn, [x])[0]) == (not wrong)


@pytest.mark.parametrize("wrong", [False, True])
def test_an_exact_product_where_eager_overflows_is_rounding(wrong):
    """Fuzz 390633: ATen's float16 prod accumulates in float16, so 300 * 300 overflows before
    the two 1/300 factors; the compiled product is exact (1.0 here). An integer test of a float16
    value afterwards differs from eager's (inf) and from the float64 reference's (not an integer
    there; every float16 above 2048 is one). The program with each op rounded once in its own
    dtype gives the compiled answer: rounding. A True in the second column, where no rule gives
    one, stays wrong."""
    from tests.compiler.backend.fuzz.runner import _Judges
    x = torch.tensor([[300.0, 0.01], [300.0, 1.0], [1 / 300, 1.0], [1 / 300, 1.0]], dtype=torch.float16)

    def fn(x):
        v = torch.lgamma(x.prod(0) * 500)
        return v == v.to(torch.int16)

    eager = fn(x.clone())
    v = torch.lgamma(x.float().prod(0) * 500).half()
    compiled = v == v.to(torch.int16)
    assert eager.tolist() == [False, False] and compiled.tolist() == [True, False]
    answer = torch.tensor([True, True]) if wrong else compiled
    assert _Judges(fn, [x]).explain(0, eager, answer) == (not wrong)


@pytest.mark.parametrize("wrong", [False, True])
def test_an_undefined_cast_may_give_any_of_its_values(wrong):
    """Fuzz 421129: a float -> uint8 cast of 1.29e16 is undefined (PyTorch's docs); eager gave 0
    in a vectorized loop and 126 in the scalar one. Such an element may hold any value the
    known paths give (undefined_casts.CHOICES), through the rest of the program; the defined
    elements must still match: a 9 for 3.0 * 2 + 1 stays wrong."""
    from tests.compiler.backend.fuzz.runner import _Judges
    from tests.compiler.backend.fuzz.undefined_casts import CHOICES
    x = torch.tensor([6.45e15, float("nan"), 3.0, -1.0, float("-inf")])

    def fn(x):
        return (x * 2).to(torch.uint8) + 1

    eager = fn(x)
    undefined = torch.tensor([True, True, False, False, True])
    other = torch.where(undefined, CHOICES["saturated"](x * 2, torch.uint8) + 1, eager)
    assert not torch.equal(other, eager)
    if wrong:
        other[2] = 9
    assert _Judges(fn, [x]).explain(0, eager, other) == (not wrong)


def test_an_inplace_op_reading_its_own_memory_is_invalid():
    """Fuzz 370494: `a.add_(a.unbind(0)[0])` on a transposed `a` reads row 0 while it writes it;
    ATen's overlap check gives up on the non-dense row and eager's answer depends on its visiting
    order. Such a program has no reference: invalid, not wrong. Disjoint views and the same view
    (`a.add_(a)`) stay valid."""
    from tests.compiler.backend.fuzz.overlap import WritesReadOverlap
    cases = {"row of itself": (lambda a: a.add_(a.unbind(0)[0]), True),
             "same view": (lambda a: a.add_(a), False),
             "disjoint rows": (lambda a: a[0].add_(a[1]), False),
             "shifted copy": (lambda a: a[0][1:].copy_(a[0][:-1]), True)}
    for name, (fn, undefined) in cases.items():
        a = torch.randn(5, 3).t()
        with WritesReadOverlap() as watch:
            fn(a)
        assert bool(watch.found) == undefined, name


@pytest.mark.parametrize("target", ["cpp", "triton"])
def test_var_of_equal_values_is_zero(target, backend_cache_dir):
    """Fuzz 391996: var over a dim along which an expanded float64 input repeats one value: an
    unshifted two-pass var left about 1e-34 ((x + x + x) / 3 is not x), and log2 of it was
    -112 where eager's Welford gives var 0 and -inf. The shifted two passes give 0."""
    res = run_program(generate(391996), target)
    assert res.status in ("ok", "rounding"), res
