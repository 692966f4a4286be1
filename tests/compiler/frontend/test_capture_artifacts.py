"""The capture's artifacts reach logs' sinks: bytecode (original and transformed with a
readable source), graph / graph_code / graph_sizes, trace_source, trace_bytecode,
graph_breaks + the json graph_break record, side_effects."""
import pytest
import torch

from tracetorch import logs
from tests.compiler.frontend.capture_harness import Recorder, same

SEEN = []


def prog(x, seen):
    y = torch.relu(x) * 2
    seen.append(1)
    print("break", end="\r")
    return y.sum() + len(seen)


NAMES = ("bytecode", "graph", "graph_code", "graph_sizes", "trace_source", "trace_bytecode",
         "graph_breaks", "graph_break", "side_effects")


@pytest.fixture
def events():
    # per-instruction artifacts (trace_*) are only on when named
    with logs.testing.capture(artifacts=NAMES) as got:
        yield got


def test_artifacts(events):
    x = torch.randn(4)
    SEEN.clear()
    rec = Recorder()
    r = rec.capture(prog, (x, SEEN), {})
    out = r.fn(x, SEEN)
    SEEN.clear()
    assert same(out, prog(x, SEEN))
    by = {}
    for e in events:
        by.setdefault(e.name, []).append(e)
    for name in NAMES:
        assert name in by, (name, sorted(by))
    texts = [e.payload for e in by["bytecode"]]
    assert any(t.startswith("ORIGINAL BYTECODE prog") for t in texts)
    modified = [t for t in texts if t.startswith("MODIFIED BYTECODE prog")]
    assert modified and "possible source code:" in modified[0]
    assert "def prog(x, seen):" in modified[0] and "__compiled_fn_" in modified[0]
    # an append to a list the graph never read is replayed as an append
    assert "seen.append(1)" in modified[0] and "__resume_at_" in modified[0]
    record = by["graph_break"][0].payload
    assert record["reason"].startswith("print()") and record["lineno"] == prog.__code__.co_firstlineno + 3
    assert record["filename"] == __file__ and "print(" in record["source_line"]
    assert record["user_stack"] and record["instruction"] == "CALL"
    assert "relu" in by["graph_code"][0].payload and "relu" in by["graph"][0].payload
    assert "(4,)" in by["graph_sizes"][0].payload
    assert any("y = torch.relu(x) * 2" in e.payload for e in by["trace_source"])
    assert any("LOAD_FAST" in e.payload for e in by["trace_bytecode"])
    assert "L['seen'].append(" in by["side_effects"][0].payload
