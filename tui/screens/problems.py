"""What the reader could not use: skipped records and damaged payloads, with line numbers."""

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class ProblemsScreen(ModalScreen):
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    ProblemsScreen { align: center middle; }
    ProblemsScreen > VerticalScroll { width: 90%; height: 80%; border: thick $error;
                                      background: $surface; padding: 0 1; }
    """

    def __init__(self, trace, **kw):
        super().__init__(**kw)
        self.trace = trace

    def compose(self):
        t = Table(expand=True)
        t.add_column("line", justify="right")
        t.add_column("what", overflow="fold")
        t.add_column("problem", overflow="fold")
        for line, why in self.trace.skipped:
            t.add_row(str(line), Text("skipped", style="red"), Text(why))
        for line, why in self.trace.damaged:
            t.add_row(str(line), Text("kept, damaged", style="yellow"), Text(why))
        with VerticalScroll():
            if not (self.trace.skipped or self.trace.damaged):
                yield Static(Text("Every record of this trace was read without problems.",
                                  style="green"))
            else:
                yield Static(Text(f"{len(self.trace.skipped)} records skipped, "
                                  f"{len(self.trace.damaged)} damaged (escape to close)",
                                  style="bold"))
                yield Static(t)
