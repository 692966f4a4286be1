"""Summary tab: what happened to this compile, in a few lines."""

from rich.table import Table
from rich.text import Text

from tracetorch.tui import extract as X
from tracetorch.tui.model import OUTCOME_STYLE
from tracetorch.tui.panes.base import Pane, heading
from tracetorch.tui.paths import display_path


class SummaryPane(Pane):
    TITLE = "Summary"

    def show(self, model, c, event=None) -> None:
        if c is None:
            self.set_body(Text("Select a compile id in the tree (or press r for the replay).",
                               style="italic"))
            return
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold")
        t.add_column()
        flags = Text()
        for f in c.flags:
            flags.append(f" {f} ", OUTCOME_STYLE[f] + " reverse")
            flags.append(" ")
        t.add_row("compile id", c.id + (f"  (attempts {', '.join(map(str, sorted(c.attempts)))})"
                                         if len(c.attempts) > 1 else ""))
        t.add_row("outcome", flags)
        t.add_row("function", Text(f"{c.display_name or '?'}  {c.location}"))
        t.add_row("graph breaks", str(len(c.breaks) or len(c.restart_reasons)))
        t.add_row("recompile reasons", str(len(c.recompile_reasons)))
        t.add_row("guards", str(len(c.guards)))
        t.add_row("graphs", str(len(c.graphs)))
        t.add_row("kernels", str(c.kernel_count))
        t.add_row("compile time", f"{c.compile_time:.3f} s" if c.compile_time else "-")
        t.add_row("events", str(len(c.events)))
        items = [heading(f"Compile {c.id}"), t]
        if c.skipped:
            items += [Text(""), heading("Frame skipped"),
                      Text("Capture gave up on this function: it runs eagerly. "
                           + (c.skip_reason + ". " if c.skip_reason else "")
                           + "See Breaks (3) for where and why.", style="bold yellow")]
        if c.failure:
            items += [Text(""), heading("Crashed" if c.crashed else "Failure"),
                      Text(c.failure, style="red")]
            if model.repro_script() is not None:
                # as the user would type it from here (the same on every machine, see paths.py)
                items.append(Text(f"Repro script: {display_path(model.repro_script())} -- m (or ctrl+p "
                                  "'Minify') shows the command and asks before running it",
                                  style="bold"))
        if c.breaks:
            items += [Text(""), heading("Graph breaks")]
            items += [Text(f"- {b.reason.splitlines()[0] if b.reason else '?'}"
                           f"  ({b.filename.rsplit('/', 1)[-1]}:{b.lineno})") for b in c.breaks]
        if c.reasons:
            items += [Text(""), heading("Why it recompiled")]
            for r in c.reasons:
                if r.seen_before:
                    continue
                gf = r.first
                line = Text(f"- {X.one_line(gf.what or gf.guard or gf.text, 160)}", style="yellow")
                if gf.change:
                    line.append(f"  changed: {gf.change}", "bold")
                if gf.user_location:
                    line.append(f"  (guard from {gf.user_location.rsplit('/', 1)[-1]}"
                                f"{': ' + gf.user_code if gf.user_code else ''})", "cyan")
                items.append(line)
            old = sum(1 for r in c.reasons if r.seen_before)
            if old:
                items.append(Text(f"  ({old} more failed guard{'s' if old > 1 else ''} of older "
                                  "cache entries, already listed for earlier compiles)",
                                  style="italic bright_black"))
        if c.perf_hints:
            items += [Text(""), heading("Performance hints")]
            items += [Text(f"- {h}", style="yellow") for h in c.perf_hints[:50]]
        self.set_body(*items)
