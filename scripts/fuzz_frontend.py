"""Differential fuzzing of the frontend at scale: random programs (control flow, containers,
closures, globals, graph breaks; tests/compiler/frontend/pysem/generator.py) run eagerly and
compiled with compiler.compile(fn, backend="eager"), three calls each with changed inputs;
results, result types, mutated inputs and the written global are compared (pysem.run_case).

    python scripts/fuzz_frontend.py --seeds 2000                 # seeds 0..1999
    python scripts/fuzz_frontend.py --start 5000 --seeds 500 --backend default

Writes scripts/results/fuzz_frontend.json (counts, failing seeds with their source and
differences) and prints a summary table. Exit status 1 when any program is wrong or crashes.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class _Hang(BaseException):
    """Not an Exception: the harness must not record it as the program's own exception."""


def _hang(signum, frame):
    raise _Hang()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds per program before it counts as a hang")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "results", "fuzz_frontend.json"))
    a = ap.parse_args()
    from tracetorch import compiler, logs
    from tests.compiler.frontend.pysem import run_case
    from tests.compiler.frontend.pysem.generator import case_for

    counts = collections.Counter()
    failures = []
    breaks = 0
    t0 = time.perf_counter()
    for seed in range(a.start, a.start + a.seeds):
        compiler.reset()
        case_ = case_for(seed)
        events = []
        sink = logs.add_sink(events.append, artifacts={"graph_break"})
        signal.signal(signal.SIGALRM, _hang)
        signal.setitimer(signal.ITIMER_REAL, a.timeout)
        try:
            out = run_case(case_, lambda fn: compiler.compile(fn, backend=a.backend))
            kind = "crash" if out.crashed else "wrong" if out.wrong else "ok"
            diffs = out.diffs
        except _Hang:
            kind, diffs = "hang", [f"no result within {a.timeout}s"]
        except Exception as e:    # the harness itself failed: count it, keep going
            kind, diffs = "harness_error", [f"{type(e).__name__}: {e}"]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            logs.remove_sink(sink)
        breaks += sum(1 for e in events if e.name == "graph_break")
        counts[kind] += 1
        if kind != "ok":
            failures.append({"seed": seed, "kind": kind, "diffs": diffs[:5], "source": case_.source})
            print(f"seed {seed}: {kind}: {diffs[:2]}", flush=True)
        if (seed - a.start + 1) % 200 == 0:
            print(f"... {seed - a.start + 1} programs, {dict(counts)}, "
                  f"{time.perf_counter() - t0:.0f}s", flush=True)
    elapsed = time.perf_counter() - t0
    summary = {"programs": a.seeds, "seeds": [a.start, a.start + a.seeds - 1],
               "backend": a.backend, "ok": counts["ok"], "wrong": counts["wrong"],
               "crash": counts["crash"], "hang": counts["hang"],
               "harness_error": counts["harness_error"],
               "graph_break_events": breaks, "seconds": round(elapsed, 1),
               "command": "python scripts/fuzz_frontend.py " + " ".join(sys.argv[1:])}
    print()
    print(f"{'programs':>10} {'ok':>8} {'wrong':>8} {'crash':>8} {'hang':>8} {'harness':>8} {'seconds':>8}")
    print(f"{a.seeds:>10} {counts['ok']:>8} {counts['wrong']:>8} {counts['crash']:>8} "
          f"{counts['hang']:>8} {counts['harness_error']:>8} {elapsed:>8.0f}")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump({"summary": summary, "failures": failures}, fh, indent=1)
    print(f"wrote {os.path.relpath(a.out)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
