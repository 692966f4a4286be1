"""TraceApp: opens a trace, builds the model (in a thread for big traces) and switches between
the overview, the replay, search, help, the problem list and the minifier."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding

from tui.model import TraceModel
from tui.screens.help import HelpScreen
from tui.screens.main import MainScreen
from tui.screens.minify import MinifyScreen
from tui.screens.problems import ProblemsScreen
from tui.screens.replay import ReplayScreen
from tui.screens.search import SearchScreen
from tui.widgets.compile_detail import TABS
from tui.widgets.totals import Totals

SYNC_LIMIT = 2000  # traces with fewer records are read before the first paint


class TraceApp(App):
    TITLE = "tracetui"
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("slash,ctrl+f", "search", "Search"),
        Binding("exclamation_mark", "problems", "Problems", show=False),
        Binding("m", "minify", "Minify", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, trace, debug_dir: Path | None = None, shown: str = "",
                 note: str | None = None, **kw):
        super().__init__(**kw)
        self.trace, self.debug_dir, self.note = trace, debug_dir, note
        self.sub_title = shown or str(trace.path)
        self.model: TraceModel | None = None
        self.search_pattern, self.search_hits = "", []

    def on_mount(self) -> None:
        if len(self.trace.raw_events) <= SYNC_LIMIT:
            self.model = TraceModel(self.trace, self.debug_dir)
        self.push_screen(MainScreen())  # its on_mount starts load_model() for big traces
        if self.note:
            self.notify(self.note, severity="warning", timeout=15)

    @work(thread=True, exclusive=True, group="load")
    def load_model(self) -> None:
        """Big traces: validate and build the model off the UI thread, reporting progress."""
        self.trace.scan(progress=lambda d, n: self.call_from_thread(self._progress, d, n))
        model = TraceModel(self.trace, self.debug_dir)
        self.call_from_thread(self._model_ready, model)

    def _progress(self, done: int, total: int) -> None:
        for totals in self.main_screen().query(Totals):
            totals.show_progress(done, total, str(self.trace.path))

    def _model_ready(self, model: TraceModel) -> None:
        self.model = model
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.set_model(model)

    def _need_model(self) -> bool:
        if self.model is None:
            self.notify("Still reading the trace; try again in a moment.")
            return False
        return True

    # -- views ---------------------------------------------------------------------------
    def main_screen(self) -> MainScreen:
        return next(s for s in self.screen_stack if isinstance(s, MainScreen))

    def action_overview(self) -> None:
        while not isinstance(self.screen, MainScreen):
            self.pop_screen()

    def action_replay(self, index: int | None = None) -> None:
        if not self._need_model():
            return
        if not isinstance(self.screen, ReplayScreen):
            self.action_overview()
            self.push_screen(ReplayScreen())
        if index is not None:
            self.call_after_refresh(self.screen.goto, index)

    def action_show_tab(self, tab_id: str) -> None:
        self.action_overview()
        self.main_screen().action_tab(tab_id)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
            return
        self.push_screen(HelpScreen(self.screen.BINDINGS, self.BINDINGS))

    def action_problems(self) -> None:
        if self._need_model():
            self.push_screen(ProblemsScreen(self.trace))

    # -- search ----------------------------------------------------------------------------
    def action_search(self) -> None:
        if self._need_model():
            self.push_screen(SearchScreen(self.search_pattern), self._search_done)

    def _search_done(self, result) -> None:
        if result is None:
            return
        pattern, ignore_case = result
        self.search_pattern = pattern
        self.search_hits = self.trace.search(pattern, ignore_case)
        if not self.search_hits:
            self.notify(f"No event matches /{pattern}/.", severity="warning")
            return
        self.notify(f"{len(self.search_hits)} events match /{pattern}/ (n / N: next / previous).")
        self.action_replay(self.search_hits[0])

    def action_search_next(self, step: int) -> None:
        if not self.search_hits:
            self.notify("No search yet: press / to search.")
            return
        cur = self.screen.cursor if isinstance(self.screen, ReplayScreen) else -1
        nxt = [h for h in self.search_hits if (h > cur if step > 0 else h < cur)]
        target = (nxt[0] if step > 0 else nxt[-1]) if nxt else (
            self.search_hits[0] if step > 0 else self.search_hits[-1])
        self.action_replay(target)

    # -- minifier ----------------------------------------------------------------------------
    def action_minify(self) -> None:
        if not self._need_model():
            return
        script = self.model.repro_script()
        if script is None:
            self.notify("No repro script here: minifying needs a debug folder with "
                        "repro/repro.py (written when a compile fails under TRACE_COMPILE_DEBUG=1).",
                        severity="warning", timeout=8)
            return
        self.push_screen(MinifyScreen(script))

    # -- command palette ---------------------------------------------------------------------
    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand("Overview", "Frames and compile ids, worst first", self.action_overview)
        yield SystemCommand("Replay timeline", "Step through every event in order",
                            self.action_replay)
        for tab_id, cls in TABS:
            if tab_id != "event":
                yield SystemCommand(f"Show {cls.TITLE}", f"The {cls.TITLE} tab of the selected compile",
                                    lambda t=tab_id: self.action_show_tab(t))
        yield SystemCommand("Search", "Regular expression over all records", self.action_search)
        yield SystemCommand("Next graph break", "Replay: jump to the next graph break",
                            lambda: self._jump("break"))
        yield SystemCommand("Next recompile", "Replay: jump to the next recompile",
                            lambda: self._jump("recompile"))
        yield SystemCommand("Next failure", "Replay: jump to the next failed compile",
                            lambda: self._jump("failure"))
        yield SystemCommand("Skipped records", "What the reader could not read", self.action_problems)
        yield SystemCommand("Minify failed compile", "Run repro.py --minify in a subprocess",
                            self.action_minify)
        yield SystemCommand("Help", "Key bindings", self.action_help)

    def _jump(self, kind: str) -> None:
        if not self._need_model():
            return
        cur = self.screen.cursor if isinstance(self.screen, ReplayScreen) else -1
        target = self.model.next_mark(kind, cur, 1)
        if target is None:
            self.notify(f"No {kind} in this trace after this point.")
        else:
            self.action_replay(target)
