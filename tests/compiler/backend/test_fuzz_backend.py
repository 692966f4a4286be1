"""The differential fuzzer (tests/compiler/backend/fuzz/) in CI: a bounded number of seeded
programs per target, each compiled and compared with eager over its calls (new values and new
sizes included). A failure prints the delta-reduced program. At scale: scripts/fuzz_backend.py.

Rounding differences (compare.is_rounding: no farther from a float64 reference than eager) and
output-stride differences are allowed here; wrong values and crashes are not.
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
