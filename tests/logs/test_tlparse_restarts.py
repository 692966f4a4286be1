"""Issue 18 (7, 12): the real tlparse on a trace of our compiler: compile ids that broke are
"Success with restart", the others "Success"; failures_and_restarts.html lists the breaks (with
their registry id, explanation and hints) and a failed compile; the metrics pages say so."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent("""\
    import torch
    from tracetorch import compiler


    def f(x):
        y = torch.sin(x) + 1
        print("break")
        return torch.cos(y) * 2


    def g(x):
        return torch.tanh(x) - 1


    def fails(gm, example_inputs):
        raise RuntimeError("backend exploded")


    compiler.compile(f, backend="eager")(torch.randn(3))
    compiler.compile(g, backend="eager")(torch.randn(3))
    try:
        compiler.compile(g, backend=fails)(torch.randn(4, 4))
    except Exception as e:
        print("failed as expected:", type(e).__name__)
    """)


def html_text(path: Path) -> str:
    s = path.read_text()
    s = re.sub(r"<style.*?</style>|<script.*?</script>", "", s, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", s))


def test_tlparse_colours_only_broken_compiles_and_lists_restarts_and_failures(tmp_path):
    binary = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    assert os.path.exists(binary), "tlparse is not installed: pip install -e '.[dev]'"
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = {**os.environ, "TRACE_DIR": str(tmp_path / "trace"), "TRACE_BACKEND_CACHE_ENABLED": "0"}
    env.pop("TRACE_LOGS", None)
    r = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (trace,) = (tmp_path / "trace").glob("trace_*.log")
    out = tmp_path / "tl_out"
    r = subprocess.run([binary, str(trace), "-o", str(out), "--no-browser", "--overwrite"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    index = (out / "index.html").read_text()
    status = dict(re.findall(r"href='#\[([^\]]+)\]' class='status-(\w+)'", index))
    # f broke at the print (0/0); its resume function (1/0) and g (2/0) did not; g's
    # recompile with the failing backend (2/1) is an error
    assert status["0/0"] == "break", status
    assert [status[c] for c in status if c != "0/0" and status[c] == "break"] == [], status
    assert "error" in status.values(), status
    failures = html_text(out / "failures_and_restarts.html")
    assert "print() (a side effect outside the graph)" in failures
    assert "[TT-GB-001] Explanation:" in failures and "Hint:" in failures
    assert "backend exploded" in failures
    metrics = html_text(next((out / "-_0_0_0").glob("compilation_metrics*.html")))
    assert "No restarts" not in metrics and "print()" in metrics
