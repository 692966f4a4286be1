"""Python's // and % on ints that may be negative, inside a compiled graph. Sizes are
non-negative, and their index forms print as C's truncating division; a user's int (`-2 // n`,
`n % 3` with n < 0) must floor as Python does (fuzz_frontend seeds 18 and 117: -2 // 3 gave 0)."""

import pytest
import torch

from tracetorch import compiler


FORMS = {
    "negative_floordiv": lambda x, n: x + (-2 // (n or 1)),
    "mod_of_a_negative": lambda x, n: x + ((-7) % (n or 1)),
    "floordiv_of_n": lambda x, n: x + (n // 3),
    "mod_of_n": lambda x, n: x + (n % 3),
    "floordiv_of_minus_n": lambda x, n: x * (-n // 4),
}


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_floor_division_and_modulo_of_ints_follow_python(codegen, form):
    f = FORMS[form]
    opt = compiler.compile(f, options={"backend.cpu_codegen": codegen, "backend.cache_enabled": False})
    for n in (2, 3, -5, 7, -1):               # the int turns dynamic from the second call on
        x = torch.randn(4)
        torch.testing.assert_close(opt(x, n), f(x, n))


def test_sizes_keep_their_index_form():
    """x.shape[0] // 2 on a dynamic size is still plain index arithmetic (no wrapper scalar)."""
    def f(x):
        return x[: x.shape[0] // 2] * 2 + (x.shape[0] % 3)

    opt = compiler.compile(f, options={"backend.cache_enabled": False})
    for n in (4, 5, 7, 10):
        x = torch.randn(n)
        torch.testing.assert_close(opt(x), f(x))
