"""Fixtures for the logs tests: every test starts from default settings and leaves none behind."""
import os
import subprocess
import sys

import pytest

from tracetorch import logs
from tracetorch.logs import core

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def fresh_logs():
    """Default settings (warnings only, glog, no sinks, no traces), restored afterwards."""
    state = core._state
    saved = (state.settings, state.fmt, state.out_path, list(state.sinks), list(state.traces),
             state.from_env)
    saved_dir_writer, logs._TRACE_DIR_WRITER = logs._TRACE_DIR_WRITER, None   # keep a real TRACE_DIR
    state.settings, state.fmt, state.from_env = logs.settings.LogSettings(), "glog", False
    state.sinks, state.traces = [], []
    saved_breaks, state.breaks = state.breaks, {}
    core.set_out(None)
    core.refresh()
    yield logs
    for writer in state.traces:
        writer.close()
    logs._TRACE_DIR_WRITER = saved_dir_writer
    core.set_out(None)
    state.settings, state.fmt, _, state.sinks, state.traces, state.from_env = saved
    state.breaks = saved_breaks
    core.set_out(saved[2])
    core.refresh()


def _run_python(code: str, env: dict | None = None, timeout: float = 120, cwd: str | None = None):
    """Run `code` in a fresh interpreter with the project on the path; returns CompletedProcess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=full_env, cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def run_python():
    """run_python(code, env=None, timeout=120, cwd=None) -> CompletedProcess (fresh interpreter)."""
    return _run_python
