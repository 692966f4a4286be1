"""IR tab: the loop IR before and after fusion, the schedule and the fusion decisions."""

from rich.table import Table
from rich.text import Text

from tracetorch.tui import extract as X
from tracetorch.tui.panes.base import Pane, code, heading, missing

MAX_DECISIONS = 200


class IRPane(Pane):
    FOLLOWS_EVENT = False  # the replay moving within one compile does not change it
    TITLE = "IR"

    def show(self, model, c, event=None) -> None:
        if c is None or not (c.ir or c.fusion):
            self.set_body(missing("IR before/after fusion for this compile"))
            return
        items = []
        names = {"ir_pre_fusion": "IR before fusion", "ir_post_fusion": "IR after fusion",
                 "schedule": "schedule"}
        have = {k for k, _, _ in c.ir}
        for k in ("ir_pre_fusion", "ir_post_fusion"):
            if k not in have:
                items += [missing(names[k]), Text("")]
        for k, text, ev in c.ir:
            items += [heading(names.get(k, k)),
                      code(text, "text"), Text("")]
        if c.fusion:
            t = Table(expand=True)
            t.add_column("nodes", overflow="fold")
            t.add_column("fused")
            t.add_column("why", overflow="fold")
            events = model.trace.events
            for i in c.fusion[:MAX_DECISIONS]:
                d = X.as_dict(events[i].payload_json()) or events[i].metadata
                fused = d.get("fused")
                t.add_row(Text(", ".join(map(str, d.get("nodes") or [d.get("first"), d.get("second")]))),
                          Text("yes" if fused else "no", style="green" if fused else "red"),
                          Text(str(d.get("reason", ""))))
            more = len(c.fusion) - MAX_DECISIONS
            items += [heading(f"Fusion decisions ({len(c.fusion)})"), t]
            if more > 0:
                items.append(Text(f"... {more} more (see the replay timeline)", style="italic"))
        self.set_body(*items)
