"""Measure tracetui on a big trace: time to first paint, time until the overview is ready, and
navigation latency (keys in the tree, the tabs and the replay timeline). Headless (App.run_test).

    python scripts/bench_tui.py [TRACE] [--events N]     # default: make a 100,000-event trace
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from textual.app import App  # noqa: E402
from textual.widgets import Footer, Header, Static  # noqa: E402

from tui.app import TraceApp  # noqa: E402
from tui.paths import open_path  # noqa: E402
from tui.widgets.event_list import EventList  # noqa: E402


class TimedApp(TraceApp):
    """Records when the first frame is painted (after the first refresh of the main screen)."""

    first_paint: float | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.call_after_refresh(self._painted)

    def _painted(self) -> None:
        if self.first_paint is None:
            self.first_paint = time.perf_counter()


async def per_key(pilot, keys: list[str]) -> list[float]:
    """Seconds from each key press until the app has processed it and repainted."""
    out = []
    for k in keys:
        t = time.perf_counter()
        await pilot.press(k)
        await pilot.pause()
        out.append(time.perf_counter() - t)
    return out


PAINTED: dict[int, float] = {}  # timeline cursor index -> when its line was drawn


def _record_cursor_paints() -> None:
    """Wrap the timeline's render_line to note when the cursor's line is drawn (on screen)."""
    orig = EventList.render_line

    def render_line(self, y):
        strip = orig(self, y)
        if round(self.scroll_offset.y) + y == self.cursor:
            PAINTED.setdefault(self.cursor, time.perf_counter())
        return strip

    EventList.render_line = render_line


async def until_painted(pilot, keys: list[str]) -> list[float]:
    """Replay steps: seconds from the key press until the moved cursor line is drawn (what the
    user sees move); unlike per_key this excludes Pilot's wait for every widget to idle."""
    out = []
    timeline = pilot.app.screen.query_one(EventList)
    for k in keys:
        before = timeline.cursor
        t = time.perf_counter()
        await pilot.press(k)
        while timeline.cursor == before or timeline.cursor not in PAINTED:
            await asyncio.sleep(0.001)
            if time.perf_counter() - t > 10:
                break
        out.append(PAINTED.pop(timeline.cursor, time.perf_counter()) - t)
        PAINTED.clear()
    return out


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    return (f"median {statistics.median(xs) * 1000:6.1f} ms   p90 "
            f"{xs[int(0.9 * (len(xs) - 1))] * 1000:6.1f} ms   max {xs[-1] * 1000:6.1f} ms  (n={len(xs)})")


class Trivial(App):
    """Calibration: a nearly empty Textual app, to tell tracetui's cost from the machine's."""

    BINDINGS = [("j", "down", "")]
    first_paint: float | None = None

    def compose(self):
        yield Header()
        yield Static("hello", id="s")
        yield Footer()

    def on_mount(self) -> None:
        self.call_after_refresh(lambda: setattr(self, "first_paint", time.perf_counter()))

    def action_down(self) -> None:
        self.query_one("#s", Static).update(f"{time.perf_counter()}")


async def calibrate() -> None:
    t0 = time.perf_counter()
    app = Trivial()
    async with app.run_test(size=(160, 48)) as pilot:
        while app.first_paint is None:
            await asyncio.sleep(0.001)
        paint = app.first_paint - t0
        keys = await per_key(pilot, ["j"] * 10)
    print(f"calibration, a nearly empty Textual app on this machine now: first paint "
          f"{paint * 1000:.0f} ms, key {fmt(keys)}")


async def bench(path: Path) -> None:
    t0 = time.perf_counter()
    opened = open_path(str(path))  # what `tracetui PATH` does before the app starts
    t_open = time.perf_counter()
    app = TimedApp(opened.trace, opened.debug_dir, str(path))
    async with app.run_test(size=(160, 48)) as pilot:
        while app.first_paint is None:
            await asyncio.sleep(0.001)
        t_paint = app.first_paint
        while app.model is None:
            await asyncio.sleep(0.01)
        await pilot.pause()
        t_ready = time.perf_counter()
        n = len(opened.trace.events)
        print(f"trace: {path} ({path.stat().st_size / 1e6:.1f} MB, {n:,} events, "
              f"{len(opened.trace.skipped)} skipped)")
        print(f"index (open_path):          {(t_open - t0) * 1000:7.0f} ms")
        print(f"first paint:                {(t_paint - t0) * 1000:7.0f} ms   (from open_path)")
        print(f"overview ready (all parsed):{(t_ready - t0) * 1000:7.0f} ms   (background thread)")
        print("navigation latency, key press -> processed and repainted:")
        print(f"  tree j/k:           {fmt(await per_key(pilot, ['j'] * 15 + ['k'] * 5))}")
        print(f"  tabs 1..9:          {fmt(await per_key(pilot, list('234567891')))}")
        await pilot.press("r")
        await pilot.pause()
        print(f"  replay j, key -> cursor line drawn: {fmt(await until_painted(pilot, ['j'] * 20))}")
        print(f"  replay G/g, key -> cursor line drawn: "
              f"{fmt(await until_painted(pilot, ['G', 'g'] * 4))}")
        print(f"  replay j (one by one, each until idle): "
              f"{fmt(await per_key(pilot, ['j'] * 10 + ['k'] * 5))}")
        print(f"  replay pagedown:    {fmt(await per_key(pilot, ['pagedown'] * 20))}")
        print(f"  replay G / g:       {fmt(await per_key(pilot, ['G', 'g'] * 5))}")
        print(f"  replay next break:  {fmt(await per_key(pilot, ['b'] * 10))}")
        t = time.perf_counter()
        hits = opened.trace.search("injected relu")
        print(f"search /injected relu/: {len(hits)} hits in {(time.perf_counter() - t) * 1000:.0f} ms")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", help="trace to open (default: generate one)")
    ap.add_argument("--events", type=int, default=100_000)
    args = ap.parse_args(argv)
    path = Path(args.trace) if args.trace else Path(f"/tmp/tracetui_big/trace_{args.events}.log")
    if not args.trace and not path.exists():
        from make_big_trace import main as make
        make([str(path), "--events", str(args.events)])
    _record_cursor_paints()
    asyncio.run(calibrate())
    asyncio.run(bench(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
