"""Runs `python repro.py --minify` for a failed compile in a subprocess (a worker) and shows
its progress lines and the result."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, RichLog, Static

from tracetorch.logs.sanitize import clean
from tracetorch.tui.paths import display_path


class MinifyScreen(Screen):
    BINDINGS = [Binding("escape,q", "close", "Back"), Binding("ctrl+c", "stop", "Stop minifier")]
    DEFAULT_CSS = """
    MinifyScreen #minify-status { height: auto; padding: 0 1; background: $panel; }
    """

    def __init__(self, script: Path, extra_args: list[str] | None = None, **kw):
        super().__init__(**kw)
        self.script, self.extra_args = script, extra_args or []
        self.proc: asyncio.subprocess.Process | None = None
        self.returncode: int | None = None

    def compose(self):
        yield Header()
        yield Static(Text(f"Minifying {display_path(self.script)} ...", style="bold"),
                     id="minify-status")
        yield RichLog(id="minify-log", wrap=True, markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.run_minifier()

    @work(exclusive=True, group="minifier")
    async def run_minifier(self) -> None:
        log, status = self.query_one(RichLog), self.query_one("#minify-status", Static)
        cmd = [sys.executable, self.script.name, "--minify", *self.extra_args]
        shown = " ".join(["python", *cmd[1:]])  # the interpreter's full path is noise
        log.write(Text(f"$ {shown}   (in {display_path(self.script.parent)})", style="bold"))
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *cmd, cwd=str(self.script.parent), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT)
        except OSError as e:
            status.update(Text(f"Could not start the minifier: {e}", style="bold red"))
            return
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            log.write(Text(clean(raw.decode("utf-8", "replace").rstrip("\n"))))
        self.returncode = await self.proc.wait()
        minified = self.script.parent / "repro_minified.py"
        if self.returncode == 0:
            msg = Text("Minifier finished (exit 0).", style="bold green")
            if minified.is_file():
                msg.append(f"  Minimal repro: {display_path(minified)}", "bold")
        else:
            msg = Text(f"Minifier failed (exit {self.returncode}); see its output above.",
                       style="bold red")
        status.update(msg)
        log.write(msg)

    def action_stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()

    def action_close(self) -> None:
        self.action_stop()
        self.app.pop_screen()
