"""OpInfo sweep (CI subset) of compiler.backend, plus self-tests of the sweep harness.

The CI subset is fixed and documented so that it is reproducible and stays well under the time
budget: the ops in CI_OPS (common pointwise, reduction, normalization, view and indexing ops),
the first CI_SAMPLES sample inputs of each, float32, CPU. The full sweep (every op_db entry,
every sample) is `PYTHONPATH=. python scripts/opinfo_report.py`, which writes the lowered
fraction to scripts/results/opinfo_ours_float32.{json,md}.

Hard rule: zero wrong results (and zero errors: an unsupported op must fall back, not raise).
"""
import pytest
import torch

pytest.importorskip("expecttest")     # torch.testing._internal needs it to import op_db

from tracetorch import logs  # noqa: E402
from scripts import opinfo_report as H  # noqa: E402

CI_SAMPLES = 1      # C++ kernels are built with g++ per graph: keep CI under its time budget
CI_OPS = [
    # pointwise
    "abs", "neg", "exp", "log", "sin", "cos", "tanh", "sigmoid", "sqrt", "rsqrt", "erf", "floor",
    "add", "sub", "mul", "div.no_rounding_mode", "pow", "maximum", "minimum", "where", "clamp",
    "eq", "lt", "logical_not", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    # reductions and normalizations
    "sum", "mean", "amax", "amin", "prod", "var", "argmax", "softmax", "log_softmax",
    "nn.functional.layer_norm",
    # views, layout and indexing
    "permute", "transpose", "expand", "reshape", "cat", "index_select", "mm",
    # scans and sorts (log-step / bitonic Pointwise passes)
    "cumsum", "sort",
]


def _names(records, status):
    return [r["op"] for r in records if r["status"] == status]


@pytest.fixture(scope="module")
def db():
    return {H.op_name(op): op for op in H.op_db()}


# ------------------------------------------------------------------ harness self-tests

def _wrong_backend(gm, example_inputs):
    def run(*args):
        out = gm(*args)
        return torch.utils._pytree.tree_map(
            lambda t: t + 1 if isinstance(t, torch.Tensor) and t.is_floating_point() else t, out)
    return run


def _fallback_backend(gm, example_inputs):
    logs.artifact("perf_hint", lambda: {"op": "aten.stand_in"}, op="aten.stand_in",
                  reason="stand-in fallback")
    return gm


def _raising_backend(gm, example_inputs):
    raise RuntimeError("stand-in compile failure")


@pytest.mark.parametrize("backend,expected", [
    (lambda gm, ex: gm, "lowered"),
    (_wrong_backend, "wrong"),
    (_fallback_backend, "fallback"),
    (_raising_backend, "error"),
])
def test_harness_classifies(db, backend, expected):
    rec = H.run_op(backend, db["add"], max_samples=2)
    assert rec["status"] == expected, rec
    assert sum(rec["counts"].values()) == 2


def test_harness_skips_random_ops(db):
    rec = H.run_op(lambda gm, ex: gm, db["nn.functional.dropout"], max_samples=1)
    assert rec["status"] == "skipped"


def test_harness_detects_shape_and_dtype_mismatch():
    ref = torch.ones(3)
    assert H._compare(torch.ones(3), ref, torch.float32) is None
    assert "vs eager" in H._compare(torch.ones(4), ref, torch.float32)
    assert "vs eager" in H._compare(torch.ones(3, dtype=torch.float64), ref, torch.float32)
    assert H._compare(torch.ones(3) + 1e-3, ref, torch.float32) is not None
    nan = torch.tensor([float("nan"), 1.0])
    assert H._compare(nan.clone(), nan, torch.float32) is None


# ------------------------------------------------------------------ the real sweep (CI subset)

def test_opinfo_subset_never_wrong(db):
    from tracetorch import compiler
    records = [H.run_op(compiler.backend, db[name], max_samples=CI_SAMPLES) for name in CI_OPS]
    summary = H.summarize(records)
    print(f"\nOpInfo CI subset ({len(CI_OPS)} ops, {CI_SAMPLES} samples each, float32): lowered "
          f"{summary['lowered']}/{summary['considered']} "
          f"({100 * summary['lowered_fraction']:.0f}%), fell back {_names(records, 'fallback')}")
    bad = [(r["op"], r["status"], r["detail"]) for r in records if r["status"] in ("wrong", "error")]
    assert not bad, bad
    assert summary["considered"] >= len(CI_OPS) - 2   # the subset must actually exercise ops


@pytest.mark.parametrize("name", ["stack", "tile", "unflatten", "matmul"])
def test_every_sample_with_empty_results_is_lowered(db, name):
    """All samples of ops whose samples include zero-element results: each is lowered (an empty
    buffer, nothing computed) and equal to eager, not run eagerly after a NaN index expression."""
    from tracetorch import compiler
    rec = H.run_op(compiler.backend, db[name])
    assert rec["status"] == "lowered", rec


def test_random_samples_are_skipped(db):
    """OpInfo reseeds eager on every call for sdpa with dropout (wrapper_set_seed): those samples
    draw random numbers and are skipped, the deterministic ones are compared and lowered."""
    from tracetorch import compiler
    rec = H.run_op(compiler.backend, db["nn.functional.scaled_dot_product_attention"])
    assert rec["counts"].get("skipped", 0) >= 1 and rec["counts"].get("wrong", 0) == 0, rec
    assert rec["counts"].get("lowered", 0) >= 1, rec
