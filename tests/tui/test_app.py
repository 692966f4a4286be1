"""Pilot interaction tests of tracetui on a trace written by logs' writer (synthetic program)."""

import io
from pathlib import Path

from rich.console import Console
from rich.text import Text

from textual.widgets import OptionList, Static

from tracetorch.tui.app import TraceApp
from tracetorch.tui.model import BREAK, FAILED, RECOMPILE
from tracetorch.tui.paths import open_path
from tracetorch.tui.screens.replay import ReplayScreen
from tracetorch.tui.widgets.compile_detail import CompileDetail
from tracetorch.tui.widgets.compile_tree import CompileTree
from tracetorch.tui.widgets.event_list import EventList

SIZE = (140, 40)


def make_app(path: Path) -> TraceApp:
    o = open_path(str(path))
    return TraceApp(o.trace, o.debug_dir, "trace")


def plain(static: Static) -> str:
    """The text a Static shows (its whole content, not only the visible part), unstyled."""
    console = Console(width=200, file=io.StringIO(), color_system=None)
    content = static.content
    console.print(content if not isinstance(content, str) else Text.from_markup(content))
    return console.file.getvalue()


def body_text(app, tab_id: str) -> str:
    pane = app.screen.query_one(f"#pane-{tab_id}")
    return "\n".join(plain(s) for s in pane.query(Static))


def visible_text(widget) -> str:
    return "\n".join(strip.text for strip in widget.render_lines(widget.region.reset_offset))


async def select(pilot, app, compile_id: str):
    """Move the tree cursor to a compile id with j/k as a user would."""
    tree = app.screen.query_one(CompileTree)
    for _ in range(20):
        node = tree.cursor_node
        if node is not None and getattr(node.data, "id", None) == compile_id:
            return
        await pilot.press("j")
    raise AssertionError(f"compile {compile_id} not reachable in the tree")


async def test_overview_worst_offenders_first(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.screen.query_one(CompileTree)
        frames = [n.data for n in tree.root.children]
        # the failed frame first, then the frame that recompiles and breaks, then the clean one
        assert [f.name for f in frames] == ["broken", "forward", "forward (resume)"]
        assert frames[0].compiles[0].outcome == FAILED
        assert [c.outcome for c in frames[1].compiles] == [BREAK, BREAK]
        assert RECOMPILE in frames[1].compiles[1].flags
        totals = plain(app.screen.query_one("#totals", Static))
        assert "2 graph breaks" in totals and "1 recompiles" in totals and "3 kernels" in totals
        assert "1 failed" in totals


async def test_detail_tabs_show_each_artifact(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await select(pilot, app, "0/1")
        detail = app.screen.query_one(CompileDetail)
        expected = {
            "3": ("breaks", ["print() (a side effect outside the graph)", "CALL", "model.py:13"]),
            "4": ("guards", ["TENSOR_MATCH", "model.py:11"]),
            "5": ("recompiles", ["0/0", "8", "4", "model.py:11", "size mismatch"]),
            "6": ("graphs", ["aten.relu.default"]),
            "7": ("ir", ["IR before fusion", "FusedPointwise", "same iteration space"]),
            "9": ("metrics", ["total", "0.2500", "graph_op_count"]),
        }
        for key, (tab, needles) in expected.items():
            await pilot.press(key)
            await pilot.pause()
            assert detail.active == tab
            text = body_text(app, tab)
            for needle in needles:
                assert needle in text, (tab, needle, text[:500])


async def test_missing_artifacts_say_not_in_trace(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await select(pilot, app, "2/0")  # the failed compile: no graph, no guards, no kernels
        for key, tab in (("3", "breaks"), ("4", "guards"), ("6", "graphs"), ("7", "ir")):
            await pilot.press(key)
            await pilot.pause()
            assert "not in this trace" in body_text(app, tab)
        await pilot.press("1")
        await pilot.pause()
        assert "injected relu bug" in body_text(app, "summary")


async def test_source_line_to_kernels_and_back(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await select(pilot, app, "0/0")
        await pilot.press("2")
        await pilot.pause()
        detail = app.screen.query_one(CompileDetail)
        lines = app.screen.query_one("#src-lines", OptionList)
        shown = visible_text(lines)
        assert "✖" in shown and "print(" in shown  # the break point is marked
        lines.focus()
        lines.highlighted = 2  # line 12: h = torch.relu(h) * 2 -> the fused kernel
        await pilot.pause()
        assert "kernel: kernel0_relu_mul" in plain(app.screen.query_one("#src-info", Static))
        await pilot.press("enter")
        await pilot.pause()
        assert detail.active == "kernels"
        kern = app.screen.query_one("#kernel-list", OptionList)
        assert "kernel0_relu_mul" in str(kern.get_option_at_index(kern.highlighted).prompt)
        assert "std::max" in plain(app.screen.query_one("#kernel-code", Static))
        kern.focus()
        await pilot.press("enter")  # and back: the kernel's source line
        await pilot.pause()
        assert detail.active == "source" and lines.highlighted == 2


async def test_replay_steps_and_jumps(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ReplayScreen)
        timeline = app.screen.query_one(EventList)
        assert timeline.cursor == 0
        await pilot.press("j", "j", "down")
        assert timeline.cursor == 3
        await pilot.press("k")
        assert timeline.cursor == 2
        detail = app.screen.query_one(CompileDetail)
        await pilot.press("b")  # next graph break: the breaks tab follows
        await pilot.pause()
        assert app.trace.events[timeline.cursor].key == "graph_break"
        assert detail.active == "breaks" and "▶ Graph break 1" in body_text(app, "breaks")
        await pilot.press("c")  # next recompile
        await pilot.pause()
        assert app.trace.events[timeline.cursor].key in ("recompile", "guard_failure")
        assert detail.active == "recompiles"
        await pilot.press("x")  # next failure
        await pilot.pause()
        assert app.model.compile_of_event(timeline.cursor).id == "2/0"
        await pilot.press("G")
        assert timeline.cursor == len(app.trace.events) - 1
        await pilot.press("g", "space")  # play
        await pilot.pause(0.8)
        await pilot.press("space")  # pause
        moved = timeline.cursor
        assert moved >= 2
        await pilot.pause(0.5)
        assert timeline.cursor == moved  # paused: no more steps
        await pilot.press("escape")
        assert not isinstance(app.screen, ReplayScreen)


async def test_search_regex_jumps_to_matches(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        await pilot.press(*"size mismatch|injected")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ReplayScreen)
        hits = app.search_hits
        assert len(hits) >= 3
        timeline = app.screen.query_one(EventList)
        assert timeline.cursor == hits[0]
        await pilot.press("n")
        await pilot.pause()
        assert timeline.cursor == hits[1]
        await pilot.press("N")
        await pilot.pause()
        assert timeline.cursor == hits[0]


async def test_search_rejects_bad_regex_and_ctrl_f_opens_it(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+f")
        await pilot.press(*"([")
        await pilot.press("enter")
        await pilot.pause()
        err = plain(app.screen.query_one("#search-error"))
        assert "not a valid regular expression" in err
        await pilot.press("escape")
        assert app.search_hits == []


async def test_command_palette_reaches_views(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.press(*"Show Guards")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.query_one(CompileDetail).active == "guards"
        await pilot.press("ctrl+p")
        await pilot.press(*"Replay timeline")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ReplayScreen)


async def test_help_lists_bindings(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("f1")
        await pilot.pause()
        text = "\n".join(plain(s) for s in app.screen.query(Static))
        for needle in ("Replay", "Search", "ctrl+p", "j / k", "mouse"):
            assert needle in text
        await pilot.press("escape")
        assert app.screen.query_one(CompileTree)


async def test_mouse_selects_tree_node_and_tab(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.screen.query_one(CompileTree)
        # click the "0/1" leaf (line 4 of the tree: frame, 2/0, frame, 0/0, 0/1)
        await pilot.click(CompileTree, offset=(8, 4))
        await pilot.pause()
        assert tree.cursor_node.data.id == "0/1"
        await pilot.click("#detail-tabs Tab#--content-tab-recompiles")
        await pilot.pause()
        assert app.screen.query_one(CompileDetail).active == "recompiles"


async def test_replay_cursor_is_redrawn_when_the_timeline_is_scrolled(synthetic_trace):
    """A step inside the view repaints the old and new cursor lines, also once scrolled (the
    lines were refreshed at screen rows as if virtual ones: the highlight stayed behind)."""
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("r", "G")  # the last event: the timeline scrolls
        await pilot.pause()
        timeline = app.screen.query_one(EventList)
        top = round(timeline.scroll_offset.y)
        assert top > 0
        drawn = []
        draw = timeline.render_line
        timeline.render_line = lambda y: drawn.append(top + y) or draw(y)
        await pilot.press("k")  # one up: no scroll
        await pilot.pause()
        assert round(timeline.scroll_offset.y) == top
        assert {timeline.cursor, timeline.cursor + 1} <= set(drawn)
        assert list(timeline.render_line(timeline.cursor - top))[0].style.reverse


def rendered_text(widget) -> str:
    """Every line a widget renders (not only the part scrolled into view), as plain text."""
    from textual.geometry import Region

    return "\n".join(s.text for s in widget.render_lines(Region(0, 0, *widget.size)))


def screen_text(app) -> str:
    """What the terminal shows now (every layer: modal dialogs over the screen below)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def shown_of(app, widget) -> str:
    """The part of the terminal a widget covers (what of it is really on screen)."""
    r = widget.region
    return "\n".join(line[r.x:r.right] for line in screen_text(app).splitlines()[r.y:r.bottom])


def squeeze(text: str) -> str:
    return "".join(text.split())


async def test_bracket_keys_cycle_tabs(synthetic_trace):
    """'[' and ']' (as a terminal sends them: keys left/right_square_bracket) change tabs, as
    the help says; they were bound as 'bracketleft'/'bracketright', which Textual never sends."""
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        detail = app.screen.query_one(CompileDetail)
        await pilot.press("3")
        await pilot.press("]")
        await pilot.pause()
        assert detail.active == "guards"
        await pilot.press("[", "[")
        await pilot.pause()
        assert detail.active == "source"


async def test_help_shows_keys_as_typed_and_descriptions_beside_them(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("f1")
        await pilot.pause()
        lines = [line for s in app.screen.query(Static) for line in rendered_text(s).splitlines()]
        text = "\n".join(lines)
        assert "bracketleft" not in text and "[, h" in text and "], l" in text
        # the descriptions start in one column, next to the keys (not pushed to the far right)
        starts = {line.index(d) for line in lines for d in ("Help", "Replay", "Prev tab")
                  if line.strip().startswith(("f1", "r ", "[")) and d in line}
        assert len(starts) == 1 and starts.pop() < 30, text


async def test_search_dialog_shows_its_whole_hint(synthetic_trace):
    app = make_app(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        await pilot.pause()
        hint = app.screen.query("Label").first()
        shown = shown_of(app, hint)
        assert squeeze(str(hint.render())) == squeeze(
            "Search the trace (regular expression; enter: go, n/N: next/prev match)")
        assert squeeze(str(hint.render())) == squeeze(shown), shown
