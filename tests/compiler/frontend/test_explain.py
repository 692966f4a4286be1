"""compiler.explain with the real capture: counts, break reasons with user file:line, guards."""
import torch

from tracetorch import compiler


def _break_here(x):
    y = x * 2
    print("explain test")          # BREAK_LINE
    return y + 1


BREAK_LINE = _break_here.__code__.co_firstlineno + 2


def test_explain_counts_graphs_breaks_and_reasons():
    compiler.reset()
    report = compiler.explain(_break_here)(torch.randn(3))
    assert report.graph_count == 2
    assert report.graph_break_count == 1
    [reason] = report.break_reasons
    assert "print" in reason.reason
    assert reason.filename == __file__ and reason.lineno == BREAK_LINE
    assert f"{__file__}:{BREAK_LINE}" in str(reason)
    assert report.op_count == sum(len(ops) for ops in report.ops_per_graph) >= 2
    assert any(g.kind == "TENSOR_MATCH" and g.source == "L['x']" for g in report.guards)
    text = str(report)
    for part in ["Graph Count: 2", "Graph Break Count: 1", "Break Reasons:", "Break Reason 1:",
                 "Reason:", "User Stack:", "Ops per Graph:", "Out Guards:", "Compile Times:"]:
        assert part in text, part
    assert f"{__file__}:{BREAK_LINE}" in text


def test_explain_no_break_and_module():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    report = compiler.explain(m)(torch.randn(2, 4))
    assert (report.graph_count, report.graph_break_count, report.break_reasons) == (1, 0, [])
    assert "Break Reasons" not in str(report)


def test_explain_does_not_touch_user_caches():
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    def f(x):
        return x.sin()

    compiled = compiler.compile(f, backend=backend)
    compiled(torch.randn(3))
    compiler.explain(f)(torch.randn(3))
    compiled(torch.randn(3))
    assert len(calls) == 1


def test_explain_reports_to_hooks(monkeypatch):
    from tracetorch.compiler import hooks
    got = []
    hooks.register_explain_listener("test", got.append)
    try:
        report = compiler.explain(lambda x: x + 1)(torch.ones(2))
    finally:
        hooks.unregister_explain_listener("test")
    assert got == [report]
