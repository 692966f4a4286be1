"""Command line of every repro script: `python repro.py [--minify] [--check-str RE] [--accuracy] ...`.

This is user-facing CLI output (stderr), so it prints; the decisions themselves are also logged
as structured events by the minifier. Exit codes: run: 1 reproduced, 3 failed differently,
0 passed (did not reproduce); minify: 0 minified, 2 not reproduced, 3 flaky.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time


def _parser(prog: str, default_action: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Reproduce a tracetorch compiler failure, or shrink it to a minimal graph.",
        epilog=f"Without --minify/--run this script does: {default_action}.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--minify", action="store_true", help="shrink the graph; write repro_minified.py")
    mode.add_argument("--run", action="store_true", help="just reproduce (the default of repro.py)")
    p.add_argument("--check-str", metavar="REGEX", type=_regex,
                   help="only failures whose text matches REGEX count (e.g. the original error message)")
    acc = p.add_mutually_exclusive_group()
    acc.add_argument("--accuracy", dest="accuracy", action="store_true", default=None,
                     help="also compare the compiled result with eager in float64")
    acc.add_argument("--no-accuracy", dest="accuracy", action="store_false",
                     help="do not compare results, only look for errors")
    p.add_argument("--jobs", "-j", type=_positive_int, default=None,
                   help="candidates run at the same time (default: available cores)")
    p.add_argument("--timeout", type=_positive_float, default=None,
                   help="seconds before a candidate counts as hung (default: 4x the original's time, >= 30)")
    p.add_argument("--seed", type=int, default=None, help="seed for regenerated inputs (default: SEED)")
    p.add_argument("--repeat", type=_positive_int, default=2,
                   help="runs of the original and of the result, to detect flaky failures (default 2)")
    p.add_argument("--out", metavar="PATH", default=None,
                   help="where to write the minified script (default: repro_minified.py beside this one)")
    return p


def _regex(text: str):
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"not a valid regular expression: {e}") from None
    return text


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {v}")
    return v


def _run(ns: dict, path: str, args) -> int:
    from tracetorch.debug import candidate
    from tracetorch.debug.failure import Failure, compile_check_str, matches

    target = Failure.from_dict(ns.get("FAILURE"))
    outcome = candidate.evaluate(ns, check_accuracy=args.accuracy, seed=args.seed, script_path=path)
    failure = outcome.failure
    if failure is None:
        what = "the failure did not reproduce" if target is not None else "no failure was recorded for it"
        sys.stderr.write(f"repro: the graph ({outcome.num_nodes} nodes) compiled and ran correctly"
                         f"{' and matched eager' if _accuracy_checked(args, ns) else ''}: "
                         f"{what}\n")
        return 0
    sys.stderr.write(failure.text.rstrip() + "\n")
    check = compile_check_str(args.check_str)
    if target is None and check is None or matches(failure, target, check):
        sys.stderr.write(f"repro: reproduced ({outcome.num_nodes} nodes): {failure.headline()}\n")
        return 1
    expected = f"text matching {args.check_str!r}" if check is not None else target.headline()
    sys.stderr.write(f"repro: failed, but differently from the original failure.\n"
                     f"  expected: {expected}\n  got:      {failure.headline()}\n")
    return 3


class _ProgressLine:
    """One line, redrawn in place on a terminal; at most one line per second otherwise."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.last = 0.0
        self.last_nodes = None

    def __call__(self, *, nodes, initial, tried, successes, elapsed, strategy):
        line = (f"[minifier] {nodes}/{initial} nodes left | {tried} candidates tried, {successes} reductions "
                f"| {elapsed:.1f}s | {strategy}")
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.stream.flush()
        elif nodes != self.last_nodes or time.monotonic() - self.last >= 1.0:
            self.stream.write(line + "\n")
            self.stream.flush()
        self.last, self.last_nodes = time.monotonic(), nodes

    def done(self):
        if self.tty:
            self.stream.write("\n")


def _minify(ns: dict, path: str, args) -> int:
    from tracetorch.debug.minifier.search import Minifier, MinifyOptions

    with open(path, encoding="utf-8") as f:
        text = f.read()
    progress = _ProgressLine()
    options = MinifyOptions(jobs=args.jobs, timeout=args.timeout, check_str=args.check_str,
                            accuracy=args.accuracy, seed=args.seed, out_path=args.out, repeat=args.repeat)
    result = Minifier(ns, text, path, options, report=progress).run()
    progress.done()
    if result.status == "minified":
        sys.stderr.write(f"[minifier] done: {result.message}\n"
                         f"[minifier] minimal repro: {result.out_path}\n"
                         f"[minifier] run it: python {result.out_path}\n")
        return 0
    sys.stderr.write(f"[minifier] {result.message}\n")
    if result.out_path:
        sys.stderr.write(f"[minifier] last result written to {result.out_path}\n")
    return 2 if result.status == "not_reproduced" else 3


def main(ns: dict, path: str, argv=None) -> int:
    default_action = ns.get("DEFAULT_ACTION", "run")
    args = _parser(os.path.basename(path), default_action).parse_args(argv)
    minify = args.minify or (default_action == "minify" and not args.run)
    # Writing new repros or debug folders while reproducing one would only add noise.
    os.environ.pop("TRACE_REPRO_AFTER", None)
    os.environ.pop("TRACE_COMPILE_DEBUG", None)
    try:
        return _minify(ns, path, args) if minify else _run(ns, path, args)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130


def _accuracy_checked(args, ns) -> bool:
    """--accuracy / --no-accuracy, else the script's own ACCURACY setting."""
    return bool(args.accuracy if args.accuracy is not None else ns.get("ACCURACY"))
