"""Source tab: the user's function with the captured range, break points, guard lines and
kernel lines marked. Selecting a line lists what is tied to it; enter opens its kernels."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tracetorch.tui.panes.base import KeyList, missing


def same_file(a: str, b: str) -> bool:
    return bool(a) and bool(b) and Path(a).name == Path(b).name


def line_facts(model, c, filename: str) -> dict[int, dict[str, list]]:
    """line number -> {"breaks": [...], "guards": [...], "kernels": [...]} for this compile."""
    facts: dict[int, dict[str, list]] = {}

    def add(line, kind, item):
        facts.setdefault(line, {"breaks": [], "guards": [], "kernels": []})[kind].append(item)

    for b in c.breaks:
        if b.lineno and (not b.filename or same_file(b.filename, filename)):
            add(b.lineno, "breaks", b)
    for text, loc in c.guards:
        fn, _, ln = loc.rpartition(":")
        if ln.isdigit() and same_file(fn, filename):
            add(int(ln), "guards", text)
    for k in c.kernels:
        for fn, ln in k.user_lines:
            if same_file(fn, filename):
                add(ln, "kernels", k)
    return facts


def captured_range(c, first: int, n_lines: int, break_lines: list[int]) -> tuple[int, int]:
    """[start, stop) of the lines the compile's graph captured: nothing when capture gave up on
    the frame; a resume function from the line it resumes at; up to the first break, or to
    where the rest runs eagerly."""
    end = first + n_lines
    if c.skipped:
        return first, first
    start = c.resume_line if c.resume_line and first <= c.resume_line < end else first
    stops = [ln for ln in break_lines if ln >= start]
    stops += [b.eager_from for b in c.breaks if b.eager_from]
    # a resume function resumes after its break line: that line's break is its parent's
    stops = [ln for ln in stops if ln > start or not c.resume_line]
    return start, min(stops) if stops else end


class SourcePane(Vertical):
    TITLE = "Source"
    DEFAULT_CSS = """
    SourcePane #src-head { height: auto; padding: 0 1; }
    SourcePane #src-lines { height: 1fr; }
    SourcePane #src-info { height: auto; max-height: 10; padding: 0 1; border-top: solid $primary; }
    """

    class OpenKernels(Message):
        """Enter on a source line: show the kernels generated from it."""

        def __init__(self, filename: str, line: int) -> None:
            self.filename, self.line = filename, line
            super().__init__()

    def compose(self):
        yield Static(id="src-head")
        yield KeyList(id="src-lines")
        yield Static(id="src-info")

    def show(self, model, c, event=None) -> None:
        self.model, self.c = model, c
        head, lines = self.query_one("#src-head", Static), self.query_one("#src-lines", OptionList)
        info = self.query_one("#src-info", Static)
        lines.clear_options()
        info.update("")
        self.first, self.filename, self.facts = 1, "", {}
        src = model.source_of(c) if c is not None else None
        if src is None:
            head.update(missing("User source for this compile (no source record, debug folder "
                                "source.py or readable file)"))
            return
        self.filename, self.first, text_lines = src
        self.facts = line_facts(model, c, c.filename or self.filename)
        break_lines = sorted(self.facts_lines("breaks"))
        self.capture_start, stop = captured_range(c, self.first, len(text_lines), break_lines)
        head.update(Text.assemble(
            (f"{c.display_name or '?'}", "bold"), f"  {Path(self.filename).name}:{self.first}   ",
            ("▌", "green"), " captured  ", ("✖", "bold yellow"), " graph break  ",
            ("G", "green"), " guard  ", ("K", "cyan"), " kernel   (enter: kernels of the line)"))
        opts = []
        for n, code in enumerate(text_lines):
            ln = self.first + n
            f = self.facts.get(ln, {})
            t = Text(no_wrap=True)
            t.append("▌" if self.capture_start <= ln < stop else " ", "green")
            t.append(f"{ln:>5} ", "bright_black")
            t.append("✖" if f.get("breaks") else " ", "bold yellow")
            t.append("G" if f.get("guards") else " ", "green")
            t.append("K" if f.get("kernels") else " ", "cyan")
            t.append(" ")
            t.append(code, "yellow" if f.get("breaks") else "")
            opts.append(Option(t, id=f"L{ln}"))
        lines.add_options(opts)
        # start on the first line something was generated from (else the first break): its
        # kernels, break or guards are in the panel below at once
        shown = range(self.first, self.first + len(text_lines))
        start = min([ln for ln in self.facts_lines("kernels") if ln in shown]
                    or [ln for ln in self.facts_lines("breaks") if ln in shown] or [0])
        inlined = sorted(ln for ln in self.facts_lines("kernels") if ln not in shown)
        if inlined:  # kernels from functions this one called (inlined into its graph)
            head.update(Text.assemble(head.content if isinstance(head.content, Text) else "",
                                      ("\nalso kernels from lines of functions it calls: ",
                                       "cyan"), ", ".join(map(str, inlined[:12]))))
        if start:
            self.call_after_refresh(self.goto_line, start)

    def facts_lines(self, kind: str) -> list[int]:
        return [ln for ln, f in self.facts.items() if f.get(kind)]

    def goto_line(self, line: int) -> None:
        lines = self.query_one("#src-lines", OptionList)
        idx = line - self.first
        if 0 <= idx < lines.option_count:
            lines.highlighted = idx
            lines.scroll_to_highlight()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        ln = self.first + event.option_index
        f = self.facts.get(ln, {})
        parts = [Text(f"line {ln}", style="bold")]
        # one line each, kernels first: wrapped guards must not push them out of the panel
        for k in f.get("kernels", []):
            parts.append(Text(f"  kernel: {k.name}  (fx nodes: {', '.join(k.fx_nodes) or '-'})"
                              "  enter: show it", style="cyan", no_wrap=True, overflow="ellipsis"))
        for b in f.get("breaks", []):
            parts.append(Text(f"  graph break{' [' + b.reason_id + ']' if b.reason_id else ''}: "
                              f"{b.reason.splitlines()[0]}", style="yellow", no_wrap=True,
                              overflow="ellipsis"))
        guards = f.get("guards", [])
        for g in guards[:3]:
            parts.append(Text(f"  guard: {' '.join(g.split())}", style="green", no_wrap=True,
                              overflow="ellipsis"))
        if len(guards) > 3:
            parts.append(Text(f"  ... {len(guards) - 3} more guards (Guards tab, 4)",
                              style="italic green"))
        if len(parts) == 1:
            parts.append(Text("  nothing recorded for this line", style="italic bright_black"))
        self.query_one("#src-info", Static).update(Text("\n").join(parts))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        ln = self.first + event.option_index
        if not self.facts.get(ln, {}).get("kernels"):
            self.app.notify(f"No kernel was generated from line {ln}"
                            + (" (this compile has no kernels)" if not getattr(self.c, "kernels", None)
                               else "") + ".", severity="warning")
            return
        self.post_message(self.OpenKernels(self.filename, ln))
