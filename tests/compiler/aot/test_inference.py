"""The inference aot stage with a graph-running inner compiler (no code generation involved)."""

import pytest
import torch

from tracetorch import compiler, logs
from tracetorch.compiler.aot import aot_module, decomposition_table
from tracetorch.compiler.aot import inference

aten = torch.ops.aten


def _capture():
    seen = {}

    def inner(gm, example_inputs):
        seen["gm"] = gm
        seen["inputs"] = example_inputs
        return gm.forward
    return seen, inner


def _targets(gm):
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def test_functional_and_decomposed():
    def f(x, w, b):
        y = torch.nn.functional.layer_norm(x, (8,), w, b)
        y = torch.softmax(y, -1) + torch.nn.functional.gelu(x)
        return y @ w.unsqueeze(1), torch.addmm(b[:4], x[:, :8], w.expand(8, 8)[:, :4])
    x, w, b = torch.randn(4, 8), torch.randn(8), torch.randn(8)
    seen, inner = _capture()
    fn = aot_module(torch.fx.symbolic_trace(f), [x, w, b], inner)
    for got, ref in zip(fn(x, w, b), f(x, w, b)):
        torch.testing.assert_close(got, ref)
    targets = _targets(seen["gm"])
    assert aten._softmax.default not in targets and aten.native_layer_norm.default not in targets
    assert aten.gelu.default not in targets
    assert targets & {aten.mm.default, aten.addmm.default, aten.bmm.default}
    assert not any(getattr(t, "_schema", None) is not None and t._schema.is_mutable for t in targets)


def test_input_mutation_written_back_at_the_end():
    def f(x, y):
        x.mul_(2)
        y[0].add_(1)
        return x + y
    x, y = torch.randn(3, 3), torch.randn(3, 3)
    seen, inner = _capture()
    fn = aot_module(torch.fx.symbolic_trace(f), [x.clone(), y.clone()], inner)
    x1, y1, x2, y2 = x.clone(), y.clone(), x.clone(), y.clone()
    ref = f(x1, y1)
    out = fn(x2, y2)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x2, x1)
    torch.testing.assert_close(y2, y1)
    nodes = [n for n in seen["gm"].graph.nodes if n.op == "call_function"]
    copies = [i for i, n in enumerate(nodes) if n.target is aten.copy_.default]
    assert len(copies) == 2 and copies == list(range(len(nodes) - 2, len(nodes)))   # at the very end
    others = [n.target for n in nodes if n.target is not aten.copy_.default]
    assert all(not t._schema.is_mutable for t in others if hasattr(t, "_schema"))


def test_output_structure_is_kept():
    def f(x):
        return {"a": x + 1, "b": [x * 2, (x.sum(), 3)]}
    x = torch.randn(2, 2)
    fn = aot_module(torch.fx.symbolic_trace(f), [x], _capture()[1])
    out = fn(x)
    ref = f(x)
    torch.testing.assert_close(out["a"], ref["a"])
    torch.testing.assert_close(out["b"][0], ref["b"][0])
    torch.testing.assert_close(out["b"][1][0], ref["b"][1][0])
    assert out["b"][1][1] == 3


def test_aot_graphs_artifact_is_logged():
    with logs.testing.capture(artifacts=["aot_graphs"]) as events:
        aot_module(torch.fx.symbolic_trace(lambda x: x.relu() * 2), [torch.randn(3)], _capture()[1])
    ev = [e for e in events if e.name == "aot_graphs"]
    assert ev and ev[0].fields.get("graph") == "inference"


def test_dynamic_trace_and_input_checks():
    def f(x):
        return x.softmax(-1) * x.shape[0]
    seen, inner = _capture()
    fn = aot_module(torch.fx.symbolic_trace(f), [torch.randn(5, 4)], inner, dynamic=True)
    code = seen["gm"].code
    assert "sym_size" in code
    for n in (3, 5, 8):
        x = torch.randn(n, 4)
        assert fn.check([x]) == ""
        torch.testing.assert_close(fn(x), f(x))
    # a rank change does not match the trace: run eagerly, still correct
    bad = torch.randn(2, 3, 4)
    assert fn.check([bad]) != ""
    torch.testing.assert_close(fn(bad), f(bad))


def test_static_trace_rejects_other_sizes():
    f = lambda x: x * 2  # noqa: E731
    fn = aot_module(torch.fx.symbolic_trace(f), [torch.randn(4)], _capture()[1])
    assert fn.check([torch.randn(4)]) == ""
    assert "size" in fn.check([torch.randn(5)])
    torch.testing.assert_close(fn(torch.randn(5).fill_(1.0)), torch.full((5,), 2.0))


def test_decomposition_table_is_reusable():
    t = decomposition_table()
    assert aten._softmax.default in t and aten.native_layer_norm.default in t
    assert aten.mm.default not in t and aten.convolution.default not in t and aten.addmm.default not in t
    t.clear()
    assert decomposition_table()   # callers get their own copy


def test_grad_needed_goes_to_training_path(monkeypatch):
    calls = []
    from tracetorch.compiler.aot import training

    def fake_training(gm, example_inputs, inner_compile, **kw):
        calls.append(len(example_inputs))
        return gm
    monkeypatch.setattr(training, "aot_module_training", fake_training)
    x = torch.randn(3, requires_grad=True)
    with torch.enable_grad():
        fn = aot_module(torch.fx.symbolic_trace(lambda x: x.sin()), [x], _capture()[1])
    assert calls == [1]
    torch.testing.assert_close(fn(x), x.sin())


def test_sdpa_kept_whole_on_cpu():
    q = torch.randn(1, 2, 4, 8)
    f = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v)  # noqa: E731
    seen, inner = _capture()
    fn = aot_module(torch.fx.symbolic_trace(f), [q, q, q], inner)
    torch.testing.assert_close(fn(q, q, q), f(q, q, q))
    assert torch.ops.tracetorch.sdpa.default in _targets(seen["gm"])


def test_trace_failure_runs_eagerly(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("cannot trace")
    monkeypatch.setattr(inference, "trace_inference", boom)
    f = lambda x: x + 1  # noqa: E731
    gm = torch.fx.symbolic_trace(f)
    fn = aot_module(gm, [torch.randn(2)], _capture()[1])
    torch.testing.assert_close(fn(torch.ones(2)), torch.full((2,), 2.0))


def test_dtype_change_runs_eagerly():
    f = lambda x: x * 2  # noqa: E731
    fn = aot_module(torch.fx.symbolic_trace(f), [torch.randn(4)], _capture()[1])
    x = torch.arange(4, dtype=torch.float64)
    assert "dtype" in fn.check([x])
    torch.testing.assert_close(fn(x), x * 2)


def test_scalar_inputs_traced_as_constants_are_checked():
    f = lambda x, a: x * a  # noqa: E731
    fn = aot_module(torch.fx.symbolic_trace(f), [torch.randn(3), 2.5], _capture()[1])
    torch.testing.assert_close(fn(torch.ones(3), 2.5), torch.full((3,), 2.5))
    torch.testing.assert_close(fn(torch.ones(3), 4.0), torch.full((3,), 4.0))   # not the traced 2.5


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_on_a_dynamic_batch_keeps_the_batch_symbolic(events, bias, grad):
    """F.linear on a 3-D input under functionalize read plain sizes in its C++ kernel, which
    pinned the batch symbol to its example value: every new batch size compiled again (BERT)."""
    layer = torch.nn.Linear(16, 8, bias=bias)

    def f(x):
        return torch.relu(layer(x)) * 2

    opt = compiler.compile(f)
    with torch.set_grad_enabled(grad):
        for n in (2, 3, 5, 6, 7):
            x = torch.randn(n, 4, 16)
            torch.testing.assert_close(opt(x), f(x))
    compiled = [e for e in events if e.name == "frame_compiled"]
    assert len(compiled) == 2, [e.fields for e in compiled]   # the first size, then one dynamic graph
