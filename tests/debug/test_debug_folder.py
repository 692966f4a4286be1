"""TRACE_COMPILE_DEBUG=1 on a program with a graph break, a recompile and a training graph:
the run folder holds every file DESIGN section 6 names, index.txt lists every compile id with
its function, file:line, status and files, and the runnable files run standalone."""
import os
import subprocess
import sys

import pytest

from tests.debug.helpers import REPO

PROGRAM = '''
from tracetorch import compiler; import torch

def f(x, y):
    a = torch.sin(x) + y
    print("graph break here")
    return torch.relu(a) * 2

opt = compiler.compile(f)
opt(torch.randn(4), torch.randn(4))
opt(torch.randn(4, 3), torch.randn(4, 3))   # a recompile: the rank changed
lin = torch.nn.Linear(4, 4)
g = compiler.compile(lambda x: lin(x).relu().sum())
g(torch.randn(2, 4)).backward()              # training: forward and backward graphs
print(compiler.explain(f)(torch.randn(4), torch.randn(4)).graph_count)
'''

EVERY_COMPILE = ["source.py", "original_bytecode.txt", "transformed_bytecode.txt", "guards.txt",
                 "fx_graph_readable.py", "fx_graph_runnable.py", "aot_forward.py",
                 "ir_pre_fusion.txt", "ir_post_fusion.txt", "schedule.txt", "output_code.py"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("debug_folder")
    (tmp / "prog.py").write_text(PROGRAM)
    env = dict(os.environ, TRACE_COMPILE_DEBUG="1", TRACE_COMPILE_DEBUG_DIR=str(tmp / "dumps"),
               PYTHONPATH=REPO)
    r = subprocess.run([sys.executable, "prog.py"], cwd=tmp, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    latest = tmp / "dumps" / "latest"
    assert latest.is_symlink() and latest.resolve().name.startswith("run_")
    assert latest.resolve().name.endswith(f"-pid_{latest.resolve().name.split('-pid_')[1]}")
    return latest.resolve()


def _index(run_dir):
    """{compile id: (header line, files)} from index.txt."""
    lines = (run_dir / "index.txt").read_text().splitlines()
    out = {}
    for i, line in enumerate(lines):
        if line.startswith("["):
            cid = line[1:line.index("]")]
            files = lines[i + 2].split("files:", 1)[1].split()
            out[cid] = (line, files)
    return out


def test_run_level_files(run):
    assert "frontend:" in (run / "config.yaml").read_text()
    assert "compile_debug: true" in (run / "config.yaml").read_text()
    trace = (run / "trace.log").read_text()
    assert '"dynamo_start"' in trace and '"inductor_output_code"' in trace
    debug_log = (run / "debug.log").read_text()
    for component in ("[frontend]", "[aot]", "[backend]"):
        assert component in debug_log
    assert "Graph Count" in (run / "explain.txt").read_text()


def test_every_compile_id_has_its_files(run):
    index = _index(run)
    assert {"0/0", "0/1", "1/0", "2/0"} <= set(index)
    for cid in ("0/0", "0/1", "1/0", "2/0"):
        header, files = index[cid]
        folder = run / cid.replace("/", "_")
        for name in EVERY_COMPILE:
            assert (folder / name).is_file(), f"{cid}: {name} missing ({header})"
            assert name in files
    assert "f (" in index["0/0"][0] and "prog.py:4" in index["0/0"][0]


def test_graph_break_recompile_and_training_files(run):
    index = _index(run)
    assert "status: graph break" in index["0/0"][0]
    assert "recompile" in index["0/1"][0] and "graph break" in index["0/1"][0]
    assert "status: ok" in index["2/0"][0]
    assert "print()" in (run / "0_0" / "graph_breaks.txt").read_text()
    assert "prog.py:6" in (run / "0_0" / "graph_breaks.txt").read_text()
    reasons = (run / "0_1" / "recompile_reasons.txt").read_text()
    assert "Recompiling function f" in reasons and "0/0:" in reasons
    assert not (run / "0_0" / "recompile_reasons.txt").exists()   # only where there is one
    assert (run / "2_0" / "aot_backward.py").is_file()            # training graphs only
    assert not (run / "0_0" / "aot_backward.py").exists()
    source = (run / "0_0" / "source.py").read_text()
    assert "def f(x, y):" in source and "compiled range" in source


def test_runnable_files_run_standalone(run, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRACE_COMPILE_DEBUG")}
    for rel in ("2_0/fx_graph_runnable.py", "2_0/output_code.py"):
        r = subprocess.run([sys.executable, str(run / rel)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{rel}: {r.stderr[-2000:]}"
