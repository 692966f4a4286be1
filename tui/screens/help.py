"""F1 help: every key binding of the app and of the screen underneath, plus mouse hints."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

NAVIGATION = [
    ("j / k, ↓ / ↑", "move in the tree, lists and the timeline"),
    ("g / G, home / end", "first / last"),
    ("1 … 9, 0, [ / ]", "compile-detail tabs (Summary … Metrics, 0: Event), previous / next tab"),
    ("enter", "source line → its kernels; kernel → its source line"),
    ("tab / shift+tab", "move focus between the tree and the tab's content"),
    ("mouse", "click tabs, tree nodes, lines and timeline rows; wheel scrolls"),
]


def help_table(title: str) -> Table:
    """Keys in a fixed-width column, descriptions in the rest (ratio=1: an expanded table gives
    its spare width to that column, not to the keys, so every table lines up)."""
    t = Table(title=title, title_justify="left", box=None, expand=True, show_header=False)
    t.add_column(style="bold cyan", width=22)
    t.add_column(ratio=1)
    return t


def bindings_table(app, title: str, bindings) -> Table:
    t = help_table(title)
    for b in bindings:
        if isinstance(b, Binding) and b.description:
            # ", " between alternatives: " / " read wrong next to the "/" key ("/ / ^f")
            keys = [app.get_key_display(Binding(k.strip(), "")) for k in b.key.split(",")]
            t.add_row(", ".join(keys), b.description)
    return t


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,f1,question_mark,q", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90; height: 90%; border: thick $primary;
                                  background: $surface; padding: 0 2; }
    """

    def __init__(self, screen_bindings, app_bindings, **kw):
        super().__init__(**kw)
        self.screen_bindings, self.app_bindings = screen_bindings, app_bindings

    def compose(self):
        nav = help_table("Navigation")
        for k, d in NAVIGATION:
            nav.add_row(k, d)
        with VerticalScroll():
            yield Static(Text("tracetui help  (escape to close)", style="bold"))
            yield Static(bindings_table(self.app, "Everywhere", self.app_bindings))
            yield Static(bindings_table(self.app, "This screen", self.screen_bindings))
            yield Static(nav)
            yield Static(Text("ctrl+p opens the command palette: every view and action by name.",
                              style="italic"))
