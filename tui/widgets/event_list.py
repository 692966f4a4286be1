"""The replay timeline: every event of the trace, one per line, with a cursor.

A line-API ScrollView: only the visible lines are rendered, and each line parses its event on
demand, so 100,000 events cost nothing until they are on screen.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tracetorch.tui import extract as X

KIND_STYLE = {
    **{k: "yellow" for k in X.BREAK_KEYS},
    **{k: "magenta" for k in X.RECOMPILE_KEYS},
    **{k: "bold red" for k in X.FAIL_KEYS},
    **{k: "cyan" for k in X.KERNEL_KEYS + X.OUTPUT_KEYS},
    **{k: "blue" for k in X.GRAPH_KEYS + X.AOT_KEYS},
    **{k: "green" for k in X.GUARD_KEYS},
    "dynamo_start": "bold",
}


def event_summary(ev) -> str:
    """A one-line description of an event for the timeline."""
    k = ev.key
    try:
        if k in X.BREAK_KEYS:
            return X.graph_break(ev, ev._trace).reason.split("\n")[0]
        if k in X.RECOMPILE_KEYS:
            gfs = X.guard_failures(ev)
            return gfs[0].text if gfs else ""
        if k == "dynamo_start":
            st = ev.stack
            return f"{st[-1].get('name', '')}" if st else ""
        if k == "kernel":
            return X.kernel(ev, ev._trace).name
        if k in X.FAIL_KEYS:
            return X.failure_text(ev)
        if k == "fusion_decision":
            d = X.as_dict(ev.payload_json())
            return f"{'fused' if d.get('fused') else 'not fused'} {d.get('nodes', '')}: {d.get('reason', '')}"
    except Exception:  # a damaged record still gets a line
        return ""
    return ""


class EventList(ScrollView, can_focus=True):
    """Timeline of events with a cursor (posts `EventList.Moved`)."""

    BINDINGS = [
        Binding("down,j", "move(1)", "Next", show=False),
        Binding("up,k", "move(-1)", "Prev", show=False),
        Binding("pagedown", "move(20)", "Page down", show=False),
        Binding("pageup", "move(-20)", "Page up", show=False),
        Binding("home,g", "jump(0)", "First", show=False),
        Binding("end,G", "jump(-1)", "Last", show=False),
    ]
    DEFAULT_CSS = """
    EventList { background: $surface; overflow-x: hidden; }
    """

    # repaint=False: watch_cursor repaints just the two lines that change
    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    class Moved(Message):
        def __init__(self, index: int, step: bool) -> None:
            self.index = index
            self.step = step  # one line up/down (held keys, play): listeners may debounce
            super().__init__()

    def __init__(self, trace, model, **kw):
        super().__init__(**kw)
        self.trace, self.model = trace, model
        self._n = len(trace.events)
        self.virtual_size = Size(120, self._n)
        self._lines: dict[int, Text] = {}  # event index -> its line (cursor style added later)
        self._strips: dict[tuple, Strip] = {}  # (index, width, style) -> rendered line

    def set_data(self, trace, model) -> None:
        self.trace, self.model, self._n = trace, model, len(trace.events)
        self.virtual_size = Size(120, self._n)
        self.cursor = min(self.cursor, max(self._n - 1, 0))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        i = round(self.scroll_offset.y) + y
        width = self.size.width
        if i >= self._n:
            return Strip.blank(width, self.rich_style)
        style = self.rich_style
        if i == self.cursor:
            style = style + Style(reverse=True) if self.has_focus else style + Style(bgcolor="grey30")
        key = (i, width, style)
        strip = self._strips.get(key)
        if strip is None:
            if len(self._strips) > 2000:  # bounded: what is on screen plus some scrolling
                self._strips.clear()
            line = self._lines.get(i)
            if line is None:
                if len(self._lines) > 5000:
                    self._lines.clear()
                line = self._lines[i] = self._make_line(i)
            line = line.copy()
            line.truncate(width, overflow="ellipsis", pad=True)
            segments = [Segment(s.text, (style + s.style) if s.style else style)
                        for s in line.render(self.app.console)]
            strip = self._strips[key] = Strip(segments, width).crop(0, width)
        return strip

    def _make_line(self, i: int) -> Text:
        ev = self.trace.events[i]
        cid = str(ev.compile_id) if ev.compile_id is not None else "-"
        clock = ev.time.split(" ")[-1][:12] if ev.time else ""
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{i:>6} ", "bright_black")
        line.append(f"{clock:<12} ", "bright_black")
        line.append(f"{cid:<7} ", "bold")
        line.append(f"{ev.key:<28} ", KIND_STYLE.get(ev.key, ""))
        line.append(event_summary(ev))
        return line

    # -- cursor ----------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        top = round(self.scroll_offset.y)
        self._scroll_cursor_into_view()
        if round(self.scroll_offset.y) == top:  # no scroll: repaint just the two lines
            for i in (old, new):
                if top <= i < top + self.size.height:
                    self.refresh_line(i)  # ScrollView's refresh_line takes the virtual line
        self.post_message(self.Moved(new, abs(new - old) == 1))

    def _scroll_cursor_into_view(self) -> None:
        top, h = round(self.scroll_offset.y), max(self.size.height, 1)
        if self.cursor == top - 1 or self.cursor == top + h:  # one step: scroll one line
            self.scroll_to(y=top + (1 if self.cursor >= top + h else -1), animate=False)
        elif not top <= self.cursor < top + h:  # a jump: show the target with context above
            self.scroll_to(y=max(self.cursor - h // 3, 0), animate=False)

    def action_move(self, delta: int) -> None:
        if self._n:
            self.cursor = max(0, min(self._n - 1, self.cursor + delta))

    def action_jump(self, index: int) -> None:
        if self._n:
            self.cursor = index % self._n

    def on_click(self, event) -> None:
        i = round(self.scroll_offset.y) + event.y
        if 0 <= i < self._n:
            self.cursor = i

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
