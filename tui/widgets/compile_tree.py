"""Overview tree: every frame (worst offenders first) with its compile ids, coloured by outcome."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree

from tracetorch.tui.model import OUTCOME_STYLE, BREAK, CRASHED, FAILED, RECOMPILE, SKIPPED


def frame_label(f) -> Text:
    t = Text()
    t.append(f"[{f.frame_id}] ", "bold")
    t.append(f.name, "bold")
    if f.location:
        t.append(f"  {f.location}", "bright_black")
    for outcome, sym in ((CRASHED, "crashed"), (FAILED, "failed"), (SKIPPED, "skipped"),
                         (RECOMPILE, "recompiles"), (BREAK, "breaks")):
        n = f.count(outcome)
        if n:
            t.append(f"  {n} {sym}", OUTCOME_STYLE[outcome])
    return t


def compile_label(c) -> Text:
    t = Text()
    t.append(f"{c.id:<6}", OUTCOME_STYLE[c.outcome])
    t.append(" ")
    t.append(", ".join(c.flags), OUTCOME_STYLE[c.outcome])
    if len(c.attempts) > 1:
        t.append(f"  ({len(c.attempts)} attempts)", "bright_black")
    if c.kernel_count:
        t.append(f"  {c.kernel_count} kernels", "cyan")
    if c.compile_time:
        t.append(f"  {c.compile_time:.2f}s", "bright_black")
    return t


class CompileTree(Tree):
    """Nodes carry the Compile (leaves) or the Frame (branches) as data."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]

    DEFAULT_CSS = "CompileTree { overflow-x: hidden; }"

    def render_label(self, node, base_style, style) -> Text:
        """The label cut with an ellipsis where the pane ends (not mid-word without a sign)."""
        text = super().render_label(node, base_style, style)
        depth, p = 0, node
        while p.parent is not None:
            depth, p = depth + 1, p.parent
        room = self.scrollable_content_region.width - depth * self.guide_depth
        if room > 4 and text.cell_len > room:
            text.truncate(room, overflow="ellipsis")
        return text

    def get_label_width(self, node) -> int:
        return min(super().get_label_width(node), max(self.scrollable_content_region.width, 20))

    def __init__(self, **kw):
        super().__init__("compiles", **kw)
        self.show_root = False
        self.guide_depth = 3

    def populate(self, model) -> None:
        self.clear()
        for f in model.frames:
            node = self.root.add(frame_label(f), data=f, expand=True)
            for c in f.compiles:
                node.add_leaf(compile_label(c), data=c)
        if not model.frames:
            self.root.add_leaf(Text("no compiles in this trace", style="italic"))

    def action_scroll_home(self) -> None:
        self.cursor_line = 0

    def action_scroll_end(self) -> None:
        self.cursor_line = max(self.last_line, 0)

    def select_compile(self, c) -> None:
        for node in self.root.children:
            for leaf in node.children:
                if leaf.data is c:
                    self.move_cursor(leaf)
                    return
