"""FX graph tab: the captured graph and the aot graphs, syntax highlighted."""

from rich.text import Text

from tracetorch.tui.panes.base import Pane, code, heading, missing


class GraphsPane(Pane):
    FOLLOWS_EVENT = True  # re-rendered on every replay step
    TITLE = "FX graph"

    def show(self, model, c, event=None) -> None:
        if c is None or not c.graphs:
            self.set_body(missing("FX graph for this compile"))
            return
        items = []
        for title, text, ev in c.graphs:
            mark = "▶ " if event == ev else ""
            items += [heading(f"{mark}{title}"), code(text or "(empty payload)"), Text("")]
        self.set_body(*items)
