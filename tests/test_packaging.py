"""The installed import names cannot collide with a user's own modules.

A training script's folder often has a `logs/` folder, a `debug.py` or a `compiler/` package of
its own; they come first on sys.path. The script below runs from such a folder with
TRACE_COMPILE_DEBUG=1 and TRACE_LOGS set, against the editable install the tests run in and
against a regular (non-editable) install of the same tree, and must compile, match eager, write
the debug folder and log.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

USER_SCRIPT = textwrap.dedent("""\
    import sys
    import torch
    import logs, debug, compiler, tui          # the user's own modules, first on sys.path
    assert logs.MINE and debug.MINE and compiler.MINE and tui.MINE
    import tracetorch
    from tracetorch import compiler as tc

    def f(x):
        return torch.relu(x) * 2 + x.sin()

    x = torch.randn(8)
    torch.testing.assert_close(tc.compile(f)(x), f(x))
    print("tracetorch from", tracetorch.__path__[0])
    """)


def _user_folder(root: Path) -> Path:
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "__init__.py").write_text("MINE = True\n")
    (root / "compiler").mkdir()
    (root / "compiler" / "__init__.py").write_text("MINE = True\n")
    (root / "debug.py").write_text("MINE = True\n")
    (root / "tui.py").write_text("MINE = True\n")
    (root / "train.py").write_text(USER_SCRIPT)
    return root


def _run_user_script(folder: Path, pythonpath: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_") and k != "PYTHONPATH"}
    env.update(TRACE_COMPILE_DEBUG="1", TRACE_COMPILE_DEBUG_DIR=str(folder / "dbg"),
               TRACE_LOGS="+frontend,output_code", TRACE_BACKEND_CACHE_ENABLED="0")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "train.py"], cwd=folder, env=env, text=True,
                          capture_output=True, timeout=600)


def _check(proc: subprocess.CompletedProcess, folder: Path) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = sorted((folder / "dbg").glob("run_*"))
    assert runs, f"no debug folder under {folder / 'dbg'}: {proc.stderr[-2000:]}"
    assert (runs[-1] / "trace.log").stat().st_size > 0
    assert any(p.name == "output_code.py" for p in runs[-1].rglob("*.py"))
    # TRACE_LOGS reached the console: frontend DEBUG lines and the output code artifact
    assert "[__output_code]" in proc.stderr and "compiler/frontend" in proc.stderr, proc.stderr[-2000:]
    return proc.stdout


def test_user_modules_named_like_ours_do_not_shadow_the_editable_install(tmp_path):
    folder = _user_folder(tmp_path / "project")
    out = _check(_run_user_script(folder, None), folder)
    assert str(folder) not in out


def test_user_modules_named_like_ours_do_not_shadow_a_regular_install(tmp_path):
    # build from a copy: setuptools writes build/ and *.egg-info beside the sources
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".whl", "trace_debug", ".hypothesis"))
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(site), str(src)], capture_output=True, text=True,
                         timeout=600)
    if pip.returncode != 0:
        pytest.fail(f"regular install failed:\n{pip.stderr[-3000:]}")
    assert (site / "tracetorch" / "compiler" / "api.py").is_file()
    assert not (site / "compiler").exists() and not (site / "logs").exists()
    folder = _user_folder(tmp_path / "project")
    out = _check(_run_user_script(folder, str(site)), folder)
    assert f"tracetorch from {site / 'tracetorch'}" in out
