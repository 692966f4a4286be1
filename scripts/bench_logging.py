"""How much does logging cost? ns per call, medians of repeated runs.

    PYTHONPATH=. python scripts/bench_logging.py [--repeat 15] [--number 200000]

Rows: a bare Python function call (the yardstick, with no arguments and with the same
arguments as an artifact call), a disabled artifact, a disabled `logs.enabled` check, a
disabled `log.debug`, and enabled events rendered to the console (glog, into a null stream)
and to the structured trace (a file). Goal: a disabled artifact within 2x of a bare call.
"""
from __future__ import annotations

import argparse
import io
import logging
import os
import statistics
import sys
import tempfile
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tracetorch import logs                                       # noqa: E402
from tracetorch.logs import core                             # noqa: E402


def bare():
    return None


def bare_same_args(name, payload_fn=None, /, **fields):
    return None


class Obj:
    def m(self, event, *args, **kw):
        return None


def payload():
    return "def forward(x):\n    return x + 1"


def measure(stmt, number: int, repeat: int, env: dict) -> float:
    times = timeit.repeat(stmt, number=number, repeat=repeat, globals=env)
    return statistics.median(times) / number * 1e9


def measure_interleaved(cases: list[tuple[str, str]], number: int, repeat: int,
                        env: dict) -> dict[str, float]:
    """Median ns per call of each statement, timed in turn within every repeat, so that load
    from other processes hits the bare calls and the logging calls alike."""
    timers = {name: timeit.Timer(stmt, globals=env) for name, stmt in cases}
    samples: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(repeat):
        for name, timer in timers.items():
            samples[name].append(timer.timeit(number) / number * 1e9)
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--number", type=int, default=200_000)
    args = ap.parse_args(argv)
    n, r = args.number, args.repeat
    log = logs.get_logger("compiler.backend.bench")
    env = dict(bare=bare, bare_same_args=bare_same_args, logs=logs, payload=payload, log=log,
               obj=Obj())

    logs.set_logs()                      # all quiet: nothing wants anything
    # (case, ns, yardstick row or None): each disabled call next to a bare call taking the
    # same arguments, since argument passing (**fields) costs the same with or without logs.
    cheap = [
        ("bare function call f()", "bare()", None),
        ("bare f(name, fn)", "bare_same_args('output_code', payload)", None),
        ("bare f(name, fn, k=v)", "bare_same_args('output_code', payload, filename='x.py')", None),
        ("bare method o.m(event, k=v)", "obj.m('fused', a=1)", None),
        ("disabled logs.artifact(name, fn)", "logs.artifact('output_code', payload)",
         "bare f(name, fn)"),
        ("disabled logs.artifact(name, fn, k=v)",
         "logs.artifact('output_code', payload, filename='x.py')", "bare f(name, fn, k=v)"),
        ("disabled logs.enabled(name)", "logs.enabled('output_code')", "bare function call f()"),
        ("disabled log.debug(event, k=v)", "log.debug('fused', a=1)",
         "bare method o.m(event, k=v)"),
    ]
    ns = measure_interleaved([(name, stmt) for name, stmt, _ in cheap], n, r, env)
    rows = [(name, ns[name], yard) for name, _, yard in cheap]

    enabled_n = max(n // 20, 1000)
    saved_stderr = sys.stderr
    sys.stderr = io.StringIO()           # console rendering cost, without terminal I/O
    try:
        logs.set_logs(output_code=True, backend=logging.DEBUG)
        with logs.compile_context(0, 0):
            rows.append(("enabled artifact -> console (glog)",
                         measure("logs.artifact('output_code', payload); sys.stderr.seek(0); "
                                 "sys.stderr.truncate()", enabled_n, r, {**env, "sys": sys}), None))
            rows.append(("enabled log.debug -> console (glog)",
                         measure("log.debug('fused', a=1); sys.stderr.seek(0); "
                                 "sys.stderr.truncate()", enabled_n, r, {**env, "sys": sys}), None))
    finally:
        sys.stderr = saved_stderr
        logs.set_logs()

    with tempfile.TemporaryDirectory() as tmp:
        writer = logs.open_trace(os.path.join(tmp, "trace.log"))
        with logs.compile_context(0, 0):
            rows.append(("enabled artifact -> trace file",
                         measure("logs.artifact('output_code', payload)", enabled_n, r, env), None))
            rows.append(("enabled json record -> trace file",
                         measure("logs.artifact('graph_break', lambda: {'reason': 'print'})",
                                 enabled_n, r, env), None))
        logs.close_trace(writer)

    ns_of = {name: ns for name, ns, _ in rows}
    base = ns_of["bare function call f()"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} cpus, load average {load:.1f} "
          f"(other processes make every row noisy); medians of {r} runs "
          f"({n} calls each for cheap rows, {enabled_n} for enabled rows)")
    print(f"{'case':40} {'ns/call':>9} {'x f()':>7} {'x same-args bare call':>22}")
    for name, ns, yard in rows:
        same = f"{ns / ns_of[yard]:8.2f}  ({yard})" if yard else ""
        print(f"{name:40} {ns:9.1f} {ns / base:7.2f}   {same}")
    disabled = ns_of["disabled logs.artifact(name, fn)"]
    same_args = ns_of["bare f(name, fn)"]
    verdict = "met" if disabled <= 2 * same_args else "NOT met"
    print(f"\ngoal (disabled artifact within 2x of a bare call with the same arguments): "
          f"{verdict} ({disabled / same_args:.2f}x; {disabled / base:.2f}x of a no-argument f())")
    assert not core._state.traces
    return 0


if __name__ == "__main__":
    sys.exit(main())
