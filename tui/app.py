"""TraceApp: opens a trace, builds the model (in a thread for big traces) and switches between
the overview, the replay, search, help, the problem list and the minifier."""

from __future__ import annotations

import gc
import os
from pathlib import Path

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding

from tracetorch.tui.model import TraceModel
from tracetorch.tui.screens.main import MainScreen
from tracetorch.tui.tabs import TAB_TITLES
from tracetorch.tui.widgets.totals import Totals

# The other screens (and the detail panes) are imported when first opened: the overview's
# first paint does not wait for modules it does not show.

# Traces up to this size are read before the first paint (a few milliseconds; tests and
# snapshots see the finished overview at once); bigger ones in a worker thread after it.
SYNC_BYTES = 512 * 1024
PROGRESS_INTERVAL_S = 0.1


def write_crash_log(error: BaseException) -> Path | None:
    """The traceback of an internal error, in a file the one-line message can point at."""
    import tempfile
    import traceback
    try:
        fd, name = tempfile.mkstemp(prefix="tracetui_crash_", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(traceback.format_exception(error)))
        return Path(name)
    except OSError:
        return None


class TraceApp(App):
    TITLE = "tracetui"
    BINDINGS = [
        Binding("f1,question_mark", "help", "Help"),
        Binding("slash,ctrl+f", "search", "Search"),
        Binding("exclamation_mark", "problems", "Problems", show=False),
        Binding("m", "minify", "Minify", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, trace, debug_dir: Path | None = None, shown: str = "",
                 note: str | None = None, quiet_crash: bool = False, **kw):
        super().__init__(**kw)
        # The console script's mode: an internal error ends the app with one line on stderr and
        # the traceback in a file (crash_log), not a screenful of traceback.
        self.quiet_crash = quiet_crash
        self.crash: BaseException | None = None
        self.crash_log: Path | None = None
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            # No sliding tab underline: it repaints the screen ~18 times per tab switch (0.3 s
            # at 60 fps), which made every tab switch and replay step cost ~0.5 s of CPU.
            self.animation_level = "none"
        self.trace, self.debug_dir, self.note = trace, debug_dir, note
        self.sub_title = shown or str(trace.path)
        self.model: TraceModel | None = None
        self.search_pattern, self.search_hits = "", []
        # (stage, records done, records in all), written by the loading thread, shown by a timer
        self.load_progress: tuple[str, int, int] = ("indexing", 0, 0)
        self._progress_timer = None

    def _handle_exception(self, error: Exception) -> None:
        """Textual's hook for an unhandled exception (the app then exits with code 1)."""
        self.crash = error
        super()._handle_exception(error)
        if self.quiet_crash:
            self.crash_log = write_crash_log(error)
            self._exit_renderables.clear()   # printed by run() after we return: say it in one line

    def on_mount(self) -> None:
        if self.trace.size <= SYNC_BYTES:
            self.model = TraceModel(self.trace, self.debug_dir)
        self.push_screen(MainScreen())  # its on_mount starts load_model() for big traces
        if self.note:
            self.notify(self.note, severity="warning", timeout=15)

    def start_loading(self) -> None:
        """Big traces (called after the first paint): index, validate and build the model in a
        thread. The thread never waits for the UI: it posts its progress in an attribute that
        a timer shows, and hands over the model once."""
        self._show_progress()
        self._progress_timer = self.set_interval(PROGRESS_INTERVAL_S, self._show_progress)
        self.load_model()

    @work(thread=True, exclusive=True, group="load")
    def load_model(self) -> None:
        def progress(done: int, total: int) -> None:
            self.load_progress = ("reading", done, total)

        # A 100,000-record trace is millions of long-lived objects. The collector would walk
        # them all, again and again, while they are made and then on every later full
        # collection (0.1-0.5 s pauses in key handling): off while loading, then frozen.
        gc.disable()
        try:
            self.trace.scan(progress=progress)
            n = len(self.trace.events)
            self.load_progress = ("building the overview of", n, n)
            model = TraceModel(self.trace, self.debug_dir)
        finally:
            gc.freeze()
            gc.enable()
        self.call_from_thread(self._model_ready, model)

    def _show_progress(self) -> None:
        if self.model is not None:
            return
        stage, done, total = self.load_progress
        for totals in self.main_screen().query(Totals):
            totals.show_progress(stage, done, total, str(self.trace.path), self.trace.size)

    def _model_ready(self, model: TraceModel) -> None:
        if self._progress_timer is not None:
            self._progress_timer.stop()
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
        from tracetorch.tui.screens.replay import ReplayScreen

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
        from tracetorch.tui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
            return
        self.push_screen(HelpScreen(self.screen.BINDINGS, self.BINDINGS))

    def action_problems(self) -> None:
        from tracetorch.tui.screens.problems import ProblemsScreen

        if self._need_model():
            self.push_screen(ProblemsScreen(self.trace))

    # -- search ----------------------------------------------------------------------------
    def action_search(self) -> None:
        from tracetorch.tui.screens.search import SearchScreen

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
        from tracetorch.tui.screens.replay import ReplayScreen

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
        from tracetorch.tui.screens.minify import MinifyScreen

        if not self._need_model():
            return
        script = self.model.repro_script()
        if script is None:
            self.notify("No repro script here: minifying needs a debug folder with "
                        "repro/repro.py (written when a compile fails under TRACE_COMPILE_DEBUG=1).",
                        severity="warning", timeout=8)
            return
        from tracetorch.tui.screens.minify import ConfirmMinifyScreen

        def answered(run: bool | None) -> None:
            if run:
                self.push_screen(MinifyScreen(script))
            else:
                self.notify("Minifier not run.")

        # a repro script is code from the opened folder: never run it without asking
        self.push_screen(ConfirmMinifyScreen(script, self.debug_dir), answered)

    # -- command palette ---------------------------------------------------------------------
    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand("Overview", "Frames and compile ids, worst first", self.action_overview)
        yield SystemCommand("Replay timeline", "Step through every event in order",
                            self.action_replay)
        for tab_id, title in TAB_TITLES:
            if tab_id != "event":
                yield SystemCommand(f"Show {title}", f"The {title} tab of the selected compile",
                                    lambda t=tab_id: self.action_show_tab(t))
        yield SystemCommand("Search", "Regular expression over all records", self.action_search)
        yield SystemCommand("Next graph break", "Replay: jump to the next graph break",
                            lambda: self._jump("break"))
        yield SystemCommand("Next recompile", "Replay: jump to the next recompile",
                            lambda: self._jump("recompile"))
        yield SystemCommand("Next failure", "Replay: jump to the next failed compile",
                            lambda: self._jump("failure"))
        yield SystemCommand("Skipped records", "What the reader could not read", self.action_problems)
        yield SystemCommand("Minify failed compile",
                            "Run repro.py --minify in a subprocess (shows the command, asks first)",
                            self.action_minify)
        yield SystemCommand("Help", "Key bindings", self.action_help)

    def _jump(self, kind: str) -> None:
        from tracetorch.tui.screens.replay import ReplayScreen

        if not self._need_model():
            return
        cur = self.screen.cursor if isinstance(self.screen, ReplayScreen) else -1
        target = self.model.next_mark(kind, cur, 1)
        if target is None:
            self.notify(f"No {kind} in this trace after this point.")
        else:
            self.action_replay(target)
