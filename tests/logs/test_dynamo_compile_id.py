"""Issue 18 (6): our backend under torch.compile(model, backend=compiler.backend) takes the
compile id from Dynamo's context: the TRACE_DIR trace shows the compiles, console lines keep
their [frame/compile] ids."""
import os
import re
import subprocess
import sys
import textwrap

from tracetorch.logs.compile_ids import compile_context, current_compile_id, dynamo_compile_id

PROGRAM = textwrap.dedent("""\
    import torch
    from tracetorch import compiler

    def f(x):
        y = torch.sin(x) + 1
        return torch.relu(y) * 2

    cf = torch.compile(f, backend=compiler.backend)
    cf(torch.randn(8))
    cf(torch.randn(8, 2))
    """)


def test_outside_any_compile_there_is_no_id():
    assert dynamo_compile_id() is None and current_compile_id() is None
    with compile_context(3, 1) as cid:
        assert current_compile_id() == cid          # ours wins


def test_trace_and_console_carry_dynamos_compile_ids(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = {**os.environ, "TRACE_DIR": str(tmp_path / "t"), "TRACE_LOGS": "output_code",
           "TRACE_BACKEND_CACHE_ENABLED": "0"}
    r = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    ids = set(re.findall(r"\] \[(\d+/\d+)\] \[__output_code\]", r.stderr))
    assert ids == {"0/0", "0/1"}, r.stderr[:2000]
    from tracetorch.tui.model import TraceModel
    from tracetorch.tui.paths import open_path
    m = TraceModel(open_path(str(tmp_path / "t")).trace)
    assert sorted(c.id for c in m.compiles.values()) == ["0/0", "0/1"]
    assert all(c.kernel_count for c in m.compiles.values())
    assert m.frames[0].name == "(code from prog.py:5)"
