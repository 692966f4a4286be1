"""The trace reader opens a real PyTorch TORCH_TRACE log (torch.compile as the peer, in a
subprocess) and finds its compile ids, its graph break and its recompile."""
import textwrap

from tracetorch.logs import CompileId
from tracetorch.logs.trace_reader import read_trace

PROGRAM = textwrap.dedent("""
    import torch

    def f(x):
        y = x * 2
        print("graph break here")
        return y + 1

    g = torch.compile(f, backend="eager")
    g(torch.ones(3))
    g(torch.ones(4))        # new size: recompiles both frames
""")


def test_reader_finds_compile_ids_graph_break_and_recompile(run_python, tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    trace_dir = tmp_path / "torch_trace"
    r = run_python(f"exec(compile(open({str(tmp_path / 'prog.py')!r}).read(), 'prog.py', 'exec'))",
                   env={"TORCH_TRACE": str(trace_dir)}, timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    trace = read_trace(trace_dir)
    assert trace.skipped == []
    ids = set(trace.compile_ids())
    # frame 0 is f (restarted after the break: attempt 1), frame 1 the resume function
    assert {CompileId(0, 0), CompileId(0, 1), CompileId(1, 0), CompileId(1, 1)} <= ids
    starts = [e for e in trace.events if e.key == "dynamo_start"]
    assert any(fr.get("name") == "f" for e in starts for fr in e.stack)
    breaks = [e for e in trace.events if e.key == "dynamo_graph_break_reason"]
    restart = [e for e in trace.events if e.key == "compilation_metrics"
               and e.metadata.get("restart_reasons")]
    assert breaks or restart, "no graph break record found"
    if breaks:
        assert breaks[0].compile_id == CompileId(0, 0)
        assert "prog.py:6" in breaks[0].payload and "print" in breaks[0].payload
    recompiles = [e for e in trace.events if e.key == "recompile_reasons"]
    assert [e.compile_id for e in recompiles][:1] == [CompileId(0, 1)]
    assert "size mismatch" in recompiles[0].payload
