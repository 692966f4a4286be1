"""The minifier screen (a repro script run in a subprocess) and the list of skipped records."""

import io
import sys

from rich.console import Console
from textual.widgets import RichLog

from tracetorch.tui.app import TraceApp
from tracetorch.tui.paths import open_path
from tracetorch.tui.screens.minify import ConfirmMinifyScreen, MinifyScreen, script_origin
from tracetorch.tui.screens.problems import ProblemsScreen
from tracetorch.tui.synthetic import write_synthetic_trace
from tui_trace_fixtures import make_failed_debug_run

SIZE = (120, 36)


def plain_static(static) -> str:
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(static.content)
    return console.file.getvalue()


def log_text(log: RichLog) -> str:
    return "\n".join(strip.text for strip in log.lines)


async def test_minify_asks_first_and_cancel_runs_nothing(tmp_path):
    """Issue 18 (2): m shows the exact command and where the script came from; n runs nothing."""
    run = make_failed_debug_run(tmp_path / "run")
    o = open_path(str(run))
    app = TraceApp(o.trace, o.debug_dir, "run")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        summary = str(app.screen.query_one("#pane-summary #body").content.renderables[-1])
        assert "asks before running it" in summary
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmMinifyScreen)
        text = str(app.screen.query_one("#confirm-text").content)
        assert f"{sys.executable} repro.py --minify" in text
        assert "in:       " in text and str(run / "repro").endswith(text.split("in:       ")[1].split("\n")[0])
        assert "from the opened debug folder" in text
        assert "does NOT look like a repro script written by tracetorch" in text  # the stand-in
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, (ConfirmMinifyScreen, MinifyScreen))
        assert not (run / "repro" / "repro_minified.py").exists()
        # the palette's Minify goes through the same question
        app.action_minify()
        await pilot.pause()
        assert isinstance(app.screen, ConfirmMinifyScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not (run / "repro" / "repro_minified.py").exists()


def test_origin_recognises_tracetorch_repro_scripts(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text('"""tracetorch repro: 5 graph nodes, written 2026-01-01T00:00:00.\n"""\n'
                      "from tracetorch.debug.repro_cli import main\n")
    lines = script_origin(script, tmp_path)
    assert any("written by tracetorch's debug folder: tracetorch repro: 5 graph nodes" in ln
               for ln in lines)


async def test_minify_runs_repro_in_subprocess_and_shows_progress(tmp_path):
    run = make_failed_debug_run(tmp_path / "run")
    o = open_path(str(run))
    app = TraceApp(o.trace, o.debug_dir, "run")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("m", "y")
        await pilot.pause()
        assert isinstance(app.screen, MinifyScreen)
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        text = log_text(app.screen.query_one(RichLog))
        assert "python repro.py --minify" in text
        assert "SUCCESS: Went from 6 to 2 nodes" in text
        assert "Minifier finished (exit 0)" in text and "repro_minified.py" in text
        assert (run / "repro" / "repro_minified.py").is_file()
        # Issue 18 (10): the minimal graph and its path on screen, not only a path
        shown = plain_static(app.screen.query_one("#minify-graph"))
        assert "Minimal failing graph" in shown and "repro_minified.py" in shown
        assert "relu = torch.relu(x)" in shown and "INPUTS" not in shown
        assert app.screen.query_one("#minify-result").display
        await pilot.press("escape")
        assert not isinstance(app.screen, MinifyScreen)


async def test_minify_failure_is_shown(tmp_path):
    run = make_failed_debug_run(tmp_path / "run")
    (run / "repro" / "repro.py").write_text("import sys\nprint('checking')\nsys.exit(3)\n")
    o = open_path(str(run))
    app = TraceApp(o.trace, o.debug_dir, "run")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("m", "y")
        await pilot.pause()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert "Minifier failed (exit 3)" in log_text(app.screen.query_one(RichLog))


async def test_minify_without_repro_explains(synthetic_trace):
    o = open_path(str(synthetic_trace))
    app = TraceApp(o.trace, o.debug_dir, "t")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()
        assert not isinstance(app.screen, MinifyScreen)
        assert any("No repro script" in str(n.message) for n in app._notifications)


async def test_problems_screen_lists_skipped_and_damaged(tmp_path):
    lines = write_synthetic_trace(tmp_path / "ok.log").read_text().splitlines(keepends=True)
    bad = tmp_path / "trace_bad.log"
    # a stray line (skipped) and an edited payload line (kept, md5 mismatch)
    edited = [ln.replace("aten.relu", "aten.relX", 1) for ln in lines]
    bad.write_text("".join(edited[:3]) + "not a record\n" + "".join(edited[3:]))
    o = open_path(str(bad))
    app = TraceApp(o.trace, o.debug_dir, "bad")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "records skipped" in str(app.screen.query_one("#totals").content)
        await pilot.press("exclamation_mark")
        await pilot.pause()
        assert isinstance(app.screen, ProblemsScreen)
        assert len(o.trace.skipped) == 1 and o.trace.skipped[0][0] == 4
        assert len(o.trace.damaged) >= 1
