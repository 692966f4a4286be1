"""Issue 18 (4, 9, 12): where did it break, when capture gives up on a frame (a break inside a
loop) or a crash cuts a compile off; every break reason with an id, an explanation and hints.
Real traces of torch.compile and compiler.compile (subprocesses)."""

import subprocess
import sys

from textual.widgets import OptionList, Static

from tracetorch.logs.break_reasons import REGISTRY, explain, registry_text
from tracetorch.tui.app import TraceApp
from tracetorch.tui.model import CRASHED, FAILED, OK, SKIPPED, TraceModel
from tracetorch.tui.paths import open_path
from tracetorch.tui.summary import summary_text

from test_app import plain


def model_of(path):
    return TraceModel(open_path(str(path)).trace)


def test_break_inside_a_loop_is_a_skipped_frame_in_both_traces(loop_break_traces):
    for which, rid in (("ours", "TT-GB-101"), ("torch", "GB0170")):
        m = model_of(loop_break_traces[which])
        (c,) = m.compiles.values()
        assert c.outcome == SKIPPED and FAILED not in c.flags and "empty graph" not in c.flags
        (b,) = c.breaks
        assert b.lineno == 7 and "sum() > 0" in b.source_line and b.frame_skipped
        assert b.reason_id == rid and b.explanation and b.hints
        text = summary_text(m, which)
        assert "Traceback (most recent call last)" not in text
        assert "frame skipped: capture gave up on this function, it runs eagerly" in text
        assert f"prog.py:7 [{rid}]" in text


async def test_skipped_frame_in_the_ui(loop_break_traces):
    for which in ("ours", "torch"):
        o = open_path(str(loop_break_traces[which]))
        app = TraceApp(o.trace, o.debug_dir, which)
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            await pilot.press("3")                     # Graph breaks
            await pilot.pause()
            text = plain(app.screen.query_one("#pane-breaks #body", Static))
            assert "Capture gave up on this frame" in text and "hint" in text and "why" in text
            await pilot.press("2")                     # Source: nothing marked as captured
            await pilot.pause()
            lines = app.screen.query_one("#pane-source #src-lines", OptionList)
            rows = [str(lines.get_option_at_index(i).prompt) for i in range(lines.option_count)]
            assert rows and not any(r.startswith("▌") for r in rows), rows
            assert any("✖" in r and "if x.sum() > 0:" in r for r in rows)


def test_crash_cuts_off_a_compile_which_shows_as_crashed(crash_traces):
    for which in ("ours", "torch"):
        m = model_of(crash_traces[which])
        by_name = {c.display_name: c for c in m.compiles.values()}
        assert set(by_name) == {"g", "h"}, by_name            # named after the function
        assert by_name["g"].outcome == OK
        assert by_name["h"].outcome == CRASHED and by_name["h"].crashed
        assert m.frames[0].name == "h"                          # the worst offender first
        text = summary_text(m, which)
        assert "crashed" in text and "cut off" in text


def test_registry_gives_every_reason_an_id_explanation_and_hints():
    ids = [r.id for r in REGISTRY]
    assert len(ids) == len(set(ids)) and ids[-1] == "TT-GB-000"
    assert all(r.explanation and r.hints for r in REGISTRY)
    assert explain("print() (a side effect outside the graph)").id == "TT-GB-001"
    assert explain("bool() of a tensor (data-dependent control flow)").id == "TT-GB-002"
    assert explain("bool() of a tensor (data-dependent control flow) (graph break inside a loop; "
                   "the rest runs eagerly from line 5 on)").frame_skipped
    assert explain("something new").id == "TT-GB-000"
    out = subprocess.run([sys.executable, "-m", "tracetorch.logs.break_reasons"],
                         capture_output=True, text=True, timeout=60).stdout
    assert out == registry_text() + "\n" and "TT-GB-101" in out
