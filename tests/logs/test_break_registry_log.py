"""Issue 18 (12): TRACE_LOGS=graph_breaks shows each break's registry id, explanation and
hints; the trace's graph_break record carries them."""
import os
import subprocess
import sys
import textwrap


def test_graph_breaks_log_and_trace_carry_the_registry(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""\
        import torch
        from tracetorch import compiler
        def f(x):
            y = torch.sin(x)
            print("hi")
            return y + 1
        compiler.compile(f, backend="eager")(torch.randn(3))
        """))
    env = {**os.environ, "TRACE_LOGS": "graph_breaks", "TRACE_DIR": str(tmp_path / "t")}
    r = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[TT-GB-001] side effect: print: print() writes to the terminal" in r.stderr, r.stderr
    assert "Hint: Remove the print from the compiled region" in r.stderr
    from tracetorch.logs.trace_reader import read_trace
    (ev,) = [e for e in read_trace(tmp_path / "t").events if e.key == "graph_break"]
    d = ev.payload_json()
    assert d["reason_id"] == "TT-GB-001" and d["hints"] and d["frame_skipped"] is False
