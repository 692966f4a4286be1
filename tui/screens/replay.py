"""Replay screen: the timeline of every event; step, play/pause, jump to the next break,
recompile or failure; the detail tabs follow the cursor."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tracetorch.tui.tabs import TAB_TITLES
from tracetorch.tui.widgets.compile_detail import CompileDetail
from tracetorch.tui.widgets.event_list import EventList

PLAY_INTERVAL = 0.25  # seconds per step while playing


class ReplayScreen(Screen):
    BINDINGS = [
        Binding("space", "play", "Play/pause"),
        Binding("b", "jump('break', 1)", "Next break"),
        Binding("B", "jump('break', -1)", "Prev break", show=False),
        Binding("c", "jump('recompile', 1)", "Next recompile"),
        Binding("C", "jump('recompile', -1)", "Prev recompile", show=False),
        Binding("x", "jump('failure', 1)", "Next failure"),
        Binding("X", "jump('failure', -1)", "Prev failure", show=False),
        Binding("right,l", "step(1)", "Step", show=False),
        Binding("left,h", "step(-1)", "Back", show=False),
        Binding("n", "app.search_next(1)", "Next match", show=False),
        Binding("N", "app.search_next(-1)", "Prev match", show=False),
        Binding("escape,o", "app.overview", "Overview"),
        # the detail tabs by number, as on the overview (the detail follows the cursor)
        *[Binding(str(n % 10), f"tab('{tab_id}')", title, show=False)
          for n, (tab_id, title) in enumerate(TAB_TITLES[:10], 1)],
    ]
    DEFAULT_CSS = """
    ReplayScreen EventList { width: 42%; border-right: solid $primary; }
    ReplayScreen #replay-status { height: 1; background: $panel; padding: 0 1; }
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        self._timer = None

    def compose(self):
        yield Header()
        with Horizontal():
            yield EventList(self.app.trace, self.app.model, id="timeline")
            yield CompileDetail(id="replay-detail")
        yield Static(id="replay-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(EventList).focus()
        self.query_one(EventList).cursor = 0

    @property
    def cursor(self) -> int:
        return self.query_one(EventList).cursor

    def goto(self, index: int) -> None:
        self.query_one(EventList).cursor = index

    def on_event_list_moved(self, message: EventList.Moved) -> None:
        model = self.app.model
        n = len(model.trace.events)
        if not n:
            self.query_one("#replay-status", Static).update("This trace has no events.")
            return
        detail, index = self.query_one(CompileDetail), message.index
        detail.follow(model, index, later=message.step)  # held keys: render where they stop
        ev = model.trace.events[message.index]
        status = Text()
        status.append("▶ playing " if self._timer else "", "bold green")
        status.append(f"event {message.index + 1}/{n}  ", "bold")
        status.append(f"{ev.key}  compile {ev.compile_id if ev.compile_id is not None else '-'}  "
                      f"{model.trace.where(ev)}")
        self.query_one("#replay-status", Static).update(status, layout=False)  # fixed height

    def action_tab(self, tab_id: str) -> None:
        self.query_one(CompileDetail).switch(tab_id)
        self.query_one(EventList).focus()   # the timeline keeps the keys (b, c, x, j/k)

    def action_step(self, delta: int) -> None:
        self.query_one(EventList).action_move(delta)

    def action_play(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        else:
            self._timer = self.set_interval(PLAY_INTERVAL, self._tick)
        self.goto(self.cursor)  # refresh the status line

    def _tick(self) -> None:
        lst = self.query_one(EventList)
        if lst.cursor >= len(self.app.model.trace.events) - 1:
            self.action_play()  # stop at the end
        else:
            lst.action_move(1)

    def action_jump(self, kind: str, step: int) -> None:
        target = self.app.model.next_mark(kind, self.cursor, step)
        if target is None:
            where = "after" if step > 0 else "before"
            self.app.notify(f"No {kind} {where} event {self.cursor + 1}.")
        else:
            self.goto(target)
