"""The app never crashes on damaged traces: hypothesis picks truncations, byte flips and lost
payload lines; the app opens, walks every tab and the replay, and reports what it skipped."""

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracetorch.tui.app import TraceApp
from tracetorch.tui.paths import PathError, open_path
from tracetorch.tui.synthetic import write_synthetic_trace

_DIR = Path(tempfile.mkdtemp(prefix="tui_fuzz_"))
BASE = write_synthetic_trace(_DIR / "base.log", fail=True).read_bytes()


@st.composite
def damaged(draw):
    data = bytearray(BASE)
    kind = draw(st.sampled_from(["truncate", "flip", "drop_line"]))
    pos = draw(st.integers(0, len(data) - 1))
    if kind == "truncate":
        del data[pos:]
    elif kind == "flip":
        for p in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=8)):
            data[p] ^= 0x5A
    else:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        del data[start:len(data) if end < 0 else end + 1]
    return bytes(data)


async def walk(path: Path) -> None:
    try:
        o = open_path(str(path))
    except PathError:
        return  # damage so bad that nothing is a trace any more: a clear error, no crash
    app = TraceApp(o.trace, o.debug_dir, "fuzz")
    async with app.run_test(size=(120, 32)) as pilot:
        await pilot.pause()
        for key in ["j", "j", "2", "3", "4", "5", "6", "7", "8", "9", "1", "r", "j", "b", "c",
                    "x", "G", "escape", "exclamation_mark", "escape"]:
            await pilot.press(key)
        await pilot.pause()
    assert app.return_code in (None, 0)  # an exception inside the app would surface here


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_app_survives_damaged_traces(blob):
    path = _DIR / "trace_fuzz.log"
    path.write_bytes(blob)
    asyncio.run(walk(path))
