"""Run candidate scripts in isolated processes, several at a time, each with a timeout.

Isolation without the cost of `import torch` per candidate: a multiprocessing *forkserver* is
started once with torch and the compiler preloaded; every candidate is a fresh process forked
from it (a few milliseconds), so crashes, segfaults and hangs kill only that candidate. The
forkserver itself never runs tensor code, so forking it is safe for OpenMP and friends.

`run_until(jobs, is_success)` evaluates in order with up to `jobs` processes in flight and stops
at the first success (in submission order), killing the candidates still running: parallel while
nothing reduces, sequential when something does.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import tempfile
import time
from dataclasses import dataclass

from tracetorch.debug.failure import Failure, from_exitcode, timeout_failure
from tracetorch.debug.minifier import worker

_CONTEXT = None


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _context(preload: list[str], warm_fake: bool = False):
    global _CONTEXT
    if _CONTEXT is None:
        if warm_fake:
            os.environ["TRACETORCH_MINIFY_WARM_FAKE"] = "1"  # read by debug.minifier.warmup
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(list(dict.fromkeys(
            ["torch", "tracetorch.debug.minifier.warmup", "tracetorch.debug.minifier.worker", *preload])))
        _CONTEXT = ctx
        # Start the server now: it imports torch and the compiler in the background while the
        # caller prepares its first candidates.
        from multiprocessing import forkserver
        forkserver.ensure_running()
    return _CONTEXT


@dataclass
class Result:
    failure: Failure | None
    seconds: float
    output_tail: str = ""


class _Running:
    def __init__(self, index, proc, conn, output_path, started):
        self.index, self.proc, self.conn, self.output_path, self.started = index, proc, conn, output_path, started


def _tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class CandidatePool:
    def __init__(self, jobs: int | None = None, timeout: float = 60.0, preload: list[str] | None = None,
                 options: dict | None = None, warm_fake: bool = False):
        self.jobs = max(1, jobs or available_cores())
        self.timeout = timeout
        self.options = dict(options or {})
        self.ctx = _context(preload or [], warm_fake)
        self.tmpdir = tempfile.mkdtemp(prefix="tracetorch_minify_")
        self.started = 0   # candidate processes launched (the "candidates tried" count)

    def _start(self, index: int, script: str, script_path: str) -> _Running:
        recv, send = self.ctx.Pipe(duplex=False)
        output_path = os.path.join(self.tmpdir, f"candidate_{self.started}.out")
        proc = self.ctx.Process(target=worker.run_candidate,
                                args=(send, script, script_path, self.options, output_path), daemon=True)
        proc.start()
        send.close()  # the child holds the only write end: EOF on recv means it died
        self.started += 1
        return _Running(index, proc, recv, output_path, time.monotonic())

    def _finish(self, run: _Running, killed_for_timeout: bool = False) -> Result:
        elapsed = time.monotonic() - run.started
        msg = None
        if killed_for_timeout:
            run.proc.kill()
        else:
            try:
                if run.conn.poll():
                    msg = run.conn.recv()
            except (EOFError, OSError):
                msg = None
        run.proc.join(timeout=5)
        if run.proc.is_alive():
            run.proc.kill()
            run.proc.join()
        run.conn.close()
        tail = _tail(run.output_path)
        try:
            os.unlink(run.output_path)
        except OSError:
            pass
        if killed_for_timeout:
            return Result(timeout_failure(self.timeout), elapsed, tail)
        if msg is None:
            code = run.proc.exitcode if run.proc.exitcode is not None else -9
            return Result(from_exitcode(code, tail), elapsed, tail)
        return Result(Failure.from_dict(msg.get("failure")), elapsed, tail)

    def _kill(self, run: _Running) -> None:
        run.proc.kill()
        run.proc.join()
        run.conn.close()
        try:
            os.unlink(run.output_path)
        except OSError:
            pass

    def run_until(self, scripts: list[tuple[str, str]], is_success=None) -> list[Result | None]:
        """Evaluate (script, path) pairs; stop after the earliest success if `is_success` given.

        Returns one entry per script: its Result, or None when it was skipped or cancelled."""
        results: list[Result | None] = [None] * len(scripts)
        pending = list(range(len(scripts)))
        running: dict[int, _Running] = {}
        best = None   # smallest index known to succeed
        while pending or running:
            while pending and len(running) < self.jobs and (best is None or pending[0] < best):
                i = pending.pop(0)
                running[i] = self._start(i, *scripts[i])
            if not running:
                break
            waitables = {}
            for run in running.values():
                waitables[run.conn] = run
                waitables[run.proc.sentinel] = run
            now = time.monotonic()
            deadline = min(run.started + self.timeout for run in running.values())
            ready = mpc.wait(list(waitables), timeout=max(0.0, deadline - now))
            done = {id(waitables[r]): waitables[r] for r in ready}
            for run in list(running.values()):
                if id(run) in done:
                    results[run.index] = self._finish(run)
                elif time.monotonic() - run.started > self.timeout:
                    results[run.index] = self._finish(run, killed_for_timeout=True)
                else:
                    continue
                del running[run.index]
                if is_success is not None and is_success(results[run.index]) and (best is None or run.index < best):
                    best = run.index
            if best is not None:
                # Later candidates can no longer win; earlier ones still running may (order decides).
                for i in [i for i in running if i > best]:
                    self._kill(running.pop(i))
                pending = [i for i in pending if i < best]
        return results

    def close(self) -> None:
        try:
            os.rmdir(self.tmpdir)
        except OSError:
            pass
