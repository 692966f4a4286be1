"""Disabled means free: no payload built, no message formatted (proved by counting calls)."""
import logging

from tracetorch import logs
from tracetorch.logs import bound


class Counter:
    def __init__(self, value="payload"):
        self.calls, self.value = 0, value

    def __call__(self):
        self.calls += 1
        return self.value


class Loud:
    """A field value whose formatting is counted: a disabled log call must never format it."""
    formatted = 0

    def __repr__(self):
        Loud.formatted += 1
        return "Loud()"

    __str__ = __repr__


def test_disabled_artifact_builds_no_payload(fresh_logs, capsys):
    builder = Counter()
    for _ in range(100):
        logs.artifact("output_code", builder, filename="x.py")
    assert builder.calls == 0
    assert not logs.enabled("output_code")
    assert capsys.readouterr().err == ""


def test_enabled_artifact_builds_its_payload_exactly_once_for_all_consumers(fresh_logs, capsys,
                                                                            tmp_path):
    logs.set_logs(output_code=True)
    seen = []
    logs.add_sink(seen.append, artifacts={"output_code"})
    logs.open_trace(str(tmp_path / "trace.log"))
    builder = Counter("def call(): pass")
    logs.artifact("output_code", builder)
    assert builder.calls == 1                      # console, trace and sink share one payload
    assert [e.payload for e in seen] == ["def call(): pass"]
    assert "def call(): pass" in capsys.readouterr().err
    assert "def call(): pass" in (tmp_path / "trace.log").read_text()


def test_component_off_by_default_artifact_stays_free_at_debug(fresh_logs):
    logs.set_logs(inductor=logging.DEBUG)
    builder = Counter()
    logs.artifact("ir_pre_fusion", builder)
    assert builder.calls == 0
    logs.artifact("perf_hints", builder)
    assert builder.calls == 1


def test_disabled_log_call_is_a_structlog_nop_and_formats_nothing(fresh_logs, capsys):
    log = logs.get_logger("compiler.backend.zero_cost_probe")
    # structlog's filtering class: methods under the level are the shared no-op
    assert type(log).debug is type(log).info and type(log).info.__name__ == "_nop"
    Loud.formatted = 0
    log.debug("x", value=Loud())
    log.info("x", value=Loud())
    assert Loud.formatted == 0 and capsys.readouterr().err == ""
    log.warning("x", value=Loud())
    assert Loud.formatted == 1


def test_logger_class_follows_level_changes(fresh_logs):
    log = logs.get_logger("compiler.aot.zero_cost_probe")
    bound_child = log.bind(graph="forward")
    assert log.get_effective_level() == logging.WARNING
    logs.set_logs(aot=logging.DEBUG)
    assert log.get_effective_level() == logging.DEBUG
    assert bound_child.get_effective_level() == logging.DEBUG
    logs.set_logs()
    assert bound_child.get_effective_level() == logging.WARNING


def test_get_logger_returns_one_logger_per_module():
    assert logs.get_logger("compiler.x.y") is logs.get_logger("compiler.x.y")
    assert bound.Router("compiler.backend.cache.disk").component == "cache"


def test_non_standard_levels_round_down(fresh_logs):
    log = logs.get_logger("compiler.aot.odd_level_probe")
    logs.set_logs(aot=15)
    assert log.get_effective_level() == logging.DEBUG
    logs.set_logs(aot=99)
    assert log.get_effective_level() == logging.CRITICAL
