"""The compile-detail tabs (Summary, Source, Graph breaks, Guards, Recompiles, FX graph, IR,
Kernels, Metrics, Event) for one compile; in the replay it follows the timeline cursor."""

from __future__ import annotations

from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.lazy import Lazy
from textual.widgets import TabbedContent, TabPane

from tracetorch.tui import extract as X
from tracetorch.tui.debounce import Debouncer
from tracetorch.tui.tabs import TAB_TITLES
from tracetorch.tui.panes.breaks import BreaksPane
from tracetorch.tui.panes.event import EventPane
from tracetorch.tui.panes.graphs import GraphsPane
from tracetorch.tui.panes.guards import GuardsPane
from tracetorch.tui.panes.ir import IRPane
from tracetorch.tui.panes.kernels import KernelsPane
from tracetorch.tui.panes.metrics import MetricsPane
from tracetorch.tui.panes.recompiles import RecompilesPane
from tracetorch.tui.panes.source import SourcePane
from tracetorch.tui.panes.summary import SummaryPane

TABS = [("summary", SummaryPane), ("source", SourcePane), ("breaks", BreaksPane),
        ("guards", GuardsPane), ("recompiles", RecompilesPane), ("graphs", GraphsPane),
        ("ir", IRPane), ("kernels", KernelsPane), ("metrics", MetricsPane), ("event", EventPane)]
assert [(tab_id, cls.TITLE) for tab_id, cls in TABS] == TAB_TITLES, "tui/tabs.py is out of date"

# Which tab explains an event of a given kind (the replay switches to it).
TAB_FOR_KEY = {
    **{k: "breaks" for k in X.BREAK_KEYS}, **{k: "recompiles" for k in X.RECOMPILE_KEYS},
    **{k: "guards" for k in X.GUARD_KEYS}, **{k: "graphs" for k in X.GRAPH_KEYS + X.AOT_KEYS},
    **{k: "kernels" for k in X.KERNEL_KEYS + X.OUTPUT_KEYS},
    **{k: "ir" for k in X.IR_KEYS}, **{k: "source" for k in X.SOURCE_KEYS},
    "compilation_metrics": "metrics", **{k: "summary" for k in X.FAIL_KEYS},
    # the console-text twins of our json records
    "graph_breaks": "breaks", "recompiles": "recompiles", "recompiles_verbose": "recompiles",
    "fusion": "ir", "graph_sizes": "graphs",
}


class CompileDetail(Vertical):
    DEFAULT_CSS = """
    CompileDetail { height: 1fr; width: 1fr; }
    CompileDetail TabbedContent { height: 1fr; }
    CompileDetail TabPane { padding: 0; height: 1fr; }
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        self.model = None
        self.current = None
        self.event: int | None = None
        self._pending = Debouncer(self)

    def compose(self):
        with TabbedContent(id="detail-tabs"):
            for n, (tab_id, cls) in enumerate(TABS):
                with TabPane(cls.TITLE, id=tab_id):
                    # hidden tabs mount after the first paint (a third of the widgets)
                    yield cls(id=f"pane-{tab_id}") if n == 0 else Lazy(cls(id=f"pane-{tab_id}"))

    @property
    def active(self) -> str:
        return self.query_one(TabbedContent).active

    @active.setter
    def active(self, tab_id: str) -> None:
        self.query_one(TabbedContent).active = tab_id

    def pane(self, tab_id: str):
        return self.query_one(f"#pane-{tab_id}")

    def show_later(self, model, c) -> None:
        """`show` once the cursor rests (a burst of calls renders only the last)."""
        self._pending.schedule(lambda: self.show(model, c))

    def show(self, model, c, event: int | None = None) -> None:
        """Fill every tab for compile `c` (the active one first, the others lazily on switch)."""
        self._pending.cancel()
        self.model, self.current, self.event = model, c, event
        self._stale = {tab_id for tab_id, _ in TABS}
        self._refresh_tab(self.active or "summary")

    def _refresh_tab(self, tab_id: str) -> None:
        if self.model is None or tab_id not in getattr(self, "_stale", ()):
            return
        try:
            pane = self.pane(tab_id)
        except NoMatches:  # a lazy pane not mounted yet: try again after the next refresh
            self.call_after_refresh(self._refresh_tab, tab_id)
            return
        self._stale.discard(tab_id)
        pane.show(self.model, self.current, self.event)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._pending.flush()
        if event.pane.id:
            self._refresh_tab(event.pane.id)

    def switch(self, tab_id: str) -> None:
        self._pending.flush()
        self.active = tab_id
        self._refresh_tab(tab_id)
        # Focus left inside a hidden pane would re-activate that pane (TabbedContent follows
        # focus), so it moves into the new pane.
        focused = self.app.focused
        try:
            pane = self.pane(tab_id)
        except NoMatches:
            return
        if focused is not None and self in focused.ancestors and pane not in focused.ancestors_with_self:
            target = next((w for w in pane.query("*") if w.focusable), None)
            if target is not None:
                target.focus()
            else:
                self.query_one(TabbedContent).query_one("Tabs").focus()

    def follow(self, model, index: int, later: bool = False) -> None:
        """Replay: show the compile of event `index`, on the tab that explains the event."""
        if later:
            self._pending.schedule(lambda: self.follow(model, index))
            return
        self._pending.cancel()
        ev = model.trace.events[index]
        c = model.compile_of_event(index)
        tab = TAB_FOR_KEY.get(ev.key, "event")
        if c is None and tab != "event":
            tab = "event"
        same = c is self.current and tab == self.active and self.model is model
        self.model, self.current, self.event = model, c, index
        if same and not getattr(dict(TABS)[tab], "FOLLOWS_EVENT", False):
            # stepping through events of one kind in one compile (e.g. thousands of fusion
            # decisions): the pane already shows them; only mark the other tabs out of date
            self._stale = {tab_id for tab_id, _ in TABS} - {tab}
            return
        self._stale = {tab_id for tab_id, _ in TABS}
        self.switch(tab)

    # -- source <-> kernels ------------------------------------------------------------------
    def on_source_pane_open_kernels(self, message: SourcePane.OpenKernels) -> None:
        self.switch("kernels")
        try:
            found = self.pane("kernels").select_line(message.filename, message.line)
        except NoMatches:  # not mounted yet (lazy): the tab opens, selection is skipped
            return
        if not found:
            self.app.notify(f"No kernel was generated from line {message.line}.")

    def on_kernels_pane_open_source(self, message: KernelsPane.OpenSource) -> None:
        self.switch("source")
        for pane in self.query(SourcePane):
            pane.goto_line(message.line)
