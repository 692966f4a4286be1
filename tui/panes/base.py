"""Shared base for the compile-detail panes: a scrollable body that shows rich renderables,
and the short "not in this trace" note used when an artifact is missing."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static


class KeyList(OptionList):
    """An OptionList with the vi keys the help lists (j/k, g/G)."""

    BINDINGS = [Binding("j", "cursor_down", "Down", show=False),
                Binding("k", "cursor_up", "Up", show=False),
                Binding("g", "first", "First", show=False),
                Binding("G", "last", "Last", show=False)]

MAX_LINES = 2000  # long payloads are cut (with a note) so that one pane never stalls the UI


def missing(what: str) -> Text:
    return Text(f"{what}: not in this trace.", style="italic bright_black")


def heading(text: str) -> Text:
    return Text(text, style="bold underline")


def code(text: str, language: str = "python", start: int = 1,
         highlight: set[int] | None = None) -> RenderableType:
    lines = text.splitlines()
    note = None
    if len(lines) > MAX_LINES:
        note = Text(f"... {len(lines) - MAX_LINES} more lines not shown", style="italic")
        text = "\n".join(lines[:MAX_LINES])
    # wrapped: the panes scroll vertically only, so a long line would be cut at the edge
    syn = Syntax(text, language, line_numbers=True, start_line=start, word_wrap=True,
                 highlight_lines=highlight or set(), theme="monokai")
    return Group(syn, note) if note else syn


class Pane(VerticalScroll):
    BINDINGS = [Binding("j", "scroll_down", "Down", show=False),
                Binding("k", "scroll_up", "Up", show=False),
                Binding("g", "scroll_home", "Top", show=False),
                Binding("G", "scroll_end", "Bottom", show=False)]
    """A tab body. `show(model, compile, event)` fills it; `event` is the replay cursor's event
    index when the pane follows the timeline."""

    TITLE = ""
    DEFAULT_CSS = "Pane { padding: 0 1; }"

    def compose(self):
        yield Static(id="body")

    def set_body(self, *items: RenderableType) -> None:
        self.query_one("#body", Static).update(Group(*items))

    def show(self, model, c, event: int | None = None) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
