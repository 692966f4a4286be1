"""`tracetui --demo`: run scripts/demo.py under TRACE_COMPILE_DEBUG=1 in a subprocess and find
the debug run folder it wrote (even when the demo failed part-way)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "scripts" / "demo.py"
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
        return DemoResult(None, 127, f"demo program not found at {DEMO} (tracetui --demo needs "
                                     "a checkout installed with `pip install -e .`)")
    # the compiled-code cache off (unless asked): a cache hit writes no IR or kernel records,
    # and the demo is there to show them
    env = {"TRACE_BACKEND_CACHE_ENABLED": "0", **os.environ, "TRACE_COMPILE_DEBUG": "1",
           "TRACE_COMPILE_DEBUG_DIR": str(base),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    before = set(base.glob("run_*")) if base.is_dir() else set()
    echo(f"running {DEMO.name} under TRACE_COMPILE_DEBUG=1 (debug folder in {base}) ...")
    try:
        proc = subprocess.run([sys.executable, str(DEMO)], env=env, cwd=str(REPO), text=True,
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
