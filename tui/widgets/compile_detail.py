"""The compile-detail tabs (Summary, Source, Graph breaks, Guards, Recompiles, FX graph, IR,
Kernels, Metrics, Event) for one compile; in the replay it follows the timeline cursor."""

from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import TabbedContent, TabPane

from tui import extract as X
from tui.panes.breaks import BreaksPane
from tui.panes.event import EventPane
from tui.panes.graphs import GraphsPane
from tui.panes.guards import GuardsPane
from tui.panes.ir import IRPane
from tui.panes.kernels import KernelsPane
from tui.panes.metrics import MetricsPane
from tui.panes.recompiles import RecompilesPane
from tui.panes.source import SourcePane
from tui.panes.summary import SummaryPane

TABS = [("summary", SummaryPane), ("source", SourcePane), ("breaks", BreaksPane),
        ("guards", GuardsPane), ("recompiles", RecompilesPane), ("graphs", GraphsPane),
        ("ir", IRPane), ("kernels", KernelsPane), ("metrics", MetricsPane), ("event", EventPane)]
TAB_TITLES = {tab_id: cls.TITLE for tab_id, cls in TABS}

# Which tab explains an event of a given kind (the replay switches to it).
TAB_FOR_KEY = {
    **{k: "breaks" for k in X.BREAK_KEYS}, **{k: "recompiles" for k in X.RECOMPILE_KEYS},
    **{k: "guards" for k in X.GUARD_KEYS}, **{k: "graphs" for k in X.GRAPH_KEYS + X.AOT_KEYS},
    **{k: "kernels" for k in X.KERNEL_KEYS + X.OUTPUT_KEYS},
    **{k: "ir" for k in X.IR_KEYS}, **{k: "source" for k in X.SOURCE_KEYS},
    "compilation_metrics": "metrics", **{k: "summary" for k in X.FAIL_KEYS},
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

    def compose(self):
        with TabbedContent(id="detail-tabs"):
            for tab_id, cls in TABS:
                with TabPane(cls.TITLE, id=tab_id):
                    yield cls(id=f"pane-{tab_id}")

    @property
    def active(self) -> str:
        return self.query_one(TabbedContent).active

    @active.setter
    def active(self, tab_id: str) -> None:
        self.query_one(TabbedContent).active = tab_id

    def pane(self, tab_id: str):
        return self.query_one(f"#pane-{tab_id}")

    def show(self, model, c, event: int | None = None) -> None:
        """Fill every tab for compile `c` (the active one first, the others lazily on switch)."""
        self.model, self.current, self.event = model, c, event
        self._stale = {tab_id for tab_id, _ in TABS}
        self._refresh_tab(self.active or "summary")

    def _refresh_tab(self, tab_id: str) -> None:
        if self.model is None or tab_id not in getattr(self, "_stale", ()):
            return
        self._stale.discard(tab_id)
        self.pane(tab_id).show(self.model, self.current, self.event)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id:
            self._refresh_tab(event.pane.id)

    def switch(self, tab_id: str) -> None:
        self.active = tab_id
        self._refresh_tab(tab_id)
        # Focus left inside a hidden pane would re-activate that pane (TabbedContent follows
        # focus), so it moves into the new pane.
        focused = self.app.focused
        pane = self.pane(tab_id)
        if focused is not None and self in focused.ancestors and pane not in focused.ancestors_with_self:
            target = next((w for w in pane.query("*") if w.focusable), None)
            if target is not None:
                target.focus()
            else:
                self.query_one(TabbedContent).query_one("Tabs").focus()

    def follow(self, model, index: int) -> None:
        """Replay: show the compile of event `index`, on the tab that explains the event."""
        ev = model.trace.events[index]
        c = model.compile_of_event(index)
        changed = c is not self.current
        self.model, self.event = model, index
        if changed:
            self.current = c
        self._stale = {tab_id for tab_id, _ in TABS}
        tab = TAB_FOR_KEY.get(ev.key, "event")
        if c is None and tab != "event":
            tab = "event"
        self.switch(tab)

    # -- source <-> kernels ------------------------------------------------------------------
    def on_source_pane_open_kernels(self, message: SourcePane.OpenKernels) -> None:
        self.switch("kernels")
        if not self.pane("kernels").select_line(message.filename, message.line):
            self.app.notify(f"No kernel was generated from line {message.line}.")

    def on_kernels_pane_open_source(self, message: KernelsPane.OpenSource) -> None:
        self.switch("source")
        self.pane("source").goto_line(message.line)
