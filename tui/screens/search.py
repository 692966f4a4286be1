"""Search dialog (/ or ctrl+f): a regular expression over every record of the trace."""

from __future__ import annotations

import re

from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, Label


class SearchScreen(ModalScreen[tuple[str, bool] | None]):
    """Returns (pattern, ignore_case), or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    SearchScreen { align: center middle; }
    SearchScreen > Vertical { width: 70; height: auto; border: thick $primary; background: $surface;
                              padding: 1 2; }
    SearchScreen #search-error { color: $error; height: auto; }
    SearchScreen #search-hint { width: 100%; }
    """

    def __init__(self, last: str = "", **kw):
        super().__init__(**kw)
        self.last = last

    def compose(self):
        with Vertical():
            yield Label("Search the trace (regular expression; enter: go, n/N: next/prev match)",
                        id="search-hint")  # wraps: wider than the dialog
            yield Input(value=self.last, placeholder="e.g. graph_break|mismatch", id="search-input")
            yield Checkbox("ignore case", value=True, id="search-case")
            yield Label("", id="search-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        pattern = event.value
        if not pattern:
            self.dismiss(None)
            return
        try:
            re.compile(pattern)
        except re.error as e:
            self.query_one("#search-error", Label).update(f"not a valid regular expression: {e}")
            return
        self.dismiss((pattern, self.query_one("#search-case", Checkbox).value))

    def action_cancel(self) -> None:
        self.dismiss(None)
