"""Body of one candidate process: execute a candidate repro script and report how it failed.

Runs in a process forked from the minifier's forkserver, which has already imported torch and
the compiler, so a candidate costs a fork plus its own compile instead of a fresh interpreter.
Its stdout/stderr go to a file (compiler chatter must not garble the progress line; the tail is
kept for crash reports). The result travels back over a pipe; if the process dies first (segfault,
abort, os._exit), the parent sees the exit code instead.
"""

from __future__ import annotations

import os
import traceback


def _redirect_output(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def run_candidate(conn, script: str, script_path: str, options: dict, output_path: str) -> None:
    _redirect_output(output_path)
    try:
        import torch

        # Candidates run side by side on few cores: one intra-op thread each avoids oversubscription.
        torch.set_num_threads(max(1, int(options.get("threads", 1))))
        from tracetorch.debug import candidate
        from tracetorch.debug.failure import Failure

        ns = {"__name__": "__repro_candidate__", "__file__": script_path}
        try:
            exec(compile(script, script_path, "exec"), ns)
        except Exception as e:  # a malformed candidate is never "the same failure"
            conn.send({"failure": Failure("invalid", type(e).__name__, str(e), traceback.format_exc()).to_dict()})
            return
        outcome = candidate.evaluate(ns, check_accuracy=options.get("accuracy"),
                                     seed=options.get("seed"), script_path=script_path)
        conn.send({"failure": outcome.failure.to_dict() if outcome.failure else None,
                   "num_nodes": outcome.num_nodes})
    except BaseException as e:  # setup errors (loading the graph, config) are invalid candidates
        try:
            conn.send({"failure": {"kind": "invalid", "type": type(e).__name__, "message": str(e),
                                   "text": traceback.format_exc()}})
        except Exception:
            pass
    finally:
        try:
            conn.close()
        finally:
            # Skip interpreter teardown (atexit handlers, thread joins): the result is already sent.
            os._exit(0)
