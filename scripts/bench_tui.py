"""Measure tracetui on a big trace: first paint, time to full index, navigation latency.

    python scripts/bench_tui.py [TRACE] [--events N] [--runs R]   # default: a 100,000-event trace

Headless (App.run_test), on the machine as it is: the load (uptime) is printed with the figures.

- cold start, in fresh processes (R runs, medians): what `tracetui TRACE` costs before the user
  sees the overview: imports, `open_path` (read and index the file), and the first paint. The
  first paint is the first frame of the overview screen that Textual renders (App._display called
  with the main screen's counts and tree laid out), timed from the process start.
  "full index" is when every record is parsed and the tree of compiles is shown.
- navigation, in this process: each key from the press until the app has processed it and is
  idle again (Pilot's wait), and for replay steps also until the moved cursor line is drawn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


# -- cold start (child process) -------------------------------------------------------------------
def child(path: str, t_spawn: float) -> None:
    """Runs in a fresh process: import, open, run until the overview is complete; print JSON."""
    t_main = time.time()
    from textual.app import App

    from tracetorch.tui.app import TraceApp
    from tracetorch.tui.paths import open_path
    from tracetorch.tui.screens.main import MainScreen
    from tracetorch.tui.widgets.compile_tree import CompileTree

    t_imported = time.time()
    marks: dict[str, float] = {}
    display = App._display

    def timed_display(self, screen, renderable):
        if renderable is not None and "paint" not in marks and isinstance(screen, MainScreen):
            names = {type(w).__name__ for w in screen._compositor.visible_widgets}
            if {"Totals", "CompileTree"} <= names:
                marks["paint"] = time.time()
        return display(self, screen, renderable)

    App._display = timed_display

    async def run() -> None:
        opened = open_path(path)
        marks["opened"] = time.time()
        app = TraceApp(opened.trace, opened.debug_dir, path)
        async with app.run_test(size=(160, 48)) as pilot:
            while "paint" not in marks:
                await asyncio.sleep(0.001)
            tree = app.screen.query_one(CompileTree)
            while app.model is None or not tree.root.children:
                await asyncio.sleep(0.005)
            await pilot.pause()
            marks["ready"] = time.time()
            marks["cpu"] = time.process_time()

    asyncio.run(run())
    out = {"interpreter": t_main - t_spawn, "imports": t_imported - t_main,
           "open_path": marks["opened"] - t_imported, "paint_after_open": marks["paint"] - marks["opened"],
           "first_paint": marks["paint"] - t_spawn, "full_index": marks["ready"] - t_spawn,
           "cpu": marks["cpu"]}
    sys.stdout.write(json.dumps(out) + "\n")


def child_trivial(t_spawn: float) -> None:
    """Calibration: a nearly empty Textual app, cold, to tell tracetui's cost from the machine's."""
    t_main = time.time()
    from textual.app import App
    from textual.widgets import Footer, Header, Static

    painted: list[float] = []
    display = App._display

    def timed_display(self, screen, renderable):
        if renderable is not None and not painted:
            painted.append(time.time())
        return display(self, screen, renderable)

    App._display = timed_display

    class Trivial(App):
        def compose(self):
            yield Header()
            yield Static("hello")
            yield Footer()

    async def run() -> None:
        async with Trivial().run_test(size=(160, 48)):
            while not painted:
                await asyncio.sleep(0.001)

    asyncio.run(run())
    sys.stdout.write(json.dumps({"interpreter": t_main - t_spawn,
                                 "first_paint": painted[0] - t_spawn}) + "\n")


def cold_runs(args: list[str], runs: int) -> list[dict]:
    out = []
    for _ in range(runs):
        t = time.time()
        proc = subprocess.run([sys.executable, __file__, *args, "--t-spawn", repr(t)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise SystemExit(f"bench child failed:\n{proc.stderr[-3000:]}")
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def med(runs: list[dict], key: str) -> str:
    xs = sorted(r[key] for r in runs)
    return f"{statistics.median(xs) * 1000:6.0f} ms  (min {xs[0] * 1000:.0f}, max {xs[-1] * 1000:.0f})"


# -- navigation (this process) ------------------------------------------------------------------
def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    return (f"median {statistics.median(xs) * 1000:6.1f} ms   p90 "
            f"{xs[int(0.9 * (len(xs) - 1))] * 1000:6.1f} ms   max {xs[-1] * 1000:6.1f} ms  (n={len(xs)})")


async def per_key(pilot, keys: list[str]) -> list[float]:
    """Seconds from each key press until the app has processed it and is idle (Pilot's wait)."""
    out = []
    for k in keys:
        t = time.perf_counter()
        await pilot.press(k)
        await pilot.pause()
        out.append(time.perf_counter() - t)
    return out


PAINTED: dict[int, float] = {}  # timeline cursor index -> when its line was drawn


def record_cursor_paints() -> None:
    """Wrap the timeline's render_line to note when the cursor's line is drawn (on screen)."""
    from tracetorch.tui.widgets.event_list import EventList

    orig = EventList.render_line

    def render_line(self, y):
        strip = orig(self, y)
        if round(self.scroll_offset.y) + y == self.cursor:
            PAINTED.setdefault(self.cursor, time.perf_counter())
        return strip

    EventList.render_line = render_line


async def until_painted(pilot, keys: list[str]) -> list[float]:
    """Seconds from the key press until the moved cursor line is drawn (what the user sees move)."""
    from tracetorch.tui.widgets.event_list import EventList

    out = []
    timeline = pilot.app.screen.query_one(EventList)
    for k in keys:
        if k == "b" and pilot.app.model.next_mark("break", timeline.cursor, 1) is None:
            await pilot.press("g")  # past the last break: start over
            await pilot.pause()
        before = timeline.cursor
        t = time.perf_counter()
        await pilot.press(k)
        while timeline.cursor == before or timeline.cursor not in PAINTED:
            await asyncio.sleep(0.001)
            if time.perf_counter() - t > 10:
                break
        out.append(PAINTED.pop(timeline.cursor, time.perf_counter()) - t)
        PAINTED.clear()
        await pilot.pause()  # settle (detail panes) before the next key
    return out


async def navigation(path: Path) -> None:
    from textual.widgets import OptionList

    from tracetorch.tui.app import TraceApp
    from tracetorch.tui.paths import open_path
    from tracetorch.tui.widgets.compile_detail import CompileDetail

    opened = open_path(str(path))
    app = TraceApp(opened.trace, opened.debug_dir, str(path))
    async with app.run_test(size=(160, 48)) as pilot:
        while app.model is None:
            await asyncio.sleep(0.01)
        await pilot.pause()
        out = sys.stdout.write
        out("navigation, key press -> processed and idle (in-process, after the full index):\n")
        out(f"  overview tree j/k:          {fmt(await per_key(pilot, ['j'] * 15 + ['k'] * 5))}\n")
        # opening the Kernels tab of a compile (from another tab), 10 times
        kernel_tab = []
        for _ in range(10):
            await per_key(pilot, ["1"])
            kernel_tab += await per_key(pilot, ["8"])
        detail = app.screen.query_one(CompileDetail)
        assert detail.active == "kernels" and app.screen.query_one("#kernel-list", OptionList).option_count
        out(f"  open the Kernels tab (8):   {fmt(kernel_tab)}\n")
        out(f"  tabs 1..9:                  {fmt(await per_key(pilot, list('234567891')))}\n")
        await pilot.press("r")
        await pilot.pause()
        out(f"  replay step j:              {fmt(await per_key(pilot, ['j'] * 20 + ['k'] * 10))}\n")
        await pilot.press("g")
        await pilot.pause()
        out(f"  replay next break b:        {fmt(await per_key(pilot, ['b'] * 10))}\n")
        out(f"  replay pagedown:            {fmt(await per_key(pilot, ['pagedown'] * 20))}\n")
        out(f"  replay G / g:               {fmt(await per_key(pilot, ['G', 'g'] * 5))}\n")
        out("replay, key press -> the moved cursor line is drawn:\n")
        out(f"  replay step j:              {fmt(await until_painted(pilot, ['j'] * 30))}\n")
        await pilot.press("g")
        await pilot.pause()
        out(f"  replay next break b:        {fmt(await until_painted(pilot, ['b'] * 10))}\n")
        t = time.perf_counter()
        hits = opened.trace.search("injected relu")
        out(f"search /injected relu/: {len(hits)} hits in {(time.perf_counter() - t) * 1000:.0f} ms\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", help="trace to open (default: generate one)")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5, help="cold starts to take the median of")
    ap.add_argument("--child", choices=("tracetui", "trivial"), help=argparse.SUPPRESS)
    ap.add_argument("--t-spawn", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child == "trivial":
        child_trivial(args.t_spawn)
        return 0
    path = Path(args.trace) if args.trace else Path(f"/tmp/tracetui_big/trace_{args.events}.log")
    if args.child == "tracetui":
        child(str(path), args.t_spawn)
        return 0
    if not args.trace and not path.exists():
        from make_big_trace import main as make
        make([str(path), "--events", str(args.events)])
    out = sys.stdout.write
    out(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
        f"on {os.cpu_count()} cpus\n")
    trivial = cold_runs(["--child", "trivial"], args.runs)
    out(f"calibration, a nearly empty Textual app, cold (process start -> first paint): "
        f"{med(trivial, 'first_paint')}\n")
    runs = cold_runs(["--child", "tracetui", str(path)], args.runs)
    out(f"trace: {path} ({path.stat().st_size / 1e6:.1f} MB); cold starts: {args.runs}, medians:\n")
    for key, label in (("interpreter", "python start"), ("imports", "imports (textual, tui, logs)"),
                       ("open_path", "open_path (read, index)"),
                       ("paint_after_open", "app start -> first paint"),
                       ("first_paint", "FIRST PAINT (process start)"),
                       ("full_index", "FULL INDEX (all parsed, tree)"),
                       ("cpu", "  CPU time used by then")):
        out(f"  {label:<32}{med(runs, key)}\n")
    record_cursor_paints()
    asyncio.run(navigation(path))
    out(f"load after: {os.getloadavg()[0]:.2f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
