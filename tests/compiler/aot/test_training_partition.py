"""The partitioner (min-cut over bytes) and the events the training path emits."""
from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.aot.joint import trace_joint, training_decompositions
from tracetorch.compiler.aot.partition import INF, FlowNetwork, is_recomputable, partition_joint
from tracetorch.compiler.aot.training import aot_module_training
from tests.compiler.aot.test_training import capture, run_as_is


def test_max_flow_min_cut_small_network():
    # classic CLRS example: max flow 23; the min cut separates {s, v1, v2, v4}
    net = FlowNetwork()
    for a, b, c in [("s", "v1", 16), ("s", "v2", 13), ("v1", "v3", 12), ("v2", "v1", 4),
                    ("v2", "v4", 14), ("v3", "v2", 9), ("v3", "t", 20), ("v4", "v3", 7),
                    ("v4", "t", 4)]:
        net.add_edge(a, b, c)
    assert net.max_flow("s", "t") == 23
    assert net.source_side("s") == {"s", "v1", "v2", "v4"}


def test_max_flow_infinite_edges_force_cut_on_finite_ones():
    net = FlowNetwork()
    net.add_edge("s", "a_in", INF)
    net.add_edge("a_in", "a_out", 100)
    net.add_edge("a_out", "b_in", INF)
    net.add_edge("b_in", "b_out", 30)          # cheaper to save b than a
    net.add_edge("b_out", "t", INF)
    assert net.max_flow("s", "t") == 30
    side = net.source_side("s")
    assert "b_in" in side and "b_out" not in side


class GeluMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 64), nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)) * torch.sigmoid(self.fc1(x)))


def _joint(model, x):
    gm = capture(model)
    params = dict(gm.named_parameters())
    names = list(params)

    def fn(*primals):
        return torch.func.functional_call(gm, dict(zip(names, primals[:len(names)])),
                                          tuple(primals[len(names):]))

    return trace_joint(fn, list(params.values()) + [x], training_decompositions())


def test_min_cut_saves_fewer_bytes_than_save_everything_and_recomputes_pointwise():
    torch.manual_seed(0)
    joint = _joint(GeluMLP(), torch.randn(8, 16))
    min_cut = partition_joint(joint, "min_cut")
    baseline = partition_joint(joint, "default")
    assert baseline.saved_bytes == baseline.baseline_bytes
    assert min_cut.baseline_bytes == baseline.saved_bytes
    assert min_cut.saved_bytes < baseline.saved_bytes
    assert min_cut.recomputed                      # the gelu/sigmoid chain is recomputed
    nodes = {n.name: n for n in joint.graph.graph.nodes}
    assert all(is_recomputable(nodes[name]) for name in min_cut.recomputed)


def test_random_ops_are_saved_never_recomputed():
    class Drop(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return F.dropout(self.fc(x), 0.5, training=True).relu()

    joint = _joint(Drop(), torch.randn(4, 8))
    part = partition_joint(joint, "min_cut")
    nodes = {n.name: n for n in joint.graph.graph.nodes}
    random = {name for name, n in nodes.items() if n.op == "call_function"
              and isinstance(n.target, torch._ops.OpOverload)
              and torch.Tag.nondeterministic_seeded in n.target.tags}
    assert random and not (random & set(part.recomputed))
    bw_ops = {n.target for n in part.backward.graph.nodes if n.op == "call_function"}
    assert not any(isinstance(t, torch._ops.OpOverload)
                   and torch.Tag.nondeterministic_seeded in t.tags for t in bw_ops)


@pytest.mark.parametrize("strategy", ["default", "min_cut"])
def test_both_strategies_give_eager_gradients(strategy):
    torch.manual_seed(0)
    model = GeluMLP()
    ref = copy.deepcopy(model)
    x = torch.randn(8, 16)
    with config.patch(**{"aot.partitioner": strategy}):
        f = aot_module_training(capture(model), [x], run_as_is)
    f(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ahead", [False, True])
def test_events_joint_graph_partition_decision_and_backward_compile_id(ahead):
    """The backward's events carry the forward's compile id, whether it compiles with the
    forward (ahead) or lazily at the first backward, outside the compile context."""
    with logs.testing.capture(level=logging.DEBUG,
                              artifacts=["aot_joint_graph", "aot_graphs", "partition_decision"]) as events, \
            config.patch(**{"aot.compile_backward_ahead": ahead}):
        torch.manual_seed(0)
        model = GeluMLP()
        x = torch.randn(4, 16)
        with logs.compile_context(7, 2):
            f = aot_module_training(capture(model), [x], run_as_is)
        names = [e.name for e in events]
        assert "aot_joint_graph" in names and "partition_decision" in names
        decision = next(e for e in events if e.name == "partition_decision").payload
        assert decision["saved_bytes"] <= decision["baseline_bytes"]
        assert set(decision) >= {"saved", "recomputed", "bytes_saved_vs_baseline"}
        fw = [e for e in events if e.name == "aot_graphs" and e.fields.get("graph") == "forward"]
        assert fw and "def forward" in fw[0].payload
        # compiled with the forward, or not yet
        assert any(e.fields.get("is_backward") for e in events) == ahead
        f(x).sum().backward()                  # outside the compile context
        bw = [e for e in events if e.fields.get("is_backward")]
        assert bw and all(str(e.compile_id) == "7/2" for e in bw)
        assert any(e.name == "aot_graphs" and e.fields.get("graph") == "backward" for e in bw)


def test_unsupported_graph_falls_back_with_reason():
    """A mutation of an input that requires grad is not supported: eager autograd, logged."""
    with logs.testing.capture(level=logging.DEBUG) as events:
        class Mut(nn.Module):
            def forward(self, x, y):
                x.mul_(2)
                return x * y

        x = torch.randn(3, requires_grad=True) * 1.0   # a non-leaf: eager may mutate it
        y = torch.randn(3, requires_grad=True)
        f = aot_module_training(capture(Mut()), [x, y], run_as_is)
        assert any(e.name == "aot_training_fallback" for e in events)
        a = torch.randn(3, requires_grad=True)
        ra = a.detach().clone().requires_grad_()
        out = f(a * 1.0, y)
        rout = Mut()(ra * 1.0, y)
        torch.testing.assert_close(out, rout)
        out.sum().backward()
        ga = a.grad.clone()
        rout.sum().backward()
        torch.testing.assert_close(ga, ra.grad)


def test_parameters_are_free_to_save_so_pointwise_on_them_is_recomputed():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(64, 64))

        def forward(self, x):
            return x @ (self.w * 2.0)              # backward needs w * 2 for x's gradient

    x = torch.randn(4, 64, requires_grad=True)
    f = aot_module_training(capture(Scaled()), [x], run_as_is)
    part = f.runtime.backward_graph
    saved = [n.name for n in part.graph.nodes if n.op == "placeholder"
             and not n.name.startswith("tangents")]
    assert "primals_1" in saved                  # the parameter itself, not the scaled copy
    ops = {n.target for n in part.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.mul.Tensor in ops      # w * 2 recomputed in the backward


def test_contiguous_as_strided_becomes_a_view():
    """GroupNorm's decomposition leaves as_strided(x, size, contiguous strides): rewritten to
    view so the backend can lower it; gradients unchanged."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3), nn.GroupNorm(2, 8), nn.SiLU()).double()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 4, 6, 6, dtype=torch.float64)
    joint = _joint(model, x)
    assert not any(n.target is torch.ops.aten.as_strided.default for n in joint.graph.graph.nodes)
    f = aot_module_training(capture(model), [x], run_as_is)
    f(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-10, atol=1e-12)


def test_structured_trace_records_for_training(tmp_path):
    from tracetorch.logs.trace_reader import read_trace
    path = tmp_path / "trace.log"
    writer = logs.open_trace(str(path))
    try:
        torch.manual_seed(0)
        model = GeluMLP()
        x = torch.randn(4, 16)
        with logs.compile_context(3, 1):
            f = aot_module_training(capture(model), [x], run_as_is)
        f(x).sum().backward()
    finally:
        logs.close_trace(writer)
    events = list(read_trace(str(path)).events)
    keys = [e.key for e in events]
    for key in ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "partition_decision"):
        assert key in keys, key
    backward = next(e for e in events if e.key == "aot_backward_graph")
    assert str(backward.compile_id) == "3/1" and backward.metadata.get("is_backward") is True
    assert "def forward" in backward.payload


def test_views_cost_their_base_so_split_outputs_are_not_saved():
    """Saving a split() output keeps the whole projection alive: the cut saves the projection
    once and recomputes the views (no saved tensor at a storage offset)."""
    class SplitProduct(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 24)

        def forward(self, x):
            q, k, v = self.fc(x).split(8, dim=-1)
            return (q * k.sigmoid() * v).sum(-1)

    torch.manual_seed(0)
    model = SplitProduct()
    ref = copy.deepcopy(model)
    x = torch.randn(4, 8, requires_grad=True)
    f = aot_module_training(capture(model), [x], run_as_is)
    saved = [n.meta["val"] for n in f.runtime.backward_graph.graph.nodes
             if n.op == "placeholder" and not n.name.startswith("tangents")]
    assert all(v.storage_offset() == 0 for v in saved)
    f(x).pow(2).sum().backward()
    rx = x.detach().clone().requires_grad_()
    ref(rx).pow(2).sum().backward()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-5, atol=1e-6)


class ResidualChain(nn.Module):
    """x_k = relu(silu(lin_k(x_{k-1})) + x_{k-1}): each x_k is a matrix product's input in the
    backward (the next weight's gradient). The backward keeps lin_k's output anyway (silu's
    gradient needs it), so in bytes rebuilding x_k from it and x_{k-1} is free, and x_{k-1}
    from the one before: a residual stream recomputed from every summand (ResNet-50's backward
    read four 103 MB activations per rebuilt convolution input)."""

    def __init__(self, d=16, depth=4):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))

    def forward(self, x):
        for lin in self.lins:
            x = torch.relu(F.silu(lin(x)) + x)
        return x


def test_a_product_input_whose_rebuilding_reads_two_full_size_values_is_saved():
    from tests.compiler.aot.test_training import compile_training
    torch.manual_seed(0)
    model = ResidualChain()
    x = torch.randn(8, 16, requires_grad=True)
    joint = _joint(model, x)
    with logs.testing.capture(names={"partition_rebuilds_banned"}, level=logging.DEBUG, artifacts=None) as events:
        part = partition_joint(joint, "min_cut")
    relus = [n.name for n in joint.graph.graph.nodes if n.target is torch.ops.aten.relu.default]
    assert events and set(relus[:-1]) <= set(events[0].fields["nodes"]), [e.fields for e in events]
    # every stream value a later layer's weight gradient reads is saved, none rebuilt
    assert set(relus[:-1]) <= set(part.saved), (part.saved, part.recomputed)
    assert not set(relus[:-1]) & set(part.recomputed)
    f = compile_training(model, [x], run_as_is)
    ref = copy.deepcopy(model)
    x2 = x.detach().clone().requires_grad_()
    f(x).sum().backward()
    ref(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


class LMHead(nn.Module):
    """Hidden states -> logits -> cross-entropy, as a language model's last layers."""

    def __init__(self, hidden=16, vocab=500):
        super().__init__()
        self.proj = nn.Linear(hidden, vocab)

    def forward(self, h, labels):
        return F.cross_entropy(self.proj(h), labels)


def test_cross_entropy_saves_one_vocabulary_sized_tensor():
    """nll_loss's backward is a one-hot scatter of the labels into a (tokens x vocabulary) zero
    tensor, traced in the forward as scatter(full_like(log_probs), labels): saved, it was a second
    vocabulary-sized tensor next to the softmax (GPT-2 at 4 x 512 tokens: 411 MB more than
    inductor). full_like becomes full (no edge to the log-probabilities) and the scatter is cheap
    to rebuild, so the cut saves the labels instead; gradients match eager's."""
    torch.manual_seed(0)
    model = LMHead()
    h, labels = torch.randn(24, 16), torch.randint(0, 500, (24,))
    gm = capture(model)
    params = dict(gm.named_parameters())
    names = list(params)

    def fn(*primals):
        return torch.func.functional_call(gm, dict(zip(names, primals[:len(names)])), tuple(primals[len(names):]))

    joint = trace_joint(fn, list(params.values()) + [h, labels], training_decompositions())
    part = partition_joint(joint, "min_cut")
    nodes = {n.name: n for n in part.forward.graph.nodes}
    vocab_sized = [name for name in part.saved
                   if name in nodes and tuple(nodes[name].meta["val"].shape) == (24, 500)]
    assert len(vocab_sized) == 1, part.saved            # the softmax, not also the one-hot
    ref = copy.deepcopy(model)
    compiled = aot_module_training(capture(model), [h, labels], run_as_is)
    compiled(h, labels).backward()
    ref(h, labels).backward()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-5, atol=1e-6)
