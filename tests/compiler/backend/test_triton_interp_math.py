"""The Triton interpreter's libdevice stand-ins (runtime/triton_interp_libdevice.py) against eager
on values that expose cancellation and overflow: tiny (1e-30, denormals), huge, near-integer,
NaN/inf and signed zeros. Relative accuracy near 0 matters: a stand-in that answered
tanh(1e-308) = 0 or log1p(1e-36) = 0 changed later comparisons and divisions in fuzz programs.

Every libdevice function the code generator emits has a stand-in (codegen's INTERP_MISSING is
empty): the inverse trigonometric functions, lgamma and erfinv used to make their graphs run
eagerly under the interpreter, so CPU tests never ran their Triton code."""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from tracetorch import compiler  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend.codegen.triton_ops import INTERP_MISSING  # noqa: E402

VALUES = [0.0, -0.0, 1e-38, -1e-30, 1e-8, -3e-5, 0.1, -0.4999, 0.5, 0.7, -1.0, 1.0, 2.0, -3.5, 4.0, 6.0,
          10.0, -20.0, 40.0, 88.0, 1e4, -1e10, 3e19, float("inf"), float("-inf"), float("nan")]
UNARY = ["tanh", "sinh", "cosh", "tan", "asinh", "acosh", "atanh", "log1p", "expm1", "log10", "erfc",
         "trunc", "round", "atan", "asin", "acos", "lgamma", "erfinv"]
BINARY = ["hypot", "fmod", "remainder", "copysign", "pow", "floor_divide", "atan2"]


def _compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend=compiler.backend)


def _check(got, expected):
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=1.3e-6, atol=0)   # the fuzzer's float32 tolerance


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_standin_matches_eager(name, dtype, backend_cache_dir):
    fn = getattr(torch, name)
    x = torch.tensor(VALUES, dtype=dtype)
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(lambda t: fn(t))(x)
    _check(got, fn(x))


@pytest.mark.parametrize("name", BINARY)
def test_binary_standin_matches_eager(name, backend_cache_dir):
    fn = getattr(torch, name)
    v = torch.tensor(VALUES[:-3] + [3.0, 0.25, -7.0])
    a, b = torch.meshgrid(v, v[::3], indexing="ij")
    if name == "pow":
        b = torch.round(b.clamp(-8, 8) * 2) / 2     # exponents whose results stay in range
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(lambda s, t: fn(s, t))(a, b)
    _check(got, fn(a, b))


def test_pow_standin_special_values(backend_cache_dir):
    """C's pow special cases, as libdevice and ATen give them: signed zeros and infinities of
    negative bases (-0.0 included) for odd exponents, no NaN for an infinite base or exponent
    ((-inf) ** 0.1 = inf, (-2) ** inf = inf), 1 for x ** 0, 1 ** y, (-1) ** inf (fuzz 370228,
    370570, 371812, 371960: the stand-in gave +inf for (-0.0) ** -3 and NaN for (-inf) ** 0.1)."""
    inf, nan = float("inf"), float("nan")
    v = torch.tensor([0.0, -0.0, inf, -inf, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, nan, -3.5])
    e = torch.tensor([0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 0.1, 0.001])
    a, b = torch.meshgrid(v, e, indexing="ij")
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(lambda s, t: torch.pow(s, t))(a, b)
    want = torch.pow(a, b)
    _check(got, want)
    assert torch.equal(torch.signbit(got[want == 0]), torch.signbit(want[want == 0]))
    assert torch.equal(torch.signbit(got[want.isinf()]), torch.signbit(want[want.isinf()]))


def test_no_function_lacks_a_standin():
    assert INTERP_MISSING == set()


@pytest.mark.parametrize("name", ["asin", "acos", "erfinv"])
def test_inverse_functions_inside_their_domain(name, backend_cache_dir):
    """Dense values in [-1, 1] (the VALUES above are mostly outside it), ends included."""
    fn = getattr(torch, name)
    x = torch.cat([torch.linspace(-1, 1, 401), torch.tensor([-0.0, 1e-30, -0.99999994, 0.99999994])])
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(lambda t: fn(t))(x)
    _check(got, fn(x))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_pow_matches_eager(dtype, backend_cache_dir):
    """Integer pow (th.int_pow: squaring over the exponent bits, wrapping; negative exponents by
    torch's rule) runs in Triton instead of making the graph run eagerly."""
    a = torch.tensor([2, -3, 1, -1, 0, 7, 3, -2, 5])
    b = torch.tensor([3, 2, -5, -3, 0, 30, 45, 63, 1])
    if dtype == torch.uint8:
        a, b = a.abs(), b.abs()
    a, b = a.to(dtype), b.to(dtype)

    def fn(x, y):
        return torch.pow(x, y), x ** 3
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(fn)(a, b)
    for g, e in zip(got, fn(a, b)):
        assert torch.equal(g, e)


def test_round_keeps_the_sign_of_zero(backend_cache_dir):
    """round(-0.4) is -0.0 (rint's sign); the stand-in gave +0.0, and copysign of it flipped a
    sign (fuzz 400232)."""
    x = torch.tensor([-0.0, 0.0, -0.4, 0.4, -0.5, 0.5, -1.5, 2.5, -2.5, -0.6, 1e30, float("nan"), float("-inf")])
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(lambda t: torch.round(t))(x)
    _check(got, torch.round(x))
    assert torch.equal(torch.signbit(got), torch.signbit(torch.round(x)))


@pytest.mark.parametrize("name", ["pow", "atan2", "hypot", "tanh", "asinh", "expm1", "lgamma"])
def test_float64_standins_within_an_ulp(name, backend_cache_dir):
    """float64 stand-ins call numpy's C math: within an ulp of Python's math module (C's libm),
    as libdevice's double functions are. The float64 formula pow = exp2(b * log2 a) was 5 ulps
    off at 397.8 ** 1.x, and `1e20 % that` turned it into another number (fuzz 421129)."""
    import math
    g = torch.Generator().manual_seed(1)
    a = torch.rand(256, generator=g, dtype=torch.float64) * 1000 + 0.5
    b = torch.rand(256, generator=g, dtype=torch.float64) * 3 - 1
    exact = {"pow": math.pow, "atan2": math.atan2, "hypot": math.hypot, "tanh": lambda x, y: math.tanh(y),
             "asinh": lambda x, y: math.asinh(x), "expm1": lambda x, y: math.expm1(y),
             "lgamma": lambda x, y: math.lgamma(x)}[name]
    fn = {"tanh": lambda x, y: torch.tanh(y), "asinh": lambda x, y: torch.asinh(x),
          "expm1": lambda x, y: torch.expm1(y), "lgamma": lambda x, y: torch.lgamma(x)}.get(name, getattr(torch, name))
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(fn)(a, b)
    ref = torch.tensor([exact(x, y) for x, y in zip(a.tolist(), b.tolist())], dtype=torch.float64)
    ulp = torch.nextafter(ref.abs(), torch.full_like(ref, math.inf)) - ref.abs()
    assert ((got - ref).abs() <= ulp).all(), ((got - ref).abs() / ulp).max()


def test_float64_lgamma_at_poles_and_overflow(backend_cache_dir):
    """C's lgamma is +inf at the poles and where it overflows (|x| beyond 2.6e305); Python's
    math.lgamma raises there, and the stand-in's fallback gave NaN for 1e308 (fuzz 431793)."""
    x = torch.tensor([0.0, -3.0, -1e10, 1e306, 1.7e308, -1.7e308, float("nan"), 2.5], dtype=torch.float64)
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(torch.lgamma)(x)
    _check(got, torch.lgamma(x))


def test_float32_erfc_keeps_relative_accuracy_where_it_is_small(backend_cache_dir):
    """erfc(x) for x in [1, 4): 1 - erf(x) in float32 kept only ~1e-5 of erfc's value near 2, and
    a sum of huge values divided by it was 2e-7 off eager (fuzz 470431). Within 2 float32 ulps
    of C's erfc rounded to float32."""
    import math
    x = torch.linspace(0.5, 4.0, 701)
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.fallback_on_error": False}):
        got = _compile(torch.erfc)(x)
    ref = torch.tensor([math.erfc(v) for v in x.tolist()], dtype=torch.float64).float()
    ulp = torch.nextafter(ref, torch.full_like(ref, math.inf)) - ref
    assert ((got - ref).abs() <= 2 * ulp).all(), ((got - ref).abs() / ulp).max()
    torch.testing.assert_close(got, torch.erfc(x), rtol=1.3e-6, atol=0)
