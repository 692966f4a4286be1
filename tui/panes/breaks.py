"""Graph breaks tab: reason, instruction, where in the user's code, user stack."""

from rich.text import Text

from tracetorch.tui.panes.base import Pane, heading, missing


class BreaksPane(Pane):
    FOLLOWS_EVENT = True  # re-rendered on every replay step
    TITLE = "Breaks"

    def show(self, model, c, event=None) -> None:
        if c is None or not (c.breaks or c.restart_reasons):
            self.set_body(missing("Graph breaks for this compile"))
            return
        items = []
        if c.skipped:
            items += [Text("Capture gave up on this frame: the whole function runs eagerly "
                           "(nothing of it is compiled; functions it calls compile on their own).",
                           style="bold yellow"), Text("")]
        for n, b in enumerate(c.breaks, 1):
            current = event is not None and b.event == event
            items.append(heading(f"{'▶ ' if current else ''}Graph break {n}"
                                 + (f"  [{b.reason_id}]" if b.reason_id else "")))
            items.append(Text.assemble(("reason      ", "bold"), (b.reason, "yellow")))
            if b.explanation:
                items.append(Text.assemble(("why         ", "bold"), b.explanation))
            for h in b.hints[:4]:
                items.append(Text.assemble(("hint        ", "bold"), (h, "green")))
            if b.link:
                items.append(Text.assemble(("more        ", "bold"), b.link))
            if b.instruction:
                items.append(Text.assemble(("instruction ", "bold"), b.instruction))
            if b.filename:
                items.append(Text.assemble(("at          ", "bold"),
                                           f"{b.filename}:{b.lineno}"))
            if b.source_line:
                items.append(Text.assemble(("code        ", "bold"), (b.source_line, "cyan")))
            if b.user_stack:
                items.append(Text("user stack (outermost first):", style="bold"))
                for fr in b.user_stack:
                    items.append(Text(f"  {fr.get('filename', '?')}:{fr.get('line', '?')} in "
                                      f"{fr.get('name', '?')}"))
                    if fr.get("loc"):
                        items.append(Text(f"      {fr['loc']}", style="cyan"))
            items.append(Text(""))
        if c.restart_reasons and not c.breaks:
            items.append(heading("Restart reasons (compilation_metrics)"))
            items += [Text(r, style="yellow") for r in c.restart_reasons]
        self.set_body(*items)
