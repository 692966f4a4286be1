"""`tracetui [PATH] | --summary PATH | --demo`: the console script (pyproject:
tracetorch.tui.cli:main).

Exit codes: 0 done; 1 the app or the demo failed (one line on stderr, the traceback in a file);
2 bad arguments or a path that holds no trace; 3 a dependency is missing."""

from __future__ import annotations

import argparse
import sys


EXIT_BAD_PATH = 2


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="tracetui",
        description="Browse compile traces: tracetorch debug folders and traces (TRACE_DIR, "
                    "TRACE_COMPILE_DEBUG=1) and PyTorch's TORCH_TRACE logs.")
    ap.add_argument("path", nargs="?", metavar="PATH",
                    help="a debug run folder, a trace file, or a folder of traces (default: the "
                         "newest run under ./trace_debug)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--summary", action="store_true",
                      help="print a plain-text summary (overview, every break and recompile "
                           "reason) and exit")
    mode.add_argument("--demo", action="store_true",
                      help="compile the demo model under TRACE_COMPILE_DEBUG=1 and open the result")
    args = ap.parse_args(argv)
    if args.demo and args.path:
        ap.error("--demo takes no PATH (it writes its own debug folder)")
    if args.summary and not args.path:
        ap.error("--summary needs a PATH")
    return args


EXIT_FAILED = 1       # the app or the demo could not do what was asked
EXIT_MISSING_DEPENDENCY = 3


def fail(message: str, code: int = EXIT_BAD_PATH) -> int:
    print(f"tracetui: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args)
    except ImportError as e:          # a dependency missing or broken in this environment
        return fail(f"cannot start: {e.__class__.__name__}: {e}. Install tracetorch with its "
                    f"dependencies (pip install -e . in the checkout).", EXIT_MISSING_DEPENDENCY)
    except KeyboardInterrupt:
        return 130
    except Exception as e:            # an internal error: one line here, the traceback in a file
        from tracetorch.tui.app import write_crash_log
        where = write_crash_log(e)
        return fail(f"internal error: {type(e).__name__}: {e}"
                    + (f" (traceback in {where})" if where else ""), EXIT_FAILED)


def _main(args) -> int:
    # imported here, not at the top: a missing dependency is reported by main() in one line
    from tracetorch.tui.paths import DEFAULT_BASE, PathError, open_path
    note, demo_failed = None, False
    if args.demo:
        from tracetorch.tui.demo import run_demo
        res = run_demo(DEFAULT_BASE.resolve(), echo=lambda s: print(f"tracetui: {s}"))
        if res.failed:
            demo_failed = True
            note = f"The demo failed (exit {res.returncode}); showing the trace it wrote so far."
            print(f"tracetui: the demo program failed (exit {res.returncode}):\n{res.stderr_tail}",
                  file=sys.stderr)
        if res.run_dir is None:
            return fail("the demo wrote no debug folder, so there is nothing to open.", EXIT_FAILED) \
                if res.failed else fail("the demo ran but wrote no debug folder.", EXIT_FAILED)
        args.path = str(res.run_dir)
    try:
        opened = open_path(args.path)
    except PathError as e:
        return fail(str(e))
    if args.summary:
        from tracetorch.tui.model import TraceModel
        from tracetorch.tui.summary import summary_text
        sys.stdout.write(summary_text(TraceModel(opened.trace, opened.debug_dir), opened.shown))
        return 0
    from tracetorch.tui.app import TraceApp
    app = TraceApp(opened.trace, opened.debug_dir, opened.shown, note=note, quiet_crash=True)
    app.run()
    if app.crash is not None:
        where = f" (traceback in {app.crash_log})" if app.crash_log else ""
        return fail(f"internal error: {type(app.crash).__name__}: {app.crash}{where}", EXIT_FAILED)
    if demo_failed:
        return fail("exiting with an error because the demo program failed (see above).",
                    EXIT_FAILED)
    return app.return_code or 0


if __name__ == "__main__":
    raise SystemExit(main())
