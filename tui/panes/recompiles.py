"""Recompiles tab: why did it recompile? For each cache entry tried before this compile, the
guard that failed, expected vs actual, and the user line that introduced that guard."""

from rich.table import Table
from rich.text import Text

from tracetorch.tui.panes.base import Pane, heading, missing


def introduced_at(model, c, gf) -> str:
    """The user line behind a failed guard: recorded with the failure, else found among the
    failed cache entry's own guards (the guard line that mentions the same source)."""
    if gf.user_location:
        return gf.user_location
    try:
        f, _, rest = gf.entry.partition("/")
        entry = model.compiles.get((int(f), int(rest.split("_")[0])))
    except ValueError:
        entry = None
    if entry is None or not gf.source:
        return ""
    name = gf.source
    for text, loc in entry.guards:
        if loc and name in text and ("TENSOR_MATCH" in text or "size" in text or "check_tensor" in text):
            return loc
    return next((loc for text, loc in entry.guards if loc and name in text), "")


def short_location(loc: str) -> str:
    """'prog.py:5' for '/long/path/prog.py:5' (PyTorch also cuts paths from the left)."""
    path, _, line = loc.rpartition(":")
    return f"{path.rsplit('/', 1)[-1]}:{line}" if line.isdigit() else loc


class RecompilesPane(Pane):
    FOLLOWS_EVENT = True  # re-rendered on every replay step
    TITLE = "Recompiles"

    def show(self, model, c, event=None) -> None:
        if c is None:
            self.set_body(missing("Recompile reasons"))
            return
        if not c.recompile_reasons:
            why = ("first compile of this frame" if c.frame_compile_id == 0
                   else "no recompile reasons recorded")
            self.set_body(missing(f"Recompile reasons for {c.id} ({why})"))
            return
        t = Table(expand=True, show_lines=True)
        t.add_column("entry", style="bold", no_wrap=True)
        t.add_column("failed guard", ratio=1, min_width=30, overflow="fold")
        t.add_column("expected", style="green", max_width=20, overflow="fold")
        t.add_column("actual", style="red", max_width=20, overflow="fold")
        t.add_column("introduced at", style="cyan", no_wrap=True)
        for gf in c.recompile_reasons:
            mark = "▶ " if event is not None and gf.event == event else ""
            what = Text(gf.text)
            if gf.guard and gf.guard != gf.text:
                what.append(f"\n{gf.guard}", "bright_black")
            t.add_row(Text(mark + (gf.entry or "?")), what, Text(gf.expected or "-"),
                      Text(gf.actual or "-"), Text(short_location(introduced_at(model, c, gf)) or "-"))
        frame_entries = [o.id for o in model.compiles.values()
                         if o.frame_id == c.frame_id and o.frame_compile_id < c.frame_compile_id]
        self.set_body(
            heading(f"Why {c.id} was compiled: guards of earlier cache entries failed"),
            Text(f"cache entries of frame {c.frame_id} before it: {', '.join(frame_entries) or '-'}",
                 style="italic"),
            t)
