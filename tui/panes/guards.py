"""Guards tab: every guard installed for the compile, with the user line that introduced it."""

from rich.table import Table
from rich.text import Text

from tracetorch.tui.panes.base import Pane, heading, missing


class GuardsPane(Pane):
    TITLE = "Guards"

    def show(self, model, c, event=None) -> None:
        if c is None or not c.guards:
            self.set_body(missing("Guards for this compile"))
            return
        t = Table(box=None, expand=True, show_edge=False, pad_edge=False)
        t.add_column("guard", ratio=4, overflow="fold")
        t.add_column("introduced at", ratio=1, style="cyan", overflow="fold")
        for text, loc in c.guards[:2000]:
            t.add_row(Text(text), loc.rsplit("/", 1)[-1])
        self.set_body(heading(f"{len(c.guards)} guard lines for {c.id}"), t)
