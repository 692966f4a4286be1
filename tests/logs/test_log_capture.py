"""logs.testing.capture: the events a block emits, filtered, with the sink always removed."""
import logging

import pytest

from tracetorch import logs


def test_capture_collects_every_artifact_by_default_and_removes_its_sink(fresh_logs):
    with logs.testing.capture() as events:
        assert logs.enabled("kernel")
        logs.artifact("kernel", lambda: {"name": "k0"})
        logs.artifact("graph_break", lambda: {"reason": "print"})
    assert [e.name for e in events] == ["kernel", "graph_break"]
    assert not logs.enabled("kernel")
    logs.artifact("kernel", lambda: {"name": "k1"})
    assert len(events) == 2                     # the list keeps what it got, nothing more


def test_capture_by_names_asks_only_for_those_artifacts(fresh_logs):
    built = []
    with logs.testing.capture(names={"recompile"}) as events:
        assert logs.enabled("recompile") and not logs.enabled("graph_break")
        logs.artifact("recompile", lambda: {"reasons": ["x"]})
        logs.artifact("graph_break", lambda: built.append("graph_break"))
    assert [e.payload for e in events] == [{"reasons": ["x"]}]
    assert built == []                          # no payload built for a name nobody wants


def test_capture_by_levels_and_a_debug_level_sink(fresh_logs):
    log = logs.get_logger("compiler.backend.capture_probe")
    with logs.testing.capture(levels={logging.WARNING}, level=logging.DEBUG) as events:
        log.debug("scheduled")
        log.warning("fell_back", op="aten.foo")
        log.info("partitioned")
    assert [(e.name, e.fields) for e in events] == [("fell_back", {"op": "aten.foo"})]


def test_capture_names_with_explicit_artifacts_keeps_the_sink_request(fresh_logs):
    with logs.testing.capture(names={"output_code"}, artifacts="all") as events:
        assert logs.enabled("kernel")           # asked for everything, keeps one name
        logs.artifact("kernel", lambda: {"name": "k0"})
        logs.artifact("output_code", lambda: "code")
    assert [e.payload for e in events] == ["code"]


def test_capture_removes_its_sink_when_the_block_raises(fresh_logs):
    with pytest.raises(RuntimeError, match="boom"):
        with logs.testing.capture() as events:
            logs.artifact("kernel", lambda: {"name": "k0"})
            raise RuntimeError("boom")
    assert [e.name for e in events] == ["kernel"]
    assert not logs.enabled("kernel")


def test_nested_captures_are_separate(fresh_logs):
    with logs.testing.capture(names={"kernel"}) as outer:
        with logs.testing.capture(names={"kernel"}) as inner:
            logs.artifact("kernel", lambda: {"name": "k0"})
        logs.artifact("kernel", lambda: {"name": "k1"})
    assert [e.payload["name"] for e in inner] == ["k0"]
    assert [e.payload["name"] for e in outer] == ["k0", "k1"]
