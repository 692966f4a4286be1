"""Kernels tab: generated kernels, syntax highlighted, with provenance back to FX nodes and
user source lines. Enter on a kernel shows its source line in the Source tab."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tracetorch.tui.panes.base import KeyList, code, heading, missing


class KernelsPane(Horizontal):
    TITLE = "Kernels"
    DEFAULT_CSS = """
    KernelsPane #kernel-list { width: 36%; height: 1fr; }
    KernelsPane #kernel-view { width: 1fr; height: 1fr; padding: 0 1; }
    """

    class OpenSource(Message):
        """Enter on a kernel: show the user line it came from."""

        def __init__(self, filename: str, line: int) -> None:
            self.filename, self.line = filename, line
            super().__init__()

    def compose(self):
        yield KeyList(id="kernel-list")
        with VerticalScroll(id="kernel-view"):
            yield Static(id="kernel-code")

    def show(self, model, c, event=None) -> None:
        self.kernels = list(c.kernels) if c is not None else []
        lst, body = self.query_one("#kernel-list", OptionList), self.query_one("#kernel-code", Static)
        lst.clear_options()
        if not self.kernels:
            body.update(missing("Kernels / output code for this compile"))
            return
        opts = []
        for k in self.kernels:
            t = Text(k.name, style="bold cyan" if not k.module else "bold")
            if k.user_lines:  # a second line: where in the user's code it came from
                fn, ln = k.user_lines[0]
                t.append(f"\n  ← {Path(fn).name}:{ln}", "bright_black")
            opts.append(Option(t))
        lst.add_options(opts)
        start = next((i for i, k in enumerate(self.kernels) if k.event == event), 0)
        lst.highlighted = start
        self._show_kernel(start)

    def _show_kernel(self, i: int) -> None:
        if not (0 <= i < len(self.kernels)):
            return
        k = self.kernels[i]
        prov = Text()
        prov.append("fx nodes: ", "bold")
        prov.append(", ".join(k.fx_nodes) or "-")
        prov.append("\nuser lines: ", "bold")
        prov.append(", ".join(f"{Path(f).name}:{ln}" for f, ln in k.user_lines) or "-")
        self.query_one("#kernel-code", Static).update(Group(
            heading(k.name), prov, Text(""), code(k.code or "(no code recorded)", k.language)))

    def select_line(self, filename: str, line: int) -> bool:
        """Highlight the first kernel generated from filename:line; False if none."""
        for i, k in enumerate(getattr(self, "kernels", [])):
            if any(Path(f).name == Path(filename).name and ln == line for f, ln in k.user_lines):
                self.query_one("#kernel-list", OptionList).highlighted = i
                self._show_kernel(i)
                return True
        return False

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._show_kernel(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        k = self.kernels[event.option_index]
        if k.user_lines:
            self.post_message(self.OpenSource(*k.user_lines[0]))
        else:
            self.app.notify("This kernel has no recorded source line.", severity="warning")
