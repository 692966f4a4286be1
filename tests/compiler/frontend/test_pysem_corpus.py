"""The Python-semantics corpus (tests/compiler/frontend/pysem): every program run eagerly and
compiled (backend="eager"), called several times with changed inputs and changed global state;
results, result types, mutated inputs and observed state must match (issue 16)."""
import pytest

from tracetorch import compiler
from tests.compiler.frontend.pysem import all_cases, run_case

CASES = all_cases()


@pytest.mark.parametrize("case_", CASES, ids=[f"{c.feature}:{c.name}" for c in CASES])
def test_program_matches_eager(case_):
    compiler.reset()
    outcome = run_case(case_, lambda fn: compiler.compile(fn, backend="eager"))
    assert not outcome.diffs, "\n".join(outcome.diffs)


def test_corpus_covers_every_feature_with_enough_programs():
    features = {}
    for c in CASES:
        features[c.feature] = features.get(c.feature, 0) + 1
        assert c.calls >= 2
    assert set(features) == {"containers", "iterators", "closures", "classes", "records",
                             "exceptions", "global_state", "ambient", "builtins", "stdlib"}
    assert all(n >= 5 for n in features.values()), features
