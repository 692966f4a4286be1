"""`tracetui --demo`: run the demo program (tracetorch.debug.demo) under TRACE_COMPILE_DEBUG=1 in
a subprocess and find the debug run folder it wrote (even when the demo failed part-way).

tui never imports debug or compiler: the program is located without importing it and run as a
script in a child process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import tracetorch

# The folder holding the `tracetorch` package (a checkout's root, or site-packages): the child
# process must import the same tracetorch as this one.
PACKAGE_PARENT = Path(tracetorch.__file__).resolve().parent.parent
REPO = Path(__file__).resolve().parent.parent


def _demo_program() -> Path:
    spec = importlib.util.find_spec("tracetorch.debug")
    folder = Path(spec.origin).parent if spec and spec.origin else REPO / "debug"
    return folder / "demo.py"


DEMO = _demo_program()
TIMEOUT_S = 600


@dataclass
class DemoResult:
    run_dir: Path | None  # the debug folder written (None: nothing written)
    returncode: int
    stderr_tail: str

    @property
    def failed(self) -> bool:
        return self.returncode != 0


def run_demo(base: Path, echo=print) -> DemoResult:
    """Run the demo with its debug folder under `base`; `echo` gets progress lines."""
    if not DEMO.is_file():
        return DemoResult(None, 127, f"demo program not found at {DEMO} (reinstall tracetorch: "
                                     "pip install -e .)")
    # the compiled-code cache off (unless asked): a cache hit writes no IR or kernel records,
    # and the demo is there to show them
    env = {"TRACE_BACKEND_CACHE_ENABLED": "0", **os.environ, "TRACE_COMPILE_DEBUG": "1",
           "TRACE_COMPILE_DEBUG_DIR": str(base),
           "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_PARENT),
                                                     os.environ.get("PYTHONPATH")) if p)}
    before = set(base.glob("run_*")) if base.is_dir() else set()
    echo(f"running {DEMO.name} under TRACE_COMPILE_DEBUG=1 (debug folder in {base}) ...")
    try:
        proc = subprocess.run([sys.executable, str(DEMO)], env=env, cwd=str(base.parent), text=True,
                              capture_output=True, timeout=TIMEOUT_S)
        code, err = proc.returncode, proc.stderr
        if proc.stdout.strip():
            echo(proc.stdout.rstrip())
    except subprocess.TimeoutExpired as e:
        code, err = 124, f"demo timed out after {TIMEOUT_S} s\n{e.stderr or ''}"
    new = sorted(set(base.glob("run_*")) - before, key=lambda p: p.name) if base.is_dir() else []
    run_dir = new[-1] if new else None
    tail = "\n".join(str(err).strip().splitlines()[-15:])
    return DemoResult(run_dir, code, tail)
