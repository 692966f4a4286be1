"""The real tlparse binary (PyPI `tlparse`, Rust) renders a trace written by our writer."""
import json
import os
import re
import shutil
from pathlib import Path
import sys
import subprocess

from tracetorch import logs

COMPILES = [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 0, 1)]


def write_session(path):
    """What a compile session emits: a start record per compile id, graph, guards, a graph
    break, a recompile, output code and metrics (with the restart reason)."""
    writer = logs.open_trace(str(path))
    for fid, fcid, attempt in COMPILES:
        with logs.compile_context(fid, fcid, attempt):
            logs.trace_record("dynamo_start", lambda fid=fid: {"stack": [
                {"line": 12, "name": "<module>", "filename": "/src/demo.py", "loc": "f(x)"},
                {"line": 5 + fid, "name": "f", "filename": "/src/demo.py", "loc": "y = x.sin()"}]})
            logs.artifact("graph", lambda: "class GraphModule(torch.nn.Module):\n"
                                           "    def forward(self, L_x_):\n        return (L_x_.sin(),)")
            logs.artifact("guards", lambda: "TENSOR_MATCH: L['x'] float32 [3]")
            logs.artifact("graph_break", lambda: {"reason": "print() is not supported",
                                                  "user_stack": [["/src/demo.py", 6, "f"]]})
            if fcid > 0:
                logs.artifact("recompile", lambda: {"reasons": ["0/0: L['x'] size mismatch"]})
            logs.artifact("aot_graphs", lambda: "def forward(self, x):\n    return x.sin()",
                          graph="inference")
            logs.artifact("output_code", lambda: "def call(args):\n    return kernel0(*args)",
                          filename="/tmp/output_code.py")
            logs.artifact("kernel", lambda: {"name": "kernel0", "source": "...", "nodes": ["sin"]})
            logs.artifact("compile_metrics", lambda: {
                "co_name": "f", "co_filename": "/src/demo.py", "co_firstlineno": 4,
                "cache_size": fcid, "accumulated_cache_size": fcid, "guard_count": 1,
                "graph_op_count": 1, "graph_node_count": 3, "graph_input_count": 1,
                "entire_frame_compile_time_s": 0.01, "backend_compile_time_s": 0.005,
                "fail_type": None, "fail_reason": None,
                "restart_reasons": ["graph break: print() is not supported"],
                "has_guarded_code": True})
    logs.close_trace(writer)


def test_tlparse_renders_our_trace_without_failures(fresh_logs, tmp_path):
    # the venv's own script, also when the venv is not activated (python from its bin/)
    beside = Path(sys.executable).parent / "tlparse"
    binary = shutil.which("tlparse") or (str(beside) if beside.is_file() else None)
    assert binary, "tlparse is not installed: pip install -e '.[dev]' installs it"
    trace = tmp_path / "trace_1.log"
    write_session(trace)
    out = tmp_path / "tl_out"
    r = subprocess.run([binary, str(trace), "-o", str(out), "--no-browser", "--strict",
                        "--overwrite"], capture_output=True, text=True, timeout=60)
    text = r.stdout + r.stderr
    assert r.returncode == 0, text                       # --strict: no unrecognised lines
    stats = re.search(r"Stats \{([^}]*)\}", text)
    assert stats and "fail" not in stats.group(1), text  # e.g. fail_dynamo_guards_json: 1
    # one folder per compile id: {compiled_autograd}_{frame}_{frame_compile}_{attempt}
    folders = {p for p in os.listdir(out) if re.fullmatch(r"-_\d+_\d+_\d+", p)}
    assert folders == {f"-_{f}_{c}_{a}" for f, c, a in COMPILES}
    first = os.listdir(out / "-_0_0_0")
    for prefix in ("dynamo_output_graph", "graph_break", "inductor_output_code",
                   "aot_inference_graph", "compilation_metrics", "kernel"):
        assert any(name.startswith(prefix) for name in first), (prefix, first)
    assert any(name.startswith("recompile") for name in os.listdir(out / "-_0_1_0"))
    directory = json.loads((out / "compile_directory.json").read_text())
    assert {"[0/0]", "[0/1]", "[1/0]", "[1/0_1]"} <= set(directory)
    restarts = (out / "failures_and_restarts.html").read_text()
    assert "graph break: print() is not supported" in restarts
    graph = next(n for n in first if n.startswith("dynamo_output_graph"))
    assert "L_x_.sin()" in (out / "-_0_0_0" / graph).read_text()
