"""CUDA graphs (mode="reduce-overhead"): the record/replay bookkeeping, checked on CPU with the
stand-in recorder (testing.cudagraph_stand_in), which re-runs the graph on replay and writes into
the recorded output tensors exactly where a real replay would. Every result is compared with
eager. The real recorder runs in scripts/ on the GPU machine."""

import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler import config
from tracetorch.compiler.backend.runtime import cudagraphs

STAND_IN = {"testing.cudagraph_stand_in": True, "backend.cache_enabled": False}


def named(events, name):
    return [e for e in events if e.name == name]


def test_replays_match_eager_and_outputs_survive_later_calls(events):
    def f(x, y):
        return (x * y).relu() + y.sum(), x - 1

    opt = compiler.compile(f, mode="reduce-overhead", options=STAND_IN)
    first_inputs = (torch.randn(8, 4), torch.randn(8, 4))
    first = opt(*first_inputs)
    kept = [t.clone() for t in first]
    for _ in range(4):
        x, y = torch.randn(8, 4), torch.randn(8, 4)
        for got, want in zip(opt(x, y), f(x, y)):
            torch.testing.assert_close(got, want)
    # a later replay must not have overwritten what an earlier call returned
    for got, want in zip(first, kept):
        torch.testing.assert_close(got, want)
    assert len(named(events, "cudagraph_enabled")) == 1
    assert len(named(events, "cudagraph_record")) == 1     # warm-up call, then one recording


def test_mutated_input_is_written_back_after_replay(events):
    def f(x, acc):
        acc.add_(x)
        return acc * 2

    opt = compiler.compile(f, mode="reduce-overhead", options=STAND_IN)
    acc_c, acc_e = torch.zeros(5), torch.zeros(5)
    for _ in range(4):
        x = torch.randn(5)
        torch.testing.assert_close(opt(x, acc_c), f(x, acc_e))
        torch.testing.assert_close(acc_c, acc_e)


def test_new_shapes_record_again_up_to_the_limit(events):
    def f(x):
        return x.sin() * 2

    opt = compiler.compile(f, mode="reduce-overhead", dynamic=False,
                           options={**STAND_IN, "backend.cudagraph_max_recordings": 2})
    for n in (3, 3, 3, 4, 4, 4):
        x = torch.randn(n)
        torch.testing.assert_close(opt(x), f(x))
    records = named(events, "cudagraph_record")
    assert len(records) == 2, [e.fields for e in records]


def test_signatures_beyond_the_limit_turn_graphs_off_with_a_reason():
    compiled = lambda x: [x + 1]  # noqa: E731
    runner = cudagraphs.CudaGraphRunner(compiled, [], cudagraphs.EagerRecorder(), max_recordings=1)
    for n in (2, 2, 3, 3):
        x = torch.randn(n)
        torch.testing.assert_close(runner(x)[0], x + 1)
    assert runner.disabled == "more than 1 input signatures"


def test_parameter_slot_with_another_tensor_records_again(events):
    w = torch.nn.Parameter(torch.randn(4))
    w_before = w.detach().clone()
    compiled = lambda x, w: [x * w]  # noqa: E731
    runner = cudagraphs.CudaGraphRunner(compiled, [], cudagraphs.EagerRecorder())
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(runner(x, w)[0], x * w)
    rec = next(iter(runner.recordings.values()))
    assert rec.in_place == {1} and rec.static_inputs[1] is w    # read in place, not copied
    w2 = torch.nn.Parameter(torch.randn(4))
    torch.testing.assert_close(runner(x, w2)[0], x * w2)
    assert next(iter(runner.recordings.values())).static_inputs[1] is w2
    assert any("other memory" in e.fields.get("reason", "") for e in named(events, "cudagraph_record"))
    torch.testing.assert_close(w.detach(), w_before)          # never written through


def test_inputs_that_persist_are_read_in_place(events):
    """A slot that holds the same memory at the warm-up and the recording call (a module's
    buffers: ResNet-50's batch-norm statistics were copied on every replay) is read in place.
    When other memory arrives there, the graph records again, the slot is copied from then on,
    and nothing is written through to the old tensor."""
    stats = torch.randn(4)
    stats_before = stats.clone()
    compiled = lambda x, s: [x - s]  # noqa: E731
    runner = cudagraphs.CudaGraphRunner(compiled, [], cudagraphs.EagerRecorder())
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(runner(x, stats)[0], x - stats)
    rec = next(iter(runner.recordings.values()))
    assert rec.in_place == {1} and rec.static_inputs[1] is stats
    stats.add_(1.0)                                          # in-place updates are seen
    torch.testing.assert_close(runner(x, stats)[0], x - stats)
    other = torch.randn(4)
    for _ in range(2):
        torch.testing.assert_close(runner(x, other)[0], x - other)
    assert next(iter(runner.recordings.values())).in_place == set()
    assert sum("other memory" in e.fields.get("reason", "") for e in named(events, "cudagraph_record")) == 1
    torch.testing.assert_close(stats, stats_before + 1.0)   # never written through


def test_random_ops_are_recorded_and_draw_what_eager_draws(events):
    """Each call (warm-up, recording, replays) draws from the generator's current state and
    advances it as eager does: the same seed gives eager's numbers, fresh ones on every call."""
    def f(x):
        return x + torch.rand_like(x)

    opt = compiler.compile(f, mode="reduce-overhead", options={**STAND_IN, "backend.cudagraph_random_ops": True})
    x = torch.zeros(6)
    torch.manual_seed(7)
    want = [f(x) for _ in range(4)]
    torch.manual_seed(7)
    got = [opt(x) for _ in range(4)]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert not torch.equal(got[2], got[3])
    assert named(events, "cudagraph_record") and not named(events, "cudagraph_skipped")


def test_random_ops_are_refused_unless_the_option_is_on(events):
    def f(x):
        return x + torch.rand_like(x)

    opt = compiler.compile(f, mode="reduce-overhead", options=STAND_IN)
    x = torch.zeros(6)
    out = opt(x)
    assert ((out >= 0) & (out < 1)).all()
    skipped = named(events, "cudagraph_skipped")
    assert skipped and "backend.cudagraph_random_ops is off" in skipped[0].fields["reason"]


def test_a_random_op_with_its_own_generator_is_refused():
    from tracetorch.compiler.backend.runtime import cudagraphs
    graph = torch.fx.Graph()
    x, gen = graph.placeholder("x"), graph.placeholder("gen")
    drawn = graph.call_function(torch.ops.aten.bernoulli.p, (x, 0.5), {"generator": gen})
    graph.output((drawn,))
    plain = torch.fx.Graph()
    x = plain.placeholder("x")
    plain.output((plain.call_function(torch.ops.aten.bernoulli.p, (x, 0.5)),))
    with compiler.config.patch(**{"testing.cudagraph_stand_in": True,      # CPU inputs allowed
                                  "backend.cudagraph_random_ops": True}):
        assert "generator of its own" in cudagraphs._random_op_refusal(drawn)
        assert cudagraphs.refusal(torch.fx.GraphModule(torch.nn.Module(), plain), [torch.zeros(3)]) is None


def test_cpu_inputs_are_refused_without_the_stand_in(events):
    opt = compiler.compile(lambda x: x * 3, mode="reduce-overhead", options={"backend.cache_enabled": False})
    x = torch.randn(3)
    torch.testing.assert_close(opt(x), x * 3)
    skipped = named(events, "cudagraph_skipped")
    assert skipped and skipped[0].fields["reason"] == "an input is on the CPU"


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(compiler.errors.InvalidUsageError, match="'reduce-overhead'"):
        compiler.compile(lambda x: x, mode="max-speed")


def test_config_default_is_off():
    assert config.backend.cudagraphs is False


def test_persistent_inputs_the_graph_writes_are_written_in_place(events):
    """A slot the graph writes that holds the same memory at the warm-up and the recording call
    (a batch-norm statistic, an optimizer's state) is written by the replay itself: no copy in
    or back, and its version counter still moves at every call, as after the compiled graph.
    Other memory arriving there records again and is copied from then on; the old tensor is
    never written through."""
    def compiled(x, acc):
        acc.add_(x)
        return [acc * 2]

    acc, acc_eager = torch.zeros(5), torch.zeros(5)
    runner = cudagraphs.CudaGraphRunner(compiled, [1], cudagraphs.EagerRecorder())
    for _ in range(4):
        x = torch.randn(5)
        version = acc._version
        torch.testing.assert_close(runner(x, acc)[0], compiled(x, acc_eager)[0])
        torch.testing.assert_close(acc, acc_eager)
        assert acc._version > version
    rec = next(iter(runner.recordings.values()))
    assert 1 in rec.in_place and rec.static_inputs[1] is acc
    assert rec.written_in_place == [1] and rec.copied_back == []
    inputs = named(events, "cudagraph_inputs")
    assert (inputs[0].fields["written_in_place"], inputs[0].fields["copied_back"]) == (1, 0)
    other, other_eager = torch.ones(5), torch.ones(5)
    kept = acc.clone()
    for _ in range(2):
        x = torch.randn(5)
        torch.testing.assert_close(runner(x, other)[0], compiled(x, other_eager)[0])
        torch.testing.assert_close(other, other_eager)
    rec = next(iter(runner.recordings.values()))
    assert 1 not in rec.in_place and rec.copied_back == [1]
    torch.testing.assert_close(acc, kept)                   # never written through


def test_copies_in_and_out_are_batched_and_keep_layouts():
    """copy_out clones the recording's outputs (a channels-last one stays channels-last, as
    Tensor.clone keeps it) and leaves non-tensors and outputs past n as they are."""
    a = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    b = torch.randn(7)
    out = cudagraphs.copy_out([a, 3, b], 2)
    assert out[0] is not a and out[0].stride() == a.stride()
    torch.testing.assert_close(out[0], a)
    assert out[1] == 3 and out[2] is b
    dst = [torch.empty(7), torch.empty(2, 2)]
    cudagraphs.copy_into(dst, [b, torch.ones(2, 2)])
    torch.testing.assert_close(dst[0], b)
    torch.testing.assert_close(dst[1], torch.ones(2, 2))


def test_a_size_passed_as_an_int_is_recorded_per_value(events):
    """A dynamic int input (a slice bound) reaches the recording as an int: it is part of the
    signature and kept as is in the recording's arguments (cloning it crashed)."""
    def f(x, k):
        return (x * 2)[:k] + k

    opt = compiler.compile(f, mode="reduce-overhead", options=STAND_IN)
    for k in (1, 2, 3, 2, 3, 3, 1):
        x = torch.randn(5, 3)
        torch.testing.assert_close(opt(x, k), f(x, k))
    assert named(events, "cudagraph_record")
