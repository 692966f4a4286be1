"""CUDA graphs for training (mode="reduce-overhead" with gradients): the forward and backward
recordings' bookkeeping, checked on CPU with the stand-in recorder (testing.cudagraph_stand_in:
a replay re-runs the graph and writes into the recorded tensors, where a real replay writes).
Every step is compared with the same model trained eagerly: loss, gradients, parameters, buffers."""
import copy

import torch

from tracetorch import compiler

STAND_IN = {"testing.cudagraph_stand_in": True, "backend.cache_enabled": False}


def named(events, name, **fields):
    return [e for e in events if e.name == name and all(e.fields.get(k) == v for k, v in fields.items())]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.GELU(),
                               torch.nn.Linear(16, 3))


def _pair():
    eager = _model()
    ours = copy.deepcopy(eager)
    return eager, ours, compiler.compile(ours, mode="reduce-overhead", options=STAND_IN)


def _same_state(eager, ours):
    for (name, a), b in zip(eager.named_parameters(), ours.parameters()):
        torch.testing.assert_close(b, a, msg=name)
        if a.grad is None:
            assert b.grad is None, name
        else:
            torch.testing.assert_close(b.grad, a.grad, msg=f"grad of {name}")
    for a, b in zip(eager.buffers(), ours.buffers()):
        torch.testing.assert_close(b, a)


def _batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)


def _steps_side_by_side(eager, ours, compiled, momentum=0.0, seed=None, steps=6):
    """SGD steps of the eager model and of the compiled copy, compared after each: the loss, then
    parameters, gradients and buffers. With `seed`, each step of both reseeds the generator first
    (the same dropout masks)."""
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=momentum)
    opt_o = torch.optim.SGD(ours.parameters(), lr=0.1, momentum=momentum)
    for step in range(steps):
        x, y = _batch(step)
        losses = []
        for fn, opt in ((eager, opt_e), (compiled, opt_o)):
            if seed is not None:
                torch.manual_seed(seed + step)
            loss = torch.nn.functional.cross_entropy(fn(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0])
        _same_state(eager, ours)


def test_training_steps_replay_forward_and_backward_and_match_eager(events):
    eager, ours, compiled = _pair()
    _steps_side_by_side(eager, ours, compiled, momentum=0.9)
    assert named(events, "cudagraph_enabled", training=True)
    records = named(events, "cudagraph_record", reason="first recording")
    assert len(records) == 2                                   # forward, backward
    assert named(events, "cudagraph_record", is_backward=True)
    # decided at run time, logged under the id of the compile that made the graph
    enabled = named(events, "cudagraph_enabled", training=True)[0]
    assert enabled.compile_id is not None
    assert all(e.compile_id == enabled.compile_id for e in records), [str(e.compile_id) for e in records]


def test_two_forwards_before_one_backward_do_not_share_saved_values(events):
    """Gradient accumulation over a summed loss: the second forward must not overwrite the
    first's saved values, which its backward has not read yet."""
    eager, ours, compiled = _pair()
    for step in range(4):
        (x1, y1), (x2, y2) = _batch(2 * step), _batch(2 * step + 1)
        for fn in (eager, compiled):
            loss = torch.nn.functional.cross_entropy(fn(x1), y1) + torch.nn.functional.cross_entropy(fn(x2), y2)
            loss.backward()
        _same_state(eager, ours)
        eager.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)
    assert named(events, "cudagraph_skipped")


def test_gradients_accumulate_across_replayed_backwards(events):
    """Two forward/backward pairs before zero_grad: the first gradient, kept in .grad, must not be
    the recording's memory that the second backward replay overwrites."""
    eager, ours, compiled = _pair()
    for step in range(4):
        for micro in range(2):
            x, y = _batch(10 * step + micro)
            for fn in (eager, compiled):
                torch.nn.functional.cross_entropy(fn(x), y).backward()
        _same_state(eager, ours)
        eager.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)


def test_backward_with_retain_graph_keeps_the_saved_values_until_released(events):
    eager, ours, compiled = _pair()
    for step in range(4):
        x, y = _batch(step)
        kept = []
        for fn in (eager, compiled):
            loss = torch.nn.functional.cross_entropy(fn(x), y)
            loss.backward(retain_graph=True)
            kept.append(loss)
        # another replayed step in between must not clobber what the retained graph reads
        x2, y2 = _batch(100 + step)
        for fn in (eager, compiled):
            torch.nn.functional.cross_entropy(fn(x2), y2).backward()
        for loss in kept:
            loss.backward()
        _same_state(eager, ours)
        eager.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)


def test_forward_without_backward_does_not_block_later_replays(events):
    """A forward whose graph is dropped without a backward (an evaluation under grad mode)
    releases its saved values with its autograd context."""
    eager, ours, compiled = _pair()
    for step in range(5):
        x, y = _batch(step)
        for fn in (eager, compiled):
            fn(x)                     # dropped at once
            torch.nn.functional.cross_entropy(fn(x), y).backward()
        _same_state(eager, ours)
        eager.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)
    assert not named(events, "cudagraph_skipped")


def test_input_gradients_kept_by_the_caller_survive_later_replays(events):
    """torch.autograd.grad hands the caller a gradient of the input itself: a later replay must
    not overwrite it (gradients leave the recording's memory as copies)."""
    eager, ours, compiled = _pair()
    kept = {eager: [], compiled: []}
    for step in range(5):
        x, y = _batch(step)
        for fn in (eager, compiled):
            xg = x.clone().requires_grad_()
            loss = torch.nn.functional.cross_entropy(fn(xg), y)
            kept[fn].append(torch.autograd.grad(loss, xg)[0])
    for got, want in zip(kept[compiled], kept[eager]):
        torch.testing.assert_close(got, want)


class _Attention(torch.nn.Module):
    def __init__(self, dropout_p):
        super().__init__()
        self.qkv, self.dropout_p = torch.nn.Linear(16, 48), dropout_p

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout_p)
        return o.transpose(1, 2).reshape(2, 5, 16).square().mean()


def test_attention_without_dropout_is_recorded(events):
    """ATen tags every attention op as random for its dropout_p; with p = 0 it draws nothing."""
    torch.manual_seed(0)
    eager = _Attention(0.0)
    ours = copy.deepcopy(eager)
    compiled = compiler.compile(ours, mode="reduce-overhead", options=STAND_IN)
    for step in range(4):
        x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(step))
        for fn in (eager, compiled):
            fn(x).backward()
        _same_state(eager, ours)
    assert named(events, "cudagraph_record", is_backward=True)
    assert not named(events, "cudagraph_skipped")


def _dropout_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Dropout(0.3), torch.nn.GELU(),
                               torch.nn.Linear(16, 3))


def test_training_with_dropout_is_recorded_and_draws_eagers_masks(events):
    """The forward's dropout draws at the generator's state on every call, recorded or not, and
    its backward reads the mask it saved: each step equals eager's under the same seed."""
    eager = _dropout_model()
    ours = copy.deepcopy(eager)
    compiled = compiler.compile(ours, mode="reduce-overhead",
                                options={**STAND_IN, "backend.cudagraph_random_ops": True})
    _steps_side_by_side(eager, ours, compiled, seed=100)
    assert named(events, "cudagraph_record", is_backward=True)
    assert not named(events, "cudagraph_skipped")


def test_attention_with_dropout_replays_what_it_runs_without_graphs(events):
    """On the CPU attention with dropout is decomposed (its dropout is a bernoulli draw): the
    recorded graph's steps equal those of the same compiled graph without CUDA graphs."""
    torch.manual_seed(0)
    plain_model = _Attention(0.5)
    graph_model = copy.deepcopy(plain_model)
    plain = compiler.compile(plain_model, options={"backend.cache_enabled": False})
    graphed = compiler.compile(graph_model, mode="reduce-overhead",
                               options={**STAND_IN, "backend.cudagraph_random_ops": True})
    for step in range(4):
        x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(step))
        for fn in (plain, graphed):
            torch.manual_seed(step)
            fn(x).backward()
        _same_state(plain_model, graph_model)
    assert named(events, "cudagraph_record", is_backward=True)


def test_fused_attention_with_dropout_is_refused_without_it_is_not():
    """The GPU's fused attention ops return their RNG state as tensors for the backward (on the
    GPU while a CUDA graph records, on the CPU otherwise): refused even with random ops on."""
    from tracetorch.compiler.backend.runtime import cudagraphs
    graph = torch.fx.Graph()
    q = graph.placeholder("q")
    op = torch.ops.aten._scaled_dot_product_efficient_attention.default
    dropped = graph.call_function(op, (q, q, q, None, True, 0.1))
    kept = graph.call_function(op, (q, q, q, None, True, 0.0))
    with compiler.config.patch(**{"backend.cudagraph_random_ops": True}):
        assert "with dropout" in cudagraphs._random_op_refusal(dropped)
        assert cudagraphs._random_op_refusal(kept) is None


def test_a_failed_recording_turns_graphs_off_with_its_reason_and_stays_right(events, monkeypatch):
    """A recording that raises (a host synchronisation inside the graph, on a GPU) turns CUDA
    graphs off for that graph, logged with the error; every step still equals eager's."""
    from tracetorch.compiler.backend.runtime import cudagraphs

    def refuse(self, run, written=()):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(cudagraphs.EagerRecorder, "record", refuse)
    eager, ours, compiled = _pair()
    for step in range(4):
        x, y = _batch(step)
        for fn in (eager, compiled):
            torch.nn.functional.cross_entropy(fn(x), y).backward()
        _same_state(eager, ours)
        eager.zero_grad(set_to_none=True)
        ours.zero_grad(set_to_none=True)
    reasons = [e.fields["reason"] for e in named(events, "cudagraph_disabled")]
    assert reasons and all("recording failed: RuntimeError" in r for r in reasons), reasons


def test_an_optimizer_step_compiled_with_reduce_overhead_is_recorded_and_matches_eager(events):
    """mode="reduce-overhead" reaches a compiled optimizer step too: its update graph is recorded
    and replayed, writing the parameters and the optimizer's state in place, and every step
    equals eager AdamW's. (No batch norm after a biased layer here: that bias's gradient is
    rounding noise, which Adam's normalisation turns into steps of full size either way.)"""
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    ours = copy.deepcopy(eager)
    opt_e = torch.optim.AdamW(eager.parameters(), lr=0.05)
    opt_o = torch.optim.AdamW(ours.parameters(), lr=0.05)
    step = compiler.compile(opt_o.step, mode="reduce-overhead", options=STAND_IN)
    for i in range(5):
        x, y = _batch(i)
        for model, fn in ((eager, opt_e.step), (ours, step)):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            fn()
            model.zero_grad(set_to_none=True)
        _same_state(eager, ours)
        for p_e, p_o in zip(eager.parameters(), ours.parameters()):
            for key in ("exp_avg", "exp_avg_sq"):
                torch.testing.assert_close(opt_o.state[p_o][key], opt_e.state[p_e][key])
    assert named(events, "cudagraph_enabled")
    assert named(events, "cudagraph_record")
