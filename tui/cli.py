"""`tracetui [PATH] | --summary PATH | --demo`: the console script (pyproject: tui.cli:main)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracetorch.tui.paths import DEFAULT_BASE, PathError, open_path

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


def fail(message: str) -> int:
    print(f"tracetui: {message}", file=sys.stderr)
    return EXIT_BAD_PATH


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    note = None
    if args.demo:
        from tracetorch.tui.demo import run_demo
        res = run_demo(DEFAULT_BASE.resolve(), echo=lambda s: print(f"tracetui: {s}"))
        if res.failed:
            note = f"The demo failed (exit {res.returncode}); showing the trace it wrote so far."
            print(f"tracetui: the demo program failed (exit {res.returncode}):\n{res.stderr_tail}",
                  file=sys.stderr)
        if res.run_dir is None:
            return fail("the demo wrote no debug folder, so there is nothing to open.") \
                if res.failed else fail("the demo ran but wrote no debug folder.")
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
    TraceApp(opened.trace, opened.debug_dir, opened.shown, note=note).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
