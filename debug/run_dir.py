"""The per-process run folder: `<debug_dir>/run_<YYYY_MM_DD_HH_MM_SS_ffffff>-pid_<pid>/`.

One per process (the pid avoids clashes between ranks and parallel runs), created on first use
by whoever needs it first: the TRACE_COMPILE_DEBUG dump or a repro script. `latest` next to it
points at the newest run.
"""

from __future__ import annotations

import datetime
import os
import threading

from tracetorch import logs

log = logs.get_logger(__name__)

_lock = threading.Lock()
_run_dir: str | None = None
_run_pid: int | None = None


def _base_dir() -> str:
    from tracetorch.compiler import config

    return os.path.abspath(config.debug.debug_dir or "./trace_debug")


def _update_latest(base: str, run_dir: str) -> None:
    link = os.path.join(base, "latest")
    tmp = f"{link}.tmp{os.getpid()}"
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.basename(run_dir), tmp)   # relative: the folder can be moved as a whole
        os.replace(tmp, link)
    except OSError as e:  # e.g. a filesystem without symlinks: the run folder itself is fine
        log.warning("latest_symlink_failed", base=base, error=str(e))


def get_run_dir() -> str:
    """This process's run folder, created (with the `latest` symlink) on first call."""
    global _run_dir, _run_pid
    if _run_dir is not None and _run_pid == os.getpid():
        return _run_dir
    with _lock:
        if _run_dir is not None and _run_pid == os.getpid():
            return _run_dir
        base = _base_dir()
        stamp = datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S_%f")
        path = os.path.join(base, f"run_{stamp}-pid_{os.getpid()}")
        os.makedirs(path, exist_ok=True)
        _update_latest(base, path)
        _run_dir, _run_pid = path, os.getpid()
        log.info("debug_run_dir", path=path)
        return path


def subdir(*parts: str) -> str:
    path = os.path.join(get_run_dir(), *parts)
    os.makedirs(path, exist_ok=True)
    return path


def _reset_for_tests() -> None:
    global _run_dir, _run_pid
    with _lock:
        _run_dir = _run_pid = None
