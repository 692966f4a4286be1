"""Hypothesis fuzzing of the trace reader: truncations, byte flips, dropped payload lines and
stray text never make it raise, and every record is either read or reported as skipped."""

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracetorch.logs.trace_reader import read_trace
from tracetorch.tui.model import TraceModel
from tracetorch.tui.summary import summary_text
from tracetorch.tui.synthetic import write_synthetic_trace

_DIR = Path(tempfile.mkdtemp(prefix="trace_fuzz_"))
BASE = write_synthetic_trace(_DIR / "base.log", fail=True).read_bytes()


@st.composite
def damaged(draw):
    data = bytearray(BASE)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "drop_line", "garbage", "dup_line"]))
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            del data[pos:]
        elif kind == "flip":
            data[pos] ^= draw(st.integers(1, 255))
        else:
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end + 1
            if kind == "drop_line":  # e.g. a payload line lost: md5 mismatch
                del data[start:end]
            elif kind == "dup_line":
                data[start:start] = data[start:end]
            else:
                data[start:start] = draw(st.binary(max_size=40)) + b"\n"
    return bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_reader_never_raises_and_accounts_for_every_record(blob):
    path = _DIR / "trace_fuzz.log"
    path.write_bytes(blob)
    t = read_trace(path)
    raw = len(t.raw_events)
    t.scan()
    assert len(t.events) + len(t.skipped) == raw
    for line, why in t.skipped + t.damaged:
        assert isinstance(line, int) and line >= 1 and why
    for ev in t.events:  # everything a viewer touches works on what was kept
        assert isinstance(ev.key, str) and ev.key
        assert isinstance(ev.payload, str)
        ev.payload_json(), ev.stack, ev.compile_id
    model = TraceModel(t)  # and the model and the summary built on it
    assert summary_text(model, "fuzz").startswith("trace: fuzz")


def test_undamaged_trace_has_no_problems():
    path = _DIR / "trace_clean.log"
    path.write_bytes(BASE)
    t = read_trace(path)
    assert t.skipped == [] and t.damaged == [] and len(t.events) == len(t.raw_events)


FIELDS = ("index", "lineno", "key", "compile_id", "payload_ok", "level", "time", "pid",
          "pathname", "source_line", "envelope", "metadata", "payload", "error")


def read_all(path, fast: bool):
    """Every event's fields, skipped and damaged; with `scan`'s fast path on or off."""
    import tracetorch.logs.trace_reader as reader

    saved = reader._FAST_HEADER
    if not fast:
        reader._FAST_HEADER = type("Never", (), {"fullmatch": staticmethod(lambda *a: None)})
    try:
        t = read_trace(path)
        t.scan()
        # key and compile id first: reading the others parses the envelope again
        return [tuple(getattr(e, f) for f in FIELDS) for e in t.events], t.skipped, t.damaged
    finally:
        reader._FAST_HEADER = saved


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_fast_header_path_reads_exactly_what_the_exact_path_reads(blob):
    path = _DIR / "trace_fast.log"
    path.write_bytes(blob)
    assert read_all(path, fast=True) == read_all(path, fast=False)


def test_fast_header_path_takes_the_common_records():
    import tracetorch.logs.trace_reader as reader

    heads = [line.encode() for line in BASE.decode().split("\n") if line and line[0] != "\t"]
    fast = [h for h in heads if reader._FAST_HEADER.fullmatch(h)]
    assert len(fast) > len(heads) // 2  # artifacts with a compile id and an md5 take it
    assert all(b'"stack": [' not in h for h in fast)  # nested lists: the exact path
