"""Issue 18 (8): what was generated for this source line, on PyTorch's trace: kernels read out
of inductor's output code and tied to user lines through the post-grad graph's `# File:`
comments (or a provenance mapping), both ways in the UI. A real torch.compile run (inductor)."""

from textual.widgets import OptionList

from tracetorch.tui.app import TraceApp
from tracetorch.tui.model import TraceModel
from tracetorch.tui.paths import open_path
from tracetorch.tui import extract as X


def test_output_code_kernels_link_to_user_lines(inductor_torch_trace):
    m = TraceModel(open_path(str(inductor_torch_trace)).trace)
    (c,) = m.compiles.values()
    assert c.kernel_count == 1
    (k,) = [k for k in c.kernels if not k.module]
    assert k.name.startswith("cpp_fused_") and "kernel(" in k.code
    assert {"sin", "relu", "mul"} <= set(k.fx_nodes)
    assert [ln for _, ln in k.user_lines] == [5, 6, 7]
    assert m.totals.kernels == 1


def test_provenance_mapping_wins_over_names():
    code = ("cpp_fused_a_0 = async_compile.cpp_pybinding(['float*'], r'''\nvoid kernel() {}\n''')\n")
    nodes = {"relu": ("/u/p.py", 9, "y = relu(x)")}
    (k,) = X.output_code_kernels(code, nodes, {"cpp_fused_a_0": ["relu"]})
    assert k.fx_nodes == ["relu"] and k.user_lines == [("/u/p.py", 9)]


async def test_source_line_to_kernel_and_back(inductor_torch_trace):
    o = open_path(str(inductor_torch_trace))
    app = TraceApp(o.trace, o.debug_dir, "t")
    async with app.run_test(size=(130, 36)) as pilot:
        await pilot.pause()
        await pilot.press("2", "tab")
        await pilot.pause()
        src = app.screen.query_one("#pane-source")
        src.goto_line(6)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        detail = app.screen.query_one("#detail")
        assert detail.active == "kernels"
        klist = app.screen.query_one("#kernel-list", OptionList)
        assert str(klist.get_option_at_index(klist.highlighted).prompt).startswith("cpp_fused_")
        await pilot.press("enter")                      # and back to the source line
        await pilot.pause()
        assert detail.active == "source"


def test_provenance_records_give_nodes_and_stack_lines(inductor_provenance_trace):
    m = TraceModel(open_path(str(inductor_provenance_trace)).trace)
    (c,) = m.compiles.values()
    assert c.provenance >= 0 and c.kernel_traces >= 0
    (k,) = [k for k in c.kernels if not k.module]
    assert sorted(k.fx_nodes) == ["add", "mul", "relu", "sin", "sum_1"]
    assert sorted(ln for _, ln in k.user_lines) == [5, 6, 7]
