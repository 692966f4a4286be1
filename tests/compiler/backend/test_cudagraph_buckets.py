"""CUDA graphs of dynamic-shape graphs replay their size's bucket (runtime/cudagraph_buckets.py):
inputs padded, outputs cut back, only where the graph proves padded rows unseen. Checked on CPU
with the stand-in recorder, which re-runs the graph on replay and writes into the recorded
outputs as a real replay would. Every result is compared with eager, at each size."""

import pytest
import sympy
import torch

from tracetorch import compiler
from tracetorch.compiler.backend.runtime import cudagraph_buckets as buckets
from tracetorch.compiler.backend.runtime import cudagraphs

STAND_IN = {"testing.cudagraph_stand_in": True, "backend.cache_enabled": False, "backend.cudagraph_buckets": True}
SIZES = (2, 3, 5, 6, 7, 5, 9, 12, 3)
TABLE = torch.randn(3, 4)


def named(events, name):
    return [e for e in events if e.name == name]


def run_sizes(f, make, sizes=SIZES, **options):
    """f compiled with CUDA graphs, called at each size; every result checked against eager; the
    first call's results checked again at the end (later replays must not overwrite them)."""
    opt = compiler.compile(f, mode="reduce-overhead", options={**STAND_IN, **options})
    first = kept = None
    with torch.no_grad():
        for n in sizes:
            args = make(n)
            got, want = opt(*args), f(*args)
            torch.testing.assert_close(got, want)
            if first is None:
                first, kept = got, [t.clone() for t in (got if isinstance(got, tuple) else (got,))]
    for got, want in zip(first if isinstance(first, tuple) else (first,), kept):
        torch.testing.assert_close(got, want)


def test_bucket_sizes_cover_every_size_with_little_padding():
    sizes = range(1, 3000)
    got = [buckets.bucket_size(n) for n in sizes]
    assert all(b >= n for n, b in zip(sizes, got))
    assert all(b <= 2 * n for n, b in zip(sizes, got))
    assert all(b <= 1.25 * n for n, b in zip(sizes, got) if n > 32)
    assert all(a <= b for a, b in zip(got, got[1:]))            # monotone
    assert len(set(got)) < 60                                   # few recordings for many sizes


def test_dynamic_batch_replays_its_bucket(events):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4)).eval()
    run_sizes(model, lambda n: (torch.randn(n, 16),))
    enabled = [e for e in named(events, "cudagraph_enabled") if e.fields.get("buckets")]
    assert len(enabled) == 1                        # the dynamic graph (the first call's is static)
    used = {(e.fields["size"], e.fields["bucket"]) for e in named(events, "cudagraph_bucket")}
    assert (5, 8) in used and (9, 16) in used
    # one recording per bucket at most (3 -> 4, 5..7 -> 8, 9..12 -> 16): not one per size
    records = named(events, "cudagraph_record")
    assert 1 <= len(records) <= 3, [e.fields for e in records]


def test_outputs_are_cut_back_along_a_multiple_of_the_size(events):
    def f(x, table):
        return (x * 2).reshape(-1), torch.nn.functional.embedding(x.long().clamp(0, 9), table).sum(-1)

    table = torch.randn(10, 3)
    run_sizes(f, lambda n: (torch.randint(0, 10, (n, 4)).float(), table))
    assert named(events, "cudagraph_bucket")


@pytest.mark.parametrize("f, why", [
    (lambda x: x - x.mean(0), "mixes axis 0"),                           # a reduction over the batch
    (lambda x: x * x.shape[0], "reads a size as a value"),
    (lambda x: x + TABLE[torch.arange(x.shape[0]) % 3], "arange"),     # padded rows index past 3
    (lambda x: torch.cat([x, x * 2]), "mixes axis 0"),                   # rows move
    (lambda x: (x @ x.t()).sum(1), "mixes axis"),                        # the contraction is the batch
])
def test_graphs_that_would_see_padded_rows_record_each_size(events, f, why):
    run_sizes(f, lambda n: (torch.randn(n, 4),))
    refused = named(events, "cudagraph_buckets_refused")
    assert refused and why in refused[0].fields["reason"], [e.fields for e in refused]
    assert not named(events, "cudagraph_bucket")


def test_rows_indexed_by_their_own_position_keep_their_bucket(events):
    """transformers' masks index rows by arange(batch): padded, each row still reads itself."""
    def f(x):
        rows = torch.arange(x.shape[0])
        return x[rows[:, None], torch.arange(4)[None, :]] * 2 + rows[:, None]

    run_sizes(f, lambda n: (torch.randn(n, 4),))
    assert not named(events, "cudagraph_buckets_refused"), \
        [e.fields for e in named(events, "cudagraph_buckets_refused")]
    assert named(events, "cudagraph_bucket")


def test_a_view_with_the_size_in_an_inner_axis_is_refused(events):
    def f(x):                     # (4, s) -> (4 * s): padded columns would land between real ones
        return (x.reshape(-1) * 2).reshape(4, -1) + 1

    run_sizes(f, lambda n: (torch.randn(4, n),))
    refused = named(events, "cudagraph_buckets_refused")
    assert refused and "inner axis" in refused[0].fields["reason"], [e.fields for e in refused]


def test_padded_rows_repeat_the_last_real_row():
    src = torch.arange(6).reshape(3, 2)
    out = buckets.pad_into(torch.full((5, 2), -1), src, 0)
    torch.testing.assert_close(out[:3], src)
    torch.testing.assert_close(out[3:], src[2:].expand(2, 2))
    wide = buckets.pad_into(torch.full((3, 4), -1), src, 1)
    torch.testing.assert_close(wide[:, :2], src)
    torch.testing.assert_close(wide[:, 2:], src[:, 1:].expand(3, 2))


def test_a_bucket_outside_the_size_range_or_a_guard_is_not_used():
    s = sympy.Symbol("s0", integer=True, positive=True)
    plan = buckets.Plan(s, {0: 0}, [], {0: {0: s}}, high=6)
    assert plan.fit([torch.randn(5, 2)]) is None            # bucket 8 > 6
    assert plan.fit([torch.randn(3, 2)]) == (3, 4)
    guarded = buckets.Plan(s, {0: 0}, [], {0: {0: s}}, guards=[sympy.Eq(sympy.Mod(s, 3), 0)])
    assert guarded.fit([torch.randn(3, 2)]) is None          # 4 is not a multiple of 3
    assert plan.fit([torch.randn(2, 3).t()]) is None         # not contiguous: its own size


def test_buckets_can_be_turned_off(events):
    assert compiler.config.backend.cudagraph_buckets is True      # on by default
    model = torch.nn.Linear(8, 3)
    run_sizes(model, lambda n: (torch.randn(n, 8),), **{"backend.cudagraph_buckets": False})
    assert not named(events, "cudagraph_bucket")
    assert [e for e in named(events, "cudagraph_buckets_refused") if "is off" in e.fields["reason"]]


def test_a_runner_without_a_plan_keys_recordings_by_exact_size():
    runner = cudagraphs.CudaGraphRunner(lambda x: [x * 3], [], cudagraphs.EagerRecorder())
    for n in (3, 3, 3, 5, 5):
        x = torch.randn(n)
        torch.testing.assert_close(runner(x)[0], x * 3)
    assert len(runner.recordings) == 2


def test_a_convolutional_network_in_eval_mode_keeps_its_batch_bucket(events):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5)).eval()
    run_sizes(model, lambda n: (torch.randn(n, 3, 8, 8),), sizes=(2, 3, 5, 6, 3))
    assert not named(events, "cudagraph_buckets_refused"), \
        [e.fields for e in named(events, "cudagraph_buckets_refused")]
    assert named(events, "cudagraph_bucket")


def test_outputs_not_at_the_bucket_size_drop_the_buckets_with_a_warning(events):
    """A graph whose outputs do not follow the padded size (a plan that got a graph wrong) must
    not fail or cut wrong rows: the runner drops its buckets and records each size."""
    s = sympy.Symbol("s0", integer=True, positive=True)
    compiled = lambda x: [x[:2] * 3]     # noqa: E731  (always 2 rows: not the s rows the plan says)
    plan = buckets.Plan(s, {0: 0}, [], {0: {0: s}})
    runner = cudagraphs.CudaGraphRunner(compiled, [], cudagraphs.EagerRecorder(), buckets=plan)
    for n in (3, 3, 5):
        x = torch.randn(n, 2)
        torch.testing.assert_close(runner(x)[0], x[:2] * 3)
    assert runner.buckets is None
    dropped = named(events, "cudagraph_buckets_dropped")
    assert len(dropped) == 1 and "not 4 along axis 0" in dropped[0].fields["reason"]


@pytest.mark.parametrize("f", [
    lambda x: torch.max(x, x * 2) + 1,                              # max.other: a tensor where a dim goes
    lambda x: torch.slice_scatter(torch.zeros_like(x), x[:1], 0, 1, 2) + x,   # writes at moved rows
])
def test_ops_whose_arguments_are_not_the_usual_dims_are_judged_safely(events, f):
    run_sizes(f, lambda n: (torch.randn(n, 4),), sizes=(2, 3, 5, 6, 3))
    assert not [e for e in named(events, "cudagraph_buckets_refused") if "analysis failed" in e.fields["reason"]]
