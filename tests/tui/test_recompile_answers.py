"""Issue 18 (3): why did it recompile? The failing guard first, the changed value and the user
line that created the guard, each reason once; PyTorch's multi-line reasons kept whole; the
summary concise. On real traces of torch.compile and compiler.compile."""

from tracetorch.tui.app import TraceApp
from tracetorch.tui.model import TraceModel
from tracetorch.tui.paths import open_path
from tracetorch.tui.summary import summary_text


def model_of(path):
    return TraceModel(open_path(str(path)).trace)


def compile_(model, cid):
    return next(c for c in model.compiles.values() if c.id == cid)


def test_pytorch_multiline_reasons_are_one_reason_each(value_recompile_traces):
    m = model_of(value_recompile_traces["torch"])
    c1 = compile_(m, "0/1")
    assert len(c1.recompile_reasons) == 1          # not "User stack trace:" / "File ..." rows
    gf = c1.reasons[0].first
    assert gf.guard == "scale == 0.5" and gf.entry == "0/0"
    assert gf.user_location.endswith("prog.py:11") and gf.user_code == "y = self.lin(x) * scale"
    c2 = compile_(m, "0/2")
    assert [g.entry for g in c2.recompile_reasons] == ["0/1", "0/0"]
    new = [r for r in c2.reasons if not r.seen_before]
    assert [r.first.guard for r in new] == ["self.training_flag == True"]
    assert new[0].first.user_location.endswith("prog.py:12")
    assert [r.seen_before for r in c2.reasons if r.seen_before] == ["0/1"]


def test_our_reasons_name_the_guards_user_line(value_recompile_traces):
    m = model_of(value_recompile_traces["ours"])
    gf = compile_(m, "0/1").reasons[0].first
    # the writer's guard_location, not a guess from the guard list
    assert gf.user_location.endswith("prog.py:11"), gf.user_location
    assert gf.user_code == "y = self.lin(x) * scale"
    assert (gf.expected, gf.actual, gf.change) == ("0.5", "0.7", "0.5 → 0.7")
    c2 = compile_(m, "0/2")
    first = c2.reasons[0]
    assert first.first.guard == "L['self'].training_flag == True" and not first.seen_before
    assert first.first.change == "True → False" and first.entries == ["0/1", "0/0"]
    assert first.first.user_location.endswith("prog.py:12")


def test_summary_is_concise_and_does_not_repeat_older_entries(value_recompile_traces):
    for which in ("torch", "ours"):
        text = summary_text(model_of(value_recompile_traces[which]), which)
        lines = [ln for ln in text.splitlines() if "recompile:" in ln]
        assert len(lines) == 2, text               # one new reason per recompile
        assert "0.5" in lines[0] and "prog.py:11" in lines[0] and "self.lin(x) * scale" in lines[0]
        assert "training_flag" in lines[1] and "prog.py:12" in lines[1]
        assert "(+1 older reason already listed above)" in text
        assert "User stack trace" not in text


async def test_recompiles_tab_shows_guard_change_and_user_line(value_recompile_traces):
    from textual.widgets import Static
    from test_app import plain

    for which in ("torch", "ours"):
        o = open_path(str(value_recompile_traces[which]))
        app = TraceApp(o.trace, o.debug_dir, which)
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            await pilot.press("j", "j", "j", "5")    # frame -> 0/0 -> 0/1 -> 0/2, Recompiles
            await pilot.pause()
            text = plain(app.screen.query_one("#pane-recompiles #body", Static))
            assert "1 new reason" in text, text
            assert text.index("training_flag") < text.index("== 0.5"), text
            assert "prog.py:12" in text and "if self.training_flag:" in text
            assert "already why 0/1 recompiled" in text
