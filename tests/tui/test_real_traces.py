"""tracetui on real traces: a PyTorch TORCH_TRACE log and a debug run of our own compiler."""

from textual.widgets import OptionList

from tracetorch.tui.app import TraceApp
from tracetorch.tui.model import TraceModel
from tracetorch.tui.paths import open_path
from tracetorch.tui.summary import summary_text
from tracetorch.tui.widgets.compile_detail import CompileDetail
from tracetorch.tui.widgets.compile_tree import CompileTree

SIZE = (140, 40)


def test_pytorch_trace_model(torch_trace):
    o = open_path(str(torch_trace.parent))  # the folder, as TORCH_TRACE leaves it
    m = TraceModel(o.trace)
    assert [f.name for f in m.frames] == ["f", "f (resume at line 6)"]  # issue 18 (11)
    f0 = m.frames[0]
    assert [c.id for c in f0.compiles] == ["0/0", "0/1"]
    c00, c01 = f0.compiles
    assert sorted(c00.attempts) == [0, 1]  # restarted after the graph break
    assert "print" in c00.breaks[0].reason and c00.breaks[0].lineno == 6
    assert c00.guards and c00.graphs and c00.stages
    (gf,) = c01.recompile_reasons
    assert (gf.entry, gf.expected, gf.actual) == ("0/0", "1", "2")
    resume = m.frames[1].compiles[1]
    assert resume.recompile_reasons[0].text.startswith("tensor 'y' rank mismatch")
    text = summary_text(m, "t")
    assert ("recompile: tensor 'y' rank mismatch; changed 1 → 2 (guard from "
            "/fixtures/torch/prog.py:7") in text and "[entries 1/0]" in text


async def test_pytorch_trace_source_marks_break_and_guard_lines(torch_trace):
    o = open_path(str(torch_trace))
    app = TraceApp(o.trace, o.debug_dir, "t")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        lines = app.screen.query_one("#src-lines", OptionList)
        prompts = [str(lines.get_option_at_index(i).prompt) for i in range(lines.option_count)]
        assert prompts[0].split()[1:] == ["4", "def", "f(x):"]
        brk = next(p for p in prompts if 'print("break")' in p)
        assert "✖" in brk and brk.split()[0] == "6"


def test_our_compiler_debug_run(our_debug_run):
    o = open_path(str(our_debug_run))
    assert o.debug_dir == our_debug_run
    m = TraceModel(o.trace, o.debug_dir)
    assert not o.trace.skipped and not o.trace.damaged
    f = m.frames[0]
    assert f.name == "f" and [c.id for c in f.compiles] == ["0/0", "0/1"]
    c00, c01 = f.compiles
    assert "print" in c00.breaks[0].reason and c00.breaks[0].lineno == 6
    assert c00.kernel_count >= 1 and c00.guards and c00.graphs
    assert any(k.code for k in c00.kernels)
    assert c01.recompile_reasons and "rank mismatch" in c01.recompile_reasons[0].text
    assert m.source_of(c00)[2][0].startswith("def f(")


async def test_our_compiler_debug_run_in_app(our_debug_run):
    o = open_path(str(our_debug_run))
    app = TraceApp(o.trace, o.debug_dir, "run")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.screen.query_one(CompileTree)
        assert tree.root.children[0].data.name == "f"
        detail = app.screen.query_one(CompileDetail)
        await pilot.press("j", "8")
        await pilot.pause()
        assert detail.active == "kernels"
        assert app.screen.query_one("#kernel-list", OptionList).option_count >= 2
        await pilot.press("r", "c")
        await pilot.pause()
        assert detail is not app.screen.query_one(CompileDetail)
        assert app.screen.query_one(CompileDetail).active == "recompiles"


async def test_our_compiler_kernels_and_source_lines_link_both_ways(our_debug_run):
    """Kernel records of our backend carry provenance ("prog.py:5: y = torch.sin(x) + 1"):
    a source line lists its kernels, enter opens them; enter on a kernel goes back."""
    from textual.widgets import Static

    from test_app import plain, select

    o = open_path(str(our_debug_run))
    app = TraceApp(o.trace, o.debug_dir, "run")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await select(pilot, app, "0/0")
        c00 = app.model.compiles[(0, 0)]
        (kern,) = [k for k in c00.kernels if not k.module]
        assert kern.user_lines == [("prog.py", 5)] and "sin" in kern.fx_nodes
        await pilot.press("2")
        await pilot.pause()
        detail = app.screen.query_one(CompileDetail)
        lines = app.screen.query_one("#src-lines", OptionList)
        prompts = [str(lines.get_option_at_index(i).prompt) for i in range(lines.option_count)]
        row = prompts.index(next(p for p in prompts if "torch.sin(x) + 1" in p))
        words = prompts[row].split()  # "▌  5 GK y = ...": captured, line 5, guard and kernel marks
        assert words[:2] == ["▌", "5"] and "K" in words[2]
        lines.focus()
        lines.highlighted = row
        await pilot.pause()
        assert f"kernel: {kern.name}" in plain(app.screen.query_one("#src-info", Static))
        await pilot.press("enter")  # source line -> its kernels
        await pilot.pause()
        assert detail.active == "kernels"
        klist = app.screen.query_one("#kernel-list", OptionList)
        assert kern.name in str(klist.get_option_at_index(klist.highlighted).prompt)
        assert "prog.py:5" in plain(app.screen.query_one("#kernel-code", Static))
        klist.focus()
        await pilot.press("enter")  # kernel -> its source line
        await pilot.pause()
        assert detail.active == "source" and lines.highlighted == row


async def test_long_code_lines_are_wrapped_not_cut(our_debug_run):
    """Every character of a generated kernel shows in the Kernels tab: a line wider than the
    pane (#pragma omp ... if(parallel: 3 >= 32768)) wraps instead of being cut at the edge
    (the pane scrolls vertically only)."""
    from textual.widgets import Static

    from test_app import rendered_text, squeeze

    o = open_path(str(our_debug_run))
    app = TraceApp(o.trace, o.debug_dir, "run")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        await pilot.press("8")
        await pilot.pause()
        kern = app.model.compiles[(0, 0)].kernels[0]
        shown = squeeze(rendered_text(app.screen.query_one("#kernel-code", Static)))
        assert any(len(line) > 60 for line in kern.code.splitlines())
        for line in kern.code.splitlines():
            assert squeeze(line) in shown, line
