"""Tests for logs/trace_reader.py on a real PyTorch TORCH_TRACE log and on hand-made damage."""

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracetorch.logs.trace_reader import TraceError, read_trace

# A function with a graph break (print) called with two ranks of input (a recompile).
TORCH_PROGRAM = textwrap.dedent(
    """
    import torch

    def f(x):
        y = torch.sin(x) + 1
        print("break")
        return torch.relu(y) * 2

    cf = torch.compile(f, backend="eager")
    cf(torch.randn(3))
    cf(torch.randn(3, 4))
    """
)


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("torch_trace")
    (root / "prog.py").write_text(TORCH_PROGRAM)
    out = root / "trace"
    subprocess.run([sys.executable, str(root / "prog.py")], check=True, capture_output=True,
                   env={"TORCH_TRACE": str(out), "PATH": "/usr/bin:/bin"}, timeout=300)
    return out


def record(key, meta, payload=None, frame=(0, 0, 0), line=1):
    env = {key: meta}
    if frame is not None:
        env.update(frame_id=frame[0], frame_compile_id=frame[1], attempt=frame[2])
    if payload is not None:
        env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
    text = f"V1122 10:00:00.{line:06d} 42 compiler/x.py:{line}] {json.dumps(env)}\n"
    if payload is not None:
        text += "".join(f"\t{ln}\n" for ln in payload.split("\n"))
    return text


def test_reads_real_pytorch_trace(torch_trace):
    t = read_trace(torch_trace)  # the folder: finds dedicated_log_torch_trace_*.log
    assert t.files[0].name.startswith("dedicated_log_torch_trace_")
    assert t.skipped == [] and t.damaged == []
    ids = [str(c) for c in t.compile_ids()]
    assert ids[:3] == ["0/0", "0/0_1", "1/0"]  # restart after the break, then the resume frame
    assert "0/1" in ids  # the recompile
    keys = {e.key for e in t.events}
    assert {"dynamo_start", "dynamo_output_graph", "compilation_metrics",
            "dynamo_graph_break_reason", "recompile_reasons"} <= keys
    brk = next(e for e in t.events if e.key == "dynamo_graph_break_reason")
    assert "print" in brk.payload and brk.payload_ok and brk.is_artifact
    rec = next(e for e in t.events if e.key == "recompile_reasons")
    assert "mismatch" in rec.payload and rec.compile_id.frame_compile_id == 1
    start = next(e for e in t.events if e.key == "dynamo_start")
    # string table resolved: the stack names the user's file, not an index
    assert start.stack[0]["filename"].endswith("prog.py") and start.stack[0]["name"] == "f"
    assert start.time.startswith(start.time[:4]) and start.pathname.endswith(".py")
    # line numbers point at the record's own line
    lines = t.files[0].read_text().split("\n")
    assert '"dynamo_start"' in lines[start.lineno - 1]


def test_skips_malformed_records_and_keeps_going(tmp_path):
    good1 = record("dynamo_start", {"stack": []}, line=1)
    bad_json = 'V1122 10:00:00.000002 42 compiler/x.py:2] {"dynamo_start": {"stack": [\n'
    stray = "this line is not a trace record\n"
    good2 = record("artifact", {"name": "graph_break", "encoding": "json"},
                   json.dumps({"reason": "print"}), line=3)
    f = tmp_path / "trace_1.log"
    f.write_text(good1 + bad_json + stray + good2)
    t = read_trace(f)
    assert [e.key for e in t.events] == ["dynamo_start", "graph_break"]
    assert [ln for ln, _ in t.skipped] == [2, 3]
    assert "JSON" in t.skipped[0][1] and "glog" in t.skipped[1][1]
    assert t.events[1].payload_json() == {"reason": "print"}
    assert t.events[1].lineno == 4


def test_payload_md5_mismatch_is_kept_and_reported(tmp_path):
    text = record("inductor_output_code", {"filename": "k.py"}, "def kernel():\n    pass", line=1)
    f = tmp_path / "trace_1.log"
    f.write_text(text.replace("    pass", "    pas"))  # an edited payload
    t = read_trace(f)
    assert len(t.events) == 1 and t.events[0].payload_ok is False
    assert t.damaged and "md5" in t.damaged[0][1]


def test_truncated_file_keeps_complete_records(tmp_path):
    full = record("dynamo_start", {"stack": []}, line=1) + record(
        "dynamo_output_graph", {"sizes": {}}, "graph():\n    return x", line=2)
    f = tmp_path / "trace_1.log"
    f.write_text(full[: len(full) - 10])  # cut inside the last payload
    t = read_trace(f)
    assert [e.key for e in t.events] == ["dynamo_start", "dynamo_output_graph"]
    assert t.events[1].payload_ok is False and len(t.damaged) == 1


def test_compile_ids_without_frame_are_none(tmp_path):
    f = tmp_path / "trace_1.log"
    f.write_text(record("artifact", {"name": "torch_version", "encoding": "json"}, "{}", frame=None)
                 + record("dynamo_start", {}, frame=(2, 1, 3)))
    t = read_trace(f)
    assert t.events[0].compile_id is None
    assert str(t.events[1].compile_id) == "2/1_3"
    assert [str(c) for c in t.compile_ids()] == ["2/1_3"]


def test_bad_paths_raise_trace_error(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "missing")
    with pytest.raises(TraceError, match="no trace files"):
        read_trace(tmp_path)


def test_folder_prefers_our_trace_files(tmp_path):
    (tmp_path / "debug.log").write_text("I1122 10:00:00.000000 1 x.py:1] hello\n")
    (tmp_path / "trace.log").write_text(record("dynamo_start", {}))
    t = read_trace(tmp_path)
    assert [p.name for p in t.files] == ["trace.log"] and len(t.events) == 1
