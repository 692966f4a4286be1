"""Recompiles tab: why did it recompile? For each cache entry tried before this compile, the
guard that failed, expected vs actual, and the user line that introduced that guard."""

from rich.table import Table
from rich.text import Text

from tracetorch.tui import extract as X
from tracetorch.tui.panes.base import Pane, heading, missing


from tracetorch.tui.model import introduced_at  # noqa: E402  (kept importable from here)


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
        rows = c.reasons or X.distinct_reasons(c.recompile_reasons)
        new = [r for r in rows if not r.seen_before]
        t = Table(expand=True, show_lines=True)
        t.add_column("failed guard", ratio=3, min_width=28, overflow="fold")
        t.add_column("changed", style="bold", ratio=1, min_width=12, overflow="fold")
        t.add_column("guard created at (your code)", style="cyan", ratio=2, overflow="fold")
        t.add_column("entries", no_wrap=True)
        for r in rows:
            gf = r.first
            mark = "▶ " if event is not None and any(
                o.event == event for o in c.recompile_reasons if X.reason_key(o) == X.reason_key(gf)) else ""
            dim = "bright_black" if r.seen_before else ""
            what = Text(mark + X.one_line(gf.what or gf.guard or gf.text), style=dim or "yellow")
            if gf.guard and gf.guard not in (gf.what or ""):
                what.append(f"\n{X.one_line(gf.guard, 200)}", "bright_black")
            if r.seen_before:
                what.append(f"\n(already why {r.seen_before} recompiled)", "italic bright_black")
            loc = introduced_at(model, c, gf)
            where = Text(short_location(loc) or "-", style=dim or "cyan")
            if gf.user_code:
                where.append(f"\n{X.one_line(gf.user_code, 120)}", dim or "white")
            t.add_row(what, Text(gf.change or "-", style=dim or "bold green"), where,
                      Text(", ".join(r.entries) or "-", style=dim))
        frame_entries = [o.id for o in model.compiles.values()
                         if o.frame_id == c.frame_id and o.frame_compile_id < c.frame_compile_id]
        self.set_body(
            heading(f"Why {c.id} was compiled: {len(new)} new reason{'s' if len(new) != 1 else ''}"
                    f" (guards of earlier cache entries that failed)"),
            Text(f"cache entries of frame {c.frame_id} checked: {', '.join(frame_entries) or '-'}",
                 style="italic"),
            t)
