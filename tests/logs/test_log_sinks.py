"""Sinks (the debug folder's consumers), compile ids and the Event they receive."""
import logging
import threading

import pytest

from tracetorch import logs


def test_compile_id_str_parse_and_folder_name():
    assert str(logs.CompileId(0, 1)) == "0/1"
    assert str(logs.CompileId(0, 1, 2)) == "0/1_2"
    assert logs.CompileId.parse("[0/1_2]") == logs.CompileId(0, 1, 2)
    assert logs.CompileId(3, 4, 1).folder_name == "3_4_1"
    with pytest.raises(ValueError, match="not a compile id"):
        logs.CompileId.parse("zero/one")


def test_compile_context_nests_and_restores():
    assert logs.current_compile_id() is None
    with logs.compile_context(1, 0) as outer:
        assert logs.current_compile_id() == outer == logs.CompileId(1, 0, 0)
        with logs.compile_context(1, 0, attempt=1):
            assert str(logs.current_compile_id()) == "1/0_1"
        assert logs.current_compile_id() == outer
    assert logs.current_compile_id() is None


def test_compile_id_is_per_thread():
    seen = []
    with logs.compile_context(5, 0):
        t = threading.Thread(target=lambda: seen.append(logs.current_compile_id()))
        t.start()
        t.join()
    assert seen == [None]


def test_default_sink_gets_every_artifact_and_console_level_logs(fresh_logs, capsys):
    events = []
    logs.add_sink(events.append)
    assert logs.enabled("kernel") and logs.enabled("output_code")
    logs.artifact("kernel", lambda: {"name": "k0"})
    logs.get_logger("compiler.backend.sink_probe").debug("hidden_at_console_level")
    logs.get_logger("compiler.backend.sink_probe").warning("shown")
    assert [e.name for e in events] == ["kernel", "shown"]
    assert "kernel" not in capsys.readouterr().err       # the console does not show it
    logs.remove_sink(events.append)
    assert not logs.enabled("kernel")


def test_sink_following_console_gets_enabled_events_only(fresh_logs):
    events = []
    logs.add_sink(events.append, artifacts=None)
    log = logs.get_logger("compiler.frontend.sink_probe")
    log.debug("nope")
    logs.artifact("guards", lambda: "g")
    assert events == []
    logs.set_logs(frontend=logging.DEBUG)           # guards is not off by default
    with logs.compile_context(0, 2):
        log.debug("yes", n=1)
        logs.artifact("guards", lambda: "g", count=1)
    assert [(e.kind, e.name, str(e.compile_id)) for e in events] == [
        ("log", "yes", "0/2"), ("artifact", "guards", "0/2")]
    log_event, art = events
    assert log_event.fields == {"n": 1} and log_event.level == logging.DEBUG
    assert log_event.logger == "compiler.frontend.sink_probe" and log_event.component == "frontend"
    assert log_event.pathname.endswith("test_log_sinks.py") and log_event.lineno > 0
    assert art.payload == "g" and art.fields == {"count": 1} and art.time > 0


def test_debug_sink_gets_every_component_at_debug_and_every_artifact(fresh_logs, capsys):
    events = []
    logs.add_sink(events.append, level=logging.DEBUG, artifacts="all")
    logs.get_logger("compiler.backend.sink_probe").debug("scheduled", nodes=3)
    logs.get_logger("compiler.aot.sink_probe").info("partitioned")
    logs.artifact("output_code", lambda: "code")
    logs.artifact("graph_break", lambda: {"reason": "print"})     # trace-only records too
    assert [e.name for e in events] == ["scheduled", "partitioned", "output_code", "graph_break"]
    assert capsys.readouterr().err == ""            # the console stays quiet
    logs.remove_sink(events.append)
    logs.get_logger("compiler.backend.sink_probe").debug("after")
    assert len(events) == 4 and not logs.enabled("output_code")


def test_sink_asking_for_named_artifacts(fresh_logs):
    events = []
    logs.add_sink(events.append, artifacts=["recompile"])
    assert logs.enabled("recompile") and not logs.enabled("graph_break")
    logs.artifact("recompile", lambda: {"reasons": ["x"]})
    logs.artifact("graph_break", lambda: {"reason": "y"})
    assert [e.payload for e in events] == [{"reasons": ["x"]}]


def test_a_failing_sink_warns_and_does_not_break_emission(fresh_logs):
    good = []

    def bad(event):
        raise RuntimeError("sink broke")

    logs.add_sink(bad, artifacts="all")
    logs.add_sink(good.append, artifacts="all")
    with pytest.warns(RuntimeWarning, match="sink broke"):
        logs.artifact("kernel", lambda: {"name": "k0"})
    assert len(good) == 1


def test_a_failing_payload_builder_warns_and_does_not_raise_into_the_compiler(fresh_logs):
    events = []
    logs.add_sink(events.append)

    def broken():
        raise ValueError("cannot render")

    with pytest.warns(RuntimeWarning, match="payload of 'guards' raised ValueError: cannot render"):
        logs.artifact("guards", broken)
    assert events[0].payload == "<payload of guards could not be built: ValueError: cannot render>"


def test_per_instruction_artifacts_only_when_named_or_asked_for_by_a_sink(fresh_logs, tmp_path):
    trace = tmp_path / "t.log"
    logs.open_trace(str(trace))
    assert logs.enabled("graph_break") and not logs.enabled("trace_bytecode")
    events = []
    logs.add_sink(events.append)                       # artifacts="all": every name
    logs.artifact("trace_bytecode", lambda: "TRACE LOAD_FAST x")
    logs.artifact("graph_break", lambda: {"reason": "r"})
    assert [e.name for e in events] == ["trace_bytecode", "graph_break"]
    # not named: kept out of the trace
    assert "LOAD_FAST" not in trace.read_text() and "graph_break" in trace.read_text()
    logs.set_logs(trace_bytecode=True)
    logs.artifact("trace_bytecode", lambda: "TRACE LOAD_FAST y")
    assert "LOAD_FAST y" in trace.read_text()


def test_compile_id_scope_tags_events_without_counting_a_compile():
    """Run-time decisions of a compiled graph (a CUDA graph recorded) carry the id of the compile
    that made it; entering the scope is not another start of that compile."""
    import logging

    from tracetorch import logs
    from tracetorch.logs.compile_ids import CompileId, compile_serial
    cid = CompileId(3, 1)
    with logs.testing.capture(names={"scoped"}, level=logging.INFO) as events:
        with logs.compile_context(3, 1):
            pass
        before = compile_serial(cid)
        with logs.compile_id_scope(cid):
            logs.get_logger("tracetorch.test").info("scoped")
        with logs.compile_id_scope(None):
            logs.get_logger("tracetorch.test").info("scoped")
    assert [e.compile_id for e in events] == [cid, None]
    assert compile_serial(cid) == before
