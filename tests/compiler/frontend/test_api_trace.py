"""The structured trace of compiled frames: dynamo_start, dynamo_guards, compilation_metrics and
recompile records, each under its frame's compile id, readable by logs.trace_reader."""
import torch

from tracetorch import compiler
from tracetorch import logs
from tracetorch.logs.trace_reader import read_trace


def g(x):
    return x.cos() + 1


def test_trace_records_per_frame(tmp_path):
    compiler.reset()
    path = tmp_path / "trace.log"
    writer = logs.open_trace(str(path))
    try:
        f = compiler.compile(g, backend="eager", dynamic=False)
        f(torch.randn(3))
        f(torch.randn(4))
    finally:
        logs.close_trace(writer)
    t = read_trace(str(path))
    assert t.skipped == []
    by_key = {}
    for e in t.events:
        by_key.setdefault(e.key, []).append(e)
    assert [str(e.compile_id) for e in by_key["dynamo_start"]] == ["0/0", "0/1"]
    assert by_key["dynamo_start"][0].metadata["stack"], "user stack of the call site"
    assert [str(e.compile_id) for e in by_key["dynamo_guards"]] == ["0/0", "0/1"]
    metrics = [e.metadata for e in by_key["compilation_metrics"]]
    assert [m["co_name"] for m in metrics] == ["g", "g"]
    assert metrics[1]["recompile_reason"] == "0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4"
    assert all(m["entire_frame_compile_time_s"] >= m["backend_compile_time_s"] >= 0 for m in metrics)
    [rec] = by_key["recompile"]
    assert str(rec.compile_id) == "0/1"
