"""Random programs (pysem/generator.py: control flow, containers, closures, globals, breaks) run
eagerly and compiled, differentially, for a bounded number of seeds (issue 16). At scale:
scripts/fuzz_frontend.py."""
import time

import pytest

from tracetorch import compiler
from tests.compiler.frontend.pysem import run_case
from tests.compiler.frontend.pysem.generator import case_for, generate

SEEDS = range(0, 40)
BUDGET_S = 40.0
_start = [None]


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_program_matches_eager(seed):
    if _start[0] is None:
        _start[0] = time.perf_counter()
    if time.perf_counter() - _start[0] > BUDGET_S:
        pytest.skip("time budget for generated programs spent (the script runs them at scale)")
    compiler.reset()
    case_ = case_for(seed)
    outcome = run_case(case_, lambda fn: compiler.compile(fn, backend="eager"))
    assert not outcome.diffs, case_.source + "\n" + "\n".join(outcome.diffs)


def test_generator_is_deterministic_and_varied():
    assert generate(3) == generate(3)
    sources = {generate(s) for s in range(20)}
    assert len(sources) == 20
    text = "".join(sources)
    for construct in ("for ", "if ", "def f", "nonlocal", "lambda", "brk(", "global COUNTER",
                      ".keys()", "try:", "while "):
        assert construct in text, construct
