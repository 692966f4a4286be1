"""Issue 18 (12): symbols of dynamic shapes are logged with their value range and source
(create_symbol, as PyTorch's +dynamo log), under TRACE_LOGS=+dynamic."""
import os
import re
import subprocess
import sys
import textwrap


def test_create_symbol_with_range(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""\
        import torch
        from tracetorch import compiler
        def f(x):
            return torch.sin(x) * 2
        cf = compiler.compile(f)
        for n in (4, 5, 6):
            cf(torch.randn(n))
        """))
    env = {**os.environ, "TRACE_LOGS": "+dynamic", "TRACE_BACKEND_CACHE_ENABLED": "0"}
    r = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"\[0/1\] create_symbol symbol=(s\d+) range='\[2, int_oo\]' "
                  r"source=L\['x'\]\.size\(\)\[0\] hint=5", r.stderr)
    assert m, r.stderr[-3000:]
