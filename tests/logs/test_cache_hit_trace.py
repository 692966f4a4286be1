"""Issue 18 (5): a compiled-code cache hit says so (cache_hit with the key) and still emits the
kernels, provenance and output code stored with the entry: the warm-cache trace answers "what
was generated for this line" like the cold one."""
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""\
    import torch
    from tracetorch import compiler

    def f(x):
        y = torch.sin(x) + 1
        z = torch.relu(y) * 2
        return z.sum(dim=-1)

    compiler.compile(f)(torch.randn(8, 16))
    """)


def run(tmp_path, name):
    env = {**os.environ, "TRACE_DIR": str(tmp_path / name), "TRACE_LOGS": "output_code",
           "TRACE_BACKEND_CACHE_DIR": str(tmp_path / "cache"), "TRACE_BACKEND_CACHE_ENABLED": "1"}
    env.pop("TRACE_COMPILE_DEBUG", None)
    r = subprocess.run([sys.executable, str(tmp_path / "prog.py")], env=env, capture_output=True,
                       text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    from tracetorch.tui.model import TraceModel
    from tracetorch.tui.paths import open_path
    trace = open_path(str(tmp_path / name)).trace
    return r.stderr, trace, TraceModel(trace)


def test_cache_hit_is_logged_and_keeps_kernels_and_provenance(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    cold_err, cold, cold_m = run(tmp_path, "cold")
    warm_err, warm, warm_m = run(tmp_path, "warm")
    assert not any(e.key == "cache_hit" for e in cold.events)
    (hit,) = [e for e in warm.events if e.key == "cache_hit"]
    d = hit.payload_json()
    assert len(d["key"]) == 32 and d["replayed_artifacts"] >= 1 and str(hit.compile_id) == "0/0"
    for m in (cold_m, warm_m):
        (c,) = m.compiles.values()
        kernels = [k for k in c.kernels if not k.module]
        assert kernels and any(ln for k in kernels for _, ln in k.user_lines), kernels
        assert [k for k in c.kernels if k.module]            # the output code
    lines = lambda m: sorted({ln for c in m.compiles.values() for k in c.kernels for _, ln in k.user_lines})
    assert lines(warm_m) == lines(cold_m)
    assert "[__output_code]" in warm_err                      # the console too
