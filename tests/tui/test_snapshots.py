"""SVG snapshots of every screen and tab (pytest-textual-snapshot), on three traces made
deterministic: the synthetic program through logs' writer (fixed clock); a debug run of OUR
compiler made in the session (compile with a graph break, a recompile and fused C++ kernels,
TRACE_COMPILE_DEBUG=1) and a PyTorch TORCH_TRACE log made in the session, both normalized in
a copy (clock, pid, timings, object ids; for ours also addresses, module paths, versions and the
machine's libmvec declarations: tui_trace_fixtures.py). Update with --snapshot-update.

Our compiler's snapshots show its real output (guards, FX graphs, IR, C++ kernels): a change
of that output in compiler/ changes them, on purpose; review the new SVGs and update."""

from pathlib import Path

import pytest

from tracetorch.tui.app import TraceApp
from tracetorch.tui.paths import open_path
from tracetorch.tui.synthetic import write_synthetic_trace
from tui_trace_fixtures import make_failed_debug_run

SIZE = (130, 36)


def app_for(path: Path, shown: str = "trace") -> TraceApp:
    o = open_path(str(path))
    return TraceApp(o.trace, o.debug_dir, shown)


# (name, keys): "j" moves the tree cursor (2/0 -> frame 0 -> 0/0 -> 0/1), digits pick tabs
SYNTHETIC_VIEWS = [
    ("overview", []),
    ("source", ["j", "j", "2"]),
    ("breaks", ["j", "j", "j", "3"]),
    ("recompiles", ["j", "j", "j", "5"]),
    ("kernels", ["j", "j", "8"]),
    ("replay_break", ["r", "b"]),
    ("help", ["f1"]),
    ("search", ["slash", *"mismatch"]),
]


@pytest.mark.parametrize("name,keys", SYNTHETIC_VIEWS, ids=[v[0] for v in SYNTHETIC_VIEWS])
def test_synthetic_views(snap_compare, synthetic_trace, name, keys):
    assert snap_compare(app_for(synthetic_trace), press=keys, terminal_size=SIZE)


async def open_palette(pilot):
    """ctrl+p, type "Show", wait until the palette's (asynchronous) search has settled."""
    from textual.command import CommandList, CommandPalette
    await pilot.press("ctrl+p", *"Show")
    await pilot.pause(0.5)
    # The palette searches its providers asynchronously: on a loaded CI machine 0.5 s may
    # not be enough, so also wait (up to 10 s) until the result list reads the same 3 times.
    seen = []
    for _ in range(50):
        screen = pilot.app.screen
        if isinstance(screen, CommandPalette):
            seen.append(screen.query_one(CommandList).option_count)
            if len(seen) >= 3 and seen[-1] and seen[-1] == seen[-2] == seen[-3]:
                break
        await pilot.pause(0.2)
    # The search box's cursor blinks: stop it (shown) so the picture does not depend on
    # when it is taken.
    from textual.widgets import Input
    pilot.app.screen.query_one(Input).cursor_blink = False
    await pilot.pause()


def test_command_palette(snap_compare, synthetic_trace):
    assert snap_compare(app_for(synthetic_trace), terminal_size=SIZE, run_before=open_palette)


def test_problems(snap_compare, tmp_path):
    lines = write_synthetic_trace(tmp_path / "ok.log").read_text().splitlines(keepends=True)
    bad = tmp_path / "trace_bad.log"
    bad.write_text("".join(lines[:3]) + "not a record\n" + "".join(lines[3:-2]))
    assert snap_compare(app_for(bad), press=["exclamation_mark"], terminal_size=SIZE)


def test_minify(snap_compare, tmp_path, monkeypatch):
    run = make_failed_debug_run(tmp_path / "minify_run")
    monkeypatch.chdir(tmp_path)          # paths on screen are shown relative to it: minify_run/...

    async def minify(pilot):
        await pilot.press("m", "y")
        await pilot.pause()
        await pilot.app.screen.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app_for(run, "run"), terminal_size=SIZE, run_before=minify)


def test_minify_confirmation(snap_compare, tmp_path, monkeypatch):
    """m asks first: the exact command, the folder, where the script came from."""
    run = make_failed_debug_run(tmp_path / "minify_run")
    monkeypatch.chdir(tmp_path)
    import os
    os.utime(run / "repro" / "repro.py", (0, 0))   # the modification time shown is fixed
    monkeypatch.setattr("sys.executable", "/usr/bin/python3")  # the command's interpreter

    async def ask(pilot):
        await pilot.press("m")
        await pilot.pause()

    app = app_for(run, "run")
    assert snap_compare(app, terminal_size=(150, 36), run_before=ask)


TORCH_VIEWS = [
    ("overview", []),
    ("recompiles", ["j", "5"]),
    ("replay_recompile", ["r", "c"]),
]


@pytest.mark.parametrize("name,keys", TORCH_VIEWS, ids=[v[0] for v in TORCH_VIEWS])
def test_torch_trace_views(snap_compare, torch_trace, name, keys):
    assert snap_compare(app_for(torch_trace), press=keys, terminal_size=SIZE)


# The PyTorch trace's other tabs (eager backend: no IR or kernels, which say "not in this trace").
TORCH_TABS = [
    ("guards", ["4"]),
    ("fx_graph", ["6"]),
    ("metrics", ["9"]),
]


@pytest.mark.parametrize("name,keys", TORCH_TABS, ids=[v[0] for v in TORCH_TABS])
def test_torch_trace_tabs(snap_compare, torch_trace, name, keys):
    assert snap_compare(app_for(torch_trace), press=keys, terminal_size=SIZE)


# Our compiler's trace (normalized). The tree: frame f (0/0 selected at start, 0/1), then the
# resume function's frame (1/0, 1/1); digits pick tabs.
OURS_VIEWS = [
    ("overview", []),
    ("source", ["2"]),
    ("breaks", ["3"]),
    ("guards", ["4"]),
    ("recompiles", ["j", "5"]),
    ("fx_graph", ["6"]),
    ("ir_fusion", ["7"]),
    ("kernels", ["8"]),
    ("metrics", ["9"]),
    ("replay_break", ["r", "b"]),
    ("replay_recompile", ["r", "c"]),
    ("help", ["f1"]),
    ("search", ["slash", *"rank"]),
    ("problems", ["exclamation_mark"]),
]


@pytest.mark.parametrize("name,keys", OURS_VIEWS, ids=[v[0] for v in OURS_VIEWS])
def test_our_trace_views(snap_compare, our_trace, name, keys):
    assert snap_compare(app_for(our_trace, "run"), press=keys, terminal_size=SIZE)


def test_our_trace_search_hit(snap_compare, our_trace):
    """enter in the search dialog: the replay at the first matching record."""
    async def search(pilot):
        await pilot.press("slash", *"rank", "enter")
        await pilot.pause()
        # the "N events match" toast times out after seconds: not in the picture
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app_for(our_trace, "run"), terminal_size=SIZE, run_before=search)


def test_our_trace_command_palette(snap_compare, our_trace):
    assert snap_compare(app_for(our_trace, "run"), terminal_size=SIZE, run_before=open_palette)
