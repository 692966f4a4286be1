"""Overview screen: counts and the tree of frames/compile ids on the left, the selected
compile's detail tabs on the right."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Tree

from tracetorch.tui.model import Compile, Frame
from tracetorch.tui.tabs import TAB_IDS, TAB_TITLES
from tracetorch.tui.widgets.compile_tree import CompileTree
from tracetorch.tui.widgets.totals import Totals

TAB_KEYS = [Binding(str(n % 10), f"tab('{tab_id}')", title, show=False)
            for n, (tab_id, title) in enumerate(TAB_TITLES[:10], 1)]


class MainScreen(Screen):
    BINDINGS = [
        Binding("r", "app.replay", "Replay"),
        Binding("left_square_bracket,h", "cycle_tab(-1)", "Prev tab", show=False),
        Binding("right_square_bracket,l", "cycle_tab(1)", "Next tab", show=False),
        Binding("tab", "focus_pane(1)", "Focus", show=False),
        Binding("shift+tab", "focus_pane(-1)", "Focus back", show=False),
        *TAB_KEYS,
    ]
    DEFAULT_CSS = """
    MainScreen #left { width: 36%; min-width: 30; border-right: solid $primary; }
    MainScreen CompileTree { height: 1fr; }
    """

    def compose(self):
        yield Header()
        with Horizontal():
            with Vertical(id="left"):
                yield Totals(id="totals")
                yield CompileTree(id="tree")
            # the tabs (and the modules of their panes) come just after the first paint
            yield Vertical(id="detail-slot")
        yield Footer()

    def on_mount(self) -> None:
        self.call_after_refresh(self._mount_detail)
        app = self.app
        if app.model is not None:
            self.set_model(app.model)
        else:
            self.query_one(Totals).show_progress("indexing", 0, 0, str(app.trace.path), app.trace.size)
            self.call_after_refresh(app.start_loading)  # after the first paint, not competing with it
        self.query_one(CompileTree).focus()

    async def _mount_detail(self) -> None:
        from tracetorch.tui.widgets.compile_detail import CompileDetail

        detail = CompileDetail(id="detail")
        await self.query_one("#detail-slot").mount(detail)
        self._detail = detail  # composed: with_detail may use it now

    def set_model(self, model) -> None:
        self.query_one(Totals).show(model)
        tree = self.query_one(CompileTree)
        tree.populate(model)
        first = next(iter(model.ordered_compiles()), None)
        self.with_detail(lambda d: d.show(model, first))
        if first is not None:
            self.call_after_refresh(tree.select_compile, first)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        data = event.node.data
        c = data if isinstance(data, Compile) else (
            data.compiles[0] if isinstance(data, Frame) and data.compiles else None)
        model = self.app.model
        if c is not None and model is not None:
            # held j/k: render where the cursor stops
            self.with_detail(lambda d: d.show_later(model, c) if c is not d.current else None)

    def with_detail(self, fn) -> None:
        """Call fn(detail) now, or once the (lazily mounted) detail tabs exist."""
        detail = getattr(self, "_detail", None)
        if detail is None:
            self.call_after_refresh(self.with_detail, fn)
            return
        fn(detail)

    def show_compile(self, c) -> None:
        self.query_one(CompileTree).select_compile(c)
        self.with_detail(lambda d: d.show(self.app.model, c))

    def action_tab(self, tab_id: str) -> None:
        self.with_detail(lambda d: d.switch(tab_id))

    def action_focus_pane(self, step: int) -> None:
        """Tab: between the tree and the active tab's content (a list or the scrolling body),
        never the tab bar, which shows no cursor (the number keys pick tabs)."""
        tree = self.query_one(CompileTree)

        def move(detail):
            try:
                pane = detail.pane(detail.active)
            except Exception:
                pane = None
            targets = [tree]
            if pane is not None:
                inner = [w for w in pane.query("*") if w.focusable and w.display]
                targets.append(inner[0] if inner else pane)
            cur = next((i for i, t in enumerate(targets) if self.focused is not None and (
                self.focused is t or t in self.focused.ancestors)), 0)
            target = targets[(cur + step) % len(targets)]
            if target.focusable:
                target.focus()
            else:
                tree.focus()
        self.with_detail(move)

    def action_cycle_tab(self, step: int) -> None:
        def cycle(detail):
            cur = TAB_IDS.index(detail.active) if detail.active in TAB_IDS else 0
            detail.switch(TAB_IDS[(cur + step) % len(TAB_IDS)])
        self.with_detail(cycle)
