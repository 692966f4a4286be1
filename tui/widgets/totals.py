"""The overview counts above the tree: graphs, breaks, recompiles, kernels, compile time."""

from rich.text import Text
from textual.widgets import Static

from tracetorch.tui.model import OUTCOME_STYLE, BREAK, FAILED, RECOMPILE


def totals_text(model) -> Text:
    t = model.totals
    out = Text()
    out.append(f"{t.frames} frames  {t.compiles} compiles  {t.graphs} graphs\n", "bold")
    out.append(f"{t.breaks} graph breaks", OUTCOME_STYLE[BREAK])
    out.append("  ")
    out.append(f"{t.recompiles} recompiles", OUTCOME_STYLE[RECOMPILE])
    out.append("  ")
    out.append(f"{t.failures} failed", OUTCOME_STYLE[FAILED] if t.failures else "")
    out.append(f"\n{t.kernels} kernels  {t.compile_time:.2f} s compile time  {t.events} events")
    problems = len(model.trace.skipped) + len(model.trace.damaged)
    if problems:
        out.append(f"\n⚠ {len(model.trace.skipped)} records skipped, {len(model.trace.damaged)} "
                   "damaged (press ! to list)", "bold red")
    return out


class Totals(Static):
    DEFAULT_CSS = "Totals { height: auto; padding: 0 1; border-bottom: solid $primary; }"

    def show(self, model) -> None:
        self.update(totals_text(model))

    def show_progress(self, stage: str, done: int, total: int, path: str, size: int) -> None:
        """While a big trace loads: what is being done, and how far it got."""
        count = f"{done:,} / {total:,} records ({100 * done // max(total, 1)}%)" if total else "..."
        self.update(Text(f"{stage.capitalize()} {path} ({size / 1e6:.1f} MB)\n{count}",
                         style="italic"))
