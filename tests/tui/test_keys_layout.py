"""Issue 18 (11): keyboard and layout: Tab from the tree goes into the tab's content, j/k move in
lists, Enter on a line without kernels says so, ? opens help, every tab has a number key and is
on screen, tree labels cut with an ellipsis, the kernel line visible in the line-info panel,
resume frames named after their line and their captured range right."""

from textual.widgets import OptionList, Static, Tabs
from textual.widgets._tabs import Tab

from tracetorch.tui.app import TraceApp
from tracetorch.tui.paths import open_path
from tracetorch.tui.screens.help import HelpScreen
from tracetorch.tui.tabs import TAB_IDS
from tracetorch.tui.widgets.compile_detail import CompileDetail
from tracetorch.tui.widgets.compile_tree import CompileTree

from test_app import select, visible_text

SIZE = (130, 36)   # the snapshots' size


def app_for(path):
    o = open_path(str(path))
    return TraceApp(o.trace, o.debug_dir, "t")


async def test_tab_moves_between_tree_and_content_never_the_tab_bar(synthetic_trace):
    app = app_for(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await select(pilot, app, "0/0")
        await pilot.press("2")                      # Source: a list
        await pilot.pause()
        assert isinstance(app.focused, CompileTree)
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused.id == "src-lines" and not isinstance(app.focused, Tabs)
        await pilot.press("tab")
        await pilot.pause()
        assert isinstance(app.focused, CompileTree)
        await pilot.press("shift+tab")
        await pilot.pause()
        assert app.focused.id == "src-lines"


async def test_j_k_move_in_lists(synthetic_trace):
    app = app_for(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await select(pilot, app, "0/0")
        await pilot.press("2", "tab")
        await pilot.pause()
        lines = app.screen.query_one("#src-lines", OptionList)
        await pilot.press("j")                       # (the first key also shows the cursor)
        start = lines.highlighted
        await pilot.press("j", "j")
        assert lines.highlighted == start + 2
        await pilot.press("k")
        assert lines.highlighted == start + 1
        await pilot.press("8")                       # Kernels: focus follows into its list
        await pilot.pause()
        klist = app.screen.query_one("#kernel-list", OptionList)
        assert app.focused is klist
        before = klist.highlighted
        await pilot.press("j")
        assert klist.option_count < 2 or klist.highlighted == before + 1


async def test_enter_on_a_line_without_kernels_says_so(synthetic_trace):
    app = app_for(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await select(pilot, app, "0/0")
        await pilot.press("2", "tab")
        await pilot.pause()
        lines = app.screen.query_one("#src-lines", OptionList)
        lines.highlighted = 0                        # the def line: nothing generated from it
        await pilot.press("enter")
        await pilot.pause()
        assert any("No kernel was generated from line" in str(n.message)
                   for n in app._notifications)
        assert app.screen.query_one(CompileDetail).active == "source"   # stays on the line


async def test_question_mark_opens_help(synthetic_trace):
    app = app_for(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_every_tab_has_a_number_key_and_is_on_screen(synthetic_trace):
    app = app_for(synthetic_trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        detail = app.screen.query_one(CompileDetail)
        for n, tab_id in enumerate(TAB_IDS, 1):
            await pilot.press(str(n % 10))
            await pilot.pause()
            assert detail.active == tab_id
        for tab in app.screen.query(Tab):
            r = tab.region
            assert r.width and r.right <= SIZE[0], (tab.label, r)


async def test_cut_tree_labels_end_with_an_ellipsis(synthetic_trace):
    app = app_for(synthetic_trace)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        tree = app.screen.query_one(CompileTree)
        text = visible_text(tree)
        assert "…" in text, text


async def test_kernel_line_stays_visible_in_the_line_info_panel(our_debug_run):
    o = open_path(str(our_debug_run))
    app = TraceApp(o.trace, o.debug_dir, "run")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("2", "tab")
        await pilot.pause()
        pane = app.screen.query_one("#pane-source")
        line = next(ln for ln, f in pane.facts.items() if f["kernels"])
        pane.goto_line(line)
        await pilot.pause()
        info = app.screen.query_one("#src-info", Static)
        assert "kernel:" in visible_text(info), visible_text(info)


async def test_resume_frame_named_after_its_line_with_its_captured_range(torch_trace):
    o = open_path(str(torch_trace))
    app = TraceApp(o.trace, o.debug_dir, "t")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.screen.query_one(CompileTree)
        labels = [str(n.label) for n in tree.root.children]
        assert any(lbl.startswith("[1] f (resume at line 6)") for lbl in labels), labels
        await select(pilot, app, "1/0")
        await pilot.press("2")
        await pilot.pause()
        lines = app.screen.query_one("#src-lines", OptionList)
        rows = {int(str(lines.get_option_at_index(i).prompt)[1:6]): str(lines.get_option_at_index(i).prompt)
                for i in range(lines.option_count)}
        assert not rows[5].startswith("▌") and rows[6].startswith("▌"), rows
