"""tracetui's command line: --summary, bad paths and arguments, default path, --demo."""

import subprocess
import sys
from pathlib import Path

import pytest

from tracetorch.tui import cli, demo, paths
from tracetorch.tui.synthetic import write_synthetic_trace

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tracetorch.tui.cli", *args], capture_output=True,
                          text=True, cwd=cwd or REPO, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_summary_lists_every_break_and_recompile(synthetic_trace, capsys):
    assert cli.main(["--summary", str(synthetic_trace)]) == 0
    out = capsys.readouterr().out
    assert "3 frames, 4 compiles, 3 graphs, 2 graph breaks, 1 recompiles, 1 failed, 3 kernels" in out
    # the frame's recompile breaks at the same place: said once, then referred to
    assert out.count("graph break at /work/demo/model.py:13 [TT-GB-001]: print()") == 1
    assert "graph break: the same as 0/0" in out
    assert ("recompile: tensor 'x' size mismatch at index 0; changed 8 → 4 (guard from "
            "/work/demo/model.py:11) [entries 0/0]") in out
    assert "failure: CompileError: injected relu bug" in out
    # worst offender (the failed frame) first
    assert out.index("frame 2: broken") < out.index("frame 0: forward")


def test_summary_of_a_damaged_trace_says_what_was_skipped(tmp_path, capsys):
    good = write_synthetic_trace(tmp_path / "good.log").read_text().splitlines(keepends=True)
    bad = tmp_path / "trace_bad.log"
    bad.write_text("".join(good[:5]) + "garbage line\n" + "".join(good[5:]))
    assert cli.main(["--summary", str(bad)]) == 0
    out = capsys.readouterr().out
    assert "problems: 1 records skipped" in out and "line 6" in out


def test_missing_path_exits_2_without_traceback():
    r = run_cli("/no/such/trace.log")
    assert r.returncode == 2
    assert "tracetui: /no/such/trace.log: no such file or folder" in r.stderr
    assert "Traceback" not in r.stderr


def test_not_a_trace_exits_2(tmp_path):
    f = tmp_path / "image.log"
    f.write_bytes(bytes(range(256)) * 4)
    r = run_cli(str(f))
    assert r.returncode == 2 and "not a trace" in r.stderr and "Traceback" not in r.stderr


def test_unreadable_file_exits_2(tmp_path, monkeypatch, capsys):
    f = tmp_path / "trace_1.log"
    f.write_text("x")

    def denied(self):  # tests run as root, where chmod 0 does not stop reading
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert cli.main([str(f)]) == 2
    assert f"tracetui: cannot read {f}: Permission denied" in capsys.readouterr().err


def test_folder_without_traces_exits_2(tmp_path):
    r = run_cli(str(tmp_path))
    assert r.returncode == 2 and "no trace files" in r.stderr


def test_bad_arguments_get_argparse_errors():
    r = run_cli("--bogus")
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
    r = run_cli("--summary")
    assert r.returncode == 2 and "--summary needs a PATH" in r.stderr
    r = run_cli("--demo", "x.log")
    assert r.returncode == 2 and "--demo takes no PATH" in r.stderr


def test_no_path_and_no_runs_is_a_clear_error(tmp_path):
    r = run_cli(cwd=tmp_path)
    assert r.returncode == 2 and "no runs under ./trace_debug" in r.stderr


def test_no_path_opens_latest_run(tmp_path, monkeypatch):
    run = tmp_path / "trace_debug" / "run_2026_01_01_00_00_00_000000-pid_1"
    run.mkdir(parents=True)
    write_synthetic_trace(run / "trace.log")
    (tmp_path / "trace_debug" / "latest").symlink_to(run)
    monkeypatch.chdir(tmp_path)
    opened = paths.open_path(None)
    assert opened.debug_dir == run.resolve() and len(opened.trace.events) > 10
    # a trace_debug base folder given explicitly means its newest run too
    assert paths.open_path(str(tmp_path / "trace_debug")).debug_dir == run.resolve()


def test_demo_failure_is_reported_and_partial_trace_opened(tmp_path, monkeypatch, capsys):
    # a stand-in demo program that writes part of a debug folder and then fails
    fake = tmp_path / "demo.py"
    fake.write_text(
        "import os, sys\n"
        "sys.path.insert(0, %r)\n"
        "from tracetorch.tui.synthetic import write_synthetic_trace\n"
        "base = os.environ['TRACE_COMPILE_DEBUG_DIR']\n"
        "write_synthetic_trace(os.path.join(base, 'run_2026_01_01_00_00_00_000000-pid_7', 'trace.log'))\n"
        "sys.exit('RuntimeError: backend exploded')\n" % str(REPO))
    monkeypatch.setattr(demo, "DEMO", fake)
    monkeypatch.chdir(tmp_path)
    opened = []
    monkeypatch.setattr("tracetorch.tui.app.TraceApp.run", lambda self: opened.append(self))
    assert cli.main(["--demo"]) == 1          # the partial trace is shown, and the exit says it failed
    err = capsys.readouterr().err
    assert "the demo program failed (exit 1)" in err and "backend exploded" in err
    assert opened and opened[0].debug_dir.name.startswith("run_") and "failed" in opened[0].note


def test_demo_that_writes_nothing_exits_1(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "demo.py"
    fake.write_text("raise SystemExit('ImportError: no compiler')\n")
    monkeypatch.setattr(demo, "DEMO", fake)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--demo"]) == 1
    err = capsys.readouterr().err
    assert "no compiler" in err and "nothing to open" in err


@pytest.mark.parametrize("name", ["trace.log", "trace_123.log"])
def test_debug_folder_detection(tmp_path, name):
    write_synthetic_trace(tmp_path / name)
    (tmp_path / "repro").mkdir()
    opened = paths.open_path(str(tmp_path))
    assert (opened.debug_dir == tmp_path) == (name == "trace.log")


# -- failures are failures: non-zero exit, one line, no traceback ---------------------------------
_CRASHING_APP = (
    "import sys\n"
    "from tracetorch.tui import app, cli\n"
    "def boom(self):\n"
    "    raise RuntimeError('simulated internal error')\n"
    "app.TraceApp.on_mount = boom\n"
    "sys.exit(cli.main([sys.argv[1]]))\n")


def test_crash_inside_the_app_exits_1_with_one_line(synthetic_trace, tmp_path):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path),
           "TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver"}
    r = subprocess.run([sys.executable, "-c", _CRASHING_APP, str(synthetic_trace)], env=env,
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == [ln for ln in lines if ln.startswith("tracetui: internal error: RuntimeError: "
                                                         "simulated internal error")], r.stderr
    log = next(tmp_path.glob("tracetui_crash_*.log"))
    assert "simulated internal error" in log.read_text()


def test_missing_dependency_exits_3_with_one_line(synthetic_trace, tmp_path):
    # a stand-in `textual` package that cannot be imported, first on the path
    (tmp_path / "textual").mkdir()
    (tmp_path / "textual" / "__init__.py").write_text("raise ImportError('textual is broken here')\n")
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "tracetorch.tui.cli", str(synthetic_trace)], env=env,
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("tracetui: cannot start: ImportError: textual is broken here")
