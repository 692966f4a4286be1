"""The minifier: `m` (or the palette's Minify) first asks, in a dialog that shows the exact
command, the folder it runs in and where the script came from (a repro script is Python code
from the opened folder: running it runs whatever it says). Only `y` runs it, in a subprocess (a
worker), showing its progress lines; at the end the screen shows the minimal repro's path and
its graph (read, never imported)."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import re
import sys
from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Header, RichLog, Static

from tracetorch import logs
from tracetorch.logs.sanitize import clean
from tracetorch.tui.paths import display_path

log = logs.get_logger(__name__)

# What tracetorch's repro writer puts in every script (debug/repro_writer.py).
REPRO_MARKERS = ("tracetorch.debug.repro_cli", '"""tracetorch ')
MAX_SHOWN_BYTES = 200_000


def minify_command(script: Path, extra_args: list[str] | None = None) -> list[str]:
    return [sys.executable, script.name, "--minify", *(extra_args or [])]


def script_origin(script: Path, debug_dir: Path | None) -> list[str]:
    """Facts about where the script came from, for the user to judge before running it."""
    out = []
    try:
        st = script.stat()
        data = script.read_bytes()[:MAX_SHOWN_BYTES]
    except OSError as e:
        return [f"cannot read it: {e.strerror or e}"]
    when = datetime.datetime.fromtimestamp(st.st_mtime).isoformat(sep=" ", timespec="seconds")
    out.append(f"file: {display_path(script)} ({st.st_size:,} bytes, modified {when}, "
               f"sha256 {hashlib.sha256(data).hexdigest()[:16]})")
    if debug_dir is not None:
        out.append(f"from the opened debug folder {display_path(debug_dir)} (its repro/ folder)")
    text = data.decode("utf-8", "replace")
    if all(m in text for m in REPRO_MARKERS):
        m = re.search(r'"""tracetorch [^\n]*', text)
        out.append("looks like a repro script written by tracetorch's debug folder"
                   + (f": {m.group()[3:]}" if m else ""))
    else:
        out.append("does NOT look like a repro script written by tracetorch: read it first")
    return [clean(line) for line in out]


class ConfirmMinifyScreen(ModalScreen[bool]):
    """Asks before running a script from the opened folder. Returns True to run it."""

    BINDINGS = [Binding("y", "answer(True)", "Run it"),
                Binding("n,escape,q", "answer(False)", "Cancel")]
    DEFAULT_CSS = """
    ConfirmMinifyScreen { align: center middle; }
    ConfirmMinifyScreen > Vertical { width: 96; height: auto; max-height: 90%;
                                     border: thick $warning; background: $surface; padding: 1 2; }
    """

    def __init__(self, script: Path, debug_dir: Path | None, extra_args=None, **kw):
        super().__init__(**kw)
        self.script, self.debug_dir, self.extra_args = script, debug_dir, extra_args or []

    def compose(self):
        cmd = minify_command(self.script, self.extra_args)
        text = Text()
        text.append("Run the minifier? This runs Python code from the opened folder.\n\n", "bold")
        text.append("command:  ", "bold")
        text.append(clean(" ".join(cmd)) + "\n")
        text.append("in:       ", "bold")
        text.append(clean(display_path(self.script.parent)) + "\n\n")
        text.append("where the script came from:\n", "bold")
        for line in script_origin(self.script, self.debug_dir):
            text.append(f"  - {line}\n")
        text.append("\ny: run it    n / escape: cancel", "bold")
        with Vertical():
            yield Static(text, id="confirm-text")

    def action_answer(self, run: bool) -> None:
        log.info("minify_confirmation", script=str(self.script), run=run)
        self.dismiss(run)


def minified_graph(path: Path) -> str:
    """The graph part of a minified repro script (class Repro ... up to the inputs), else the
    whole file; read as text only."""
    try:
        text = clean(path.read_bytes()[:MAX_SHOWN_BYTES].decode("utf-8", "replace"))
    except OSError:
        return ""
    m = re.search(r"^class Repro\b.*?(?=^# Inputs|^INPUTS\b|\Z)", text, re.S | re.M)
    return (m.group().rstrip() if m else text.rstrip())


class MinifyScreen(Screen):
    BINDINGS = [Binding("escape,q", "close", "Back"), Binding("ctrl+c", "stop", "Stop minifier")]
    DEFAULT_CSS = """
    MinifyScreen #minify-status { height: auto; padding: 0 1; background: $panel; }
    MinifyScreen #minify-log { height: 1fr; }
    MinifyScreen #minify-result { height: 2fr; display: none; border-top: solid $primary; }
    MinifyScreen #minify-result.shown { display: block; }
    """

    def __init__(self, script: Path, extra_args: list[str] | None = None, **kw):
        super().__init__(**kw)
        self.script, self.extra_args = script, extra_args or []
        self.proc: asyncio.subprocess.Process | None = None
        self.returncode: int | None = None
        self.result_path: Path | None = None

    def compose(self):
        yield Header()
        yield Static(Text(f"Minifying {display_path(self.script)} ...", style="bold"),
                     id="minify-status")
        yield RichLog(id="minify-log", wrap=True, markup=False)
        with VerticalScroll(id="minify-result"):
            yield Static(id="minify-graph")
        yield Footer()

    def on_mount(self) -> None:
        self.run_minifier()

    @work(exclusive=True, group="minifier")
    async def run_minifier(self) -> None:
        log_w, status = self.query_one(RichLog), self.query_one("#minify-status", Static)
        cmd = minify_command(self.script, self.extra_args)
        shown = " ".join(["python", *cmd[1:]])  # the interpreter's full path is noise
        log_w.write(Text(f"$ {shown}   (in {display_path(self.script.parent)})", style="bold"))
        log.info("minify_started", script=str(self.script), command=cmd)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *cmd, cwd=str(self.script.parent), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT)
        except OSError as e:
            status.update(Text(f"Could not start the minifier: {e}", style="bold red"))
            return
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            log_w.write(Text(clean(raw.decode("utf-8", "replace").rstrip("\n"))))
        self.returncode = await self.proc.wait()
        minified = self.script.parent / "repro_minified.py"
        log.info("minify_finished", script=str(self.script), returncode=self.returncode,
                 result=str(minified) if minified.is_file() else None)
        if self.returncode == 0:
            msg = Text("Minifier finished (exit 0).", style="bold green")
            if minified.is_file():
                self.result_path = minified
                msg.append(f"  Minimal repro: {display_path(minified)}", "bold")
                self._show_result(minified)
        else:
            msg = Text(f"Minifier failed (exit {self.returncode}); see its output above.",
                       style="bold red")
        status.update(msg)
        log_w.write(msg)

    def _show_result(self, path: Path) -> None:
        graph = minified_graph(path)
        head = Text.assemble(("Minimal failing graph", "bold underline"), "  from ",
                             (display_path(path), "bold cyan"),
                             f"   run it: python {path.name}  (in {display_path(path.parent)})")
        from rich.console import Group
        self.query_one("#minify-graph", Static).update(Group(
            head, Syntax(graph or "(empty file)", "python", line_numbers=True, word_wrap=True,
                         theme="monokai")))
        self.query_one("#minify-result").add_class("shown")

    def action_stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()

    def action_close(self) -> None:
        self.action_stop()
        self.app.pop_screen()
