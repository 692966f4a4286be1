"""Issue 18 (1): a trace is untrusted input. Escape sequences in any of its strings (break
reason, guard text, kernel and function names, file names, payloads) must never reach the
terminal: not in `tracetui --summary`, not in the live UI (every tab, the replay, problems)."""

import json
import subprocess
import sys
from pathlib import Path

from tracetorch.logs.compile_ids import CompileId
from tracetorch.logs.sanitize import UNSAFE, clean
from tracetorch.logs.trace_writer import TraceWriter
from tracetorch.tui.app import TraceApp
from tracetorch.tui.model import TraceModel
from tracetorch.tui.paths import open_path
from tracetorch.tui.summary import summary_text
from tracetorch.tui.tabs import TAB_IDS

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"       # clipboard write
OSC2 = "\x1b]2;pwned title\x1b\\"               # window title
CURSOR = "\x1b[2A\x1b[2K\r"                      # up two lines, erase, carriage return
C1 = "\x9b31m\x9d0;x\x9c"                        # 8-bit CSI / OSC
EVIL = OSC52 + OSC2 + CURSOR + C1 + "\u202e" + "\x08\x7f"
MARKUP = "[link=https://evil.example]click[/link][bold]"


def hostile_trace(path: Path) -> Path:
    w = TraceWriter(path=str(path))

    def rec(key, meta, payload=None, cid=(0, 0), stack=None):
        if payload is not None and not isinstance(payload, str):
            payload = json.dumps(payload, indent=0)
        w.write(key, meta, payload, CompileId(*cid) if cid else None, f"x{EVIL}.py", 1, 0.0,
                stack)

    frame = {"line": 3, "name": f"fwd{EVIL}", "filename": f"/tmp/model{EVIL}.py",
             "loc": f"y = f(x){EVIL}"}
    rec("dynamo_start", {"stack": [frame]})
    rec("artifact", {"name": "graph_break", "encoding": "json"},
        {"reason": f"print(){EVIL}{MARKUP}", "instruction": f"CALL{EVIL}",
         "filename": f"/tmp/model{EVIL}.py", "lineno": 3, "source_line": f"print(x){EVIL}",
         "user_stack": [f"/tmp/model.py:3 in fwd: print(x){EVIL}"]})
    rec("dynamo_guards", {}, [{"code": f"L['x'].size(){EVIL}{MARKUP}",
                               "user_location": f"/tmp/m{EVIL}.py:3"}])
    rec("dynamo_output_graph", {}, f"def forward(self, x):{EVIL}\n    return x\n")
    rec("artifact", {"name": "kernel", "encoding": "json"},
        {"name": f"kern{EVIL}", "language": "cpp", "source": f"void k(){EVIL}{{}}",
         "provenance": [{"node": f"relu{EVIL}", "source": f"/tmp/model.py:3: y{EVIL}"}]})
    rec("inductor_output_code", {"filename": f"/tmp/out{EVIL}.py"}, f"# code {EVIL}\n")
    rec("artifact", {"name": "fusion_decision", "encoding": "json"},
        {"nodes": [f"a{EVIL}", "b"], "fused": False, "reason": f"no{EVIL}{MARKUP}"})
    rec("compilation_metrics", {"co_name": f"fwd{EVIL}", "co_filename": f"/tmp/model{EVIL}.py",
                                "co_firstlineno": 1, "fail_type": f"Err{EVIL}",
                                "fail_reason": f"boom{EVIL}{MARKUP}", "graph_op_count": 1,
                                "guard_count": f"3{MARKUP}"})
    rec("dynamo_start", {"stack": [frame]}, cid=(0, 1))
    rec("artifact", {"name": "guard_failure", "encoding": "json"},
        {"function": f"fwd{EVIL}", "cache_entry": "0/0",
         "reason": f"tensor 'x' size mismatch{EVIL}. expected 3{EVIL}, actual 4{MARKUP}"},
        cid=(0, 1))
    rec("recompile_reasons", {}, f"0/0: {EVIL}size mismatch\n{MARKUP}", cid=(0, 1))
    w.close()
    # a damaged record whose text the problems screen quotes, and a raw C1 byte in a payload
    with open(path, "a", encoding="utf-8") as f:
        f.write(f'V1122 12:00:00.000000 1 x.py:1] {{"{EVIL}": 1}}\n')
        f.write('V1122 12:00:00.000000 1 x.py:1] {"artifact": {"name": "raw\\u001b]2;t\\u0007", '
                f'"encoding": "string"}}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0, '
                f'"has_payload": "0"}}\n\tpayload {EVIL}\n')
    return path


def unsafe_in(text: str) -> list[str]:
    return sorted({repr(m.group()) for m in UNSAFE.finditer(text)})


def test_clean_makes_every_control_code_visible():
    out = clean(EVIL + "\nkeep\ttabs")
    assert not UNSAFE.search(out)
    assert "\\x1b]52;c;" in out and "\\x9b" in out and "\\u202e" in out
    assert out.endswith("\nkeep\ttabs")


def test_reader_cleans_envelopes_payloads_and_string_table(tmp_path):
    trace = open_path(str(hostile_trace(tmp_path / "t.log"))).trace
    for ev in trace.events:
        for text in (json.dumps(ev.metadata, ensure_ascii=False), ev.payload, ev.pathname,
                     json.dumps(ev.payload_json(), ensure_ascii=False),
                     json.dumps(ev.stack, ensure_ascii=False)):
            assert not unsafe_in(text), (ev, text)
    for line, why in trace.skipped + trace.damaged:
        assert not unsafe_in(why)


def test_summary_prints_no_escape_sequences(tmp_path):
    path = hostile_trace(tmp_path / "t.log")
    text = summary_text(TraceModel(open_path(str(path)).trace), "t")
    assert "print()" in text and not unsafe_in(text)
    proc = subprocess.run([sys.executable, "-m", "tracetorch.tui.cli", "--summary", str(path)],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for bad in (b"\x1b", b"\x07", b"\xc2\x9b", b"\xc2\x9d", b"\r", b"\x08"):
        assert bad not in proc.stdout, bad
    assert b"\\x1b]52;c;" in proc.stdout  # shown, visibly


def screen_segments(app):
    """What the app would write to the terminal now: every segment of the full screen."""
    update = app.screen._compositor.render_full_update()
    for line in update.strips:
        for strip in line:
            yield from strip


def assert_screen_safe(app, where: str):
    text = []
    for seg in screen_segments(app):
        text.append(seg.text)
        assert not (seg.style and seg.style.link), f"{where}: a hyperlink from the trace"
        assert not seg.control, where
    bad = unsafe_in("".join(text))
    assert not bad, f"{where}: {bad}"


async def test_live_ui_shows_no_escape_sequences(tmp_path):
    o = open_path(str(hostile_trace(tmp_path / "t.log")))
    app = TraceApp(o.trace, o.debug_dir, "t")
    async with app.run_test(size=(150, 45)) as pilot:
        await pilot.pause()
        for compile_keys in ([], ["j"]):
            await pilot.press(*compile_keys)
            for n, tab in enumerate(TAB_IDS, 1):
                app.action_show_tab(tab)
                await pilot.pause()
                await pilot.pause()
                assert_screen_safe(app, f"tab {tab}")
        await pilot.press("r")
        await pilot.pause()
        for _ in range(14):
            await pilot.press("j")
            await pilot.pause()
            assert_screen_safe(app, f"replay at {app.screen.cursor}")
        await pilot.press("escape", "exclamation_mark")
        await pilot.pause()
        assert_screen_safe(app, "problems")
