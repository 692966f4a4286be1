"""Metrics tab: compile time per stage, and the other numbers the compile reported."""

from rich.bar import Bar
from rich.table import Table
from rich.text import Text

from tracetorch.tui.panes.base import Pane, heading, missing

SHOWN = ("graph_op_count", "graph_node_count", "graph_input_count", "guard_count",
         "cache_size", "fail_type", "fail_reason", "kernel_count")


class MetricsPane(Pane):
    TITLE = "Metrics"

    def show(self, model, c, event=None) -> None:
        if c is None or not (c.metrics or c.stages):
            self.set_body(missing("Compile metrics for this compile"))
            return
        items = [heading(f"Compile time per stage ({c.id})")]
        if c.stages:
            top = max(v for _, v in c.stages) or 1.0
            t = Table(box=None, expand=True)
            t.add_column("stage", style="bold")
            t.add_column("seconds", justify="right")
            t.add_column("", ratio=1)
            for label, v in c.stages:
                t.add_row(label, f"{v:.4f}", Bar(top, 0, v, color="cyan"))
            items.append(t)
        else:
            items.append(missing("Stage times"))
        rest = Table(box=None)
        rest.add_column(style="bold")
        rest.add_column()
        for k in SHOWN:
            if c.metrics.get(k) not in (None, "", []):
                rest.add_row(k, Text(str(c.metrics[k])))  # Text: no markup from a trace
        items += [Text(""), heading("Other metrics"), rest]
        self.set_body(*items)
