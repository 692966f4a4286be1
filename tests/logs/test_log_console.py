"""Console output: the glog (TORCH_LOGS) look, json, console, TRACE_LOGS_OUT, foreign loggers."""
import json
import logging
import os
import re

from tracetorch import logs
from tracetorch.logs import core

GLOG = re.compile(r"^(?P<L>[VIWEC])(?P<date>\d{4} \d\d:\d\d:\d\d\.\d{6}) (?P<pid>\d+) "
                  r"(?P<path>[^ ]+):(?P<line>\d+)\](?P<rest>.*)$")


def _lines(capsys):
    return [ln for ln in capsys.readouterr().err.splitlines() if ln]


def test_glog_line_has_level_time_pid_relative_path_line_compile_id_and_artifact(fresh_logs, capsys):
    logs.set_logs(guards=True)
    with logs.compile_context(2, 1):
        logs.artifact("guards", lambda: "Recompiling function f in demo.py:6"); line = _here()  # noqa: E702  (same line)
    (out,) = _lines(capsys)
    m = GLOG.match(out)
    assert m, out
    assert m["L"] == "V" and int(m["pid"]) == os.getpid()
    assert m["path"].endswith("test_log_console.py") and not m["path"].startswith("/") and int(m["line"]) == line
    assert m["rest"] == " [2/1] [__guards] Recompiling function f in demo.py:6"


def _here():
    import sys
    return sys._getframe(1).f_lineno


def test_every_line_of_a_multiline_message_is_prefixed(fresh_logs, capsys):
    logs.set_logs(graph=True)
    with logs.compile_context(0, 0, attempt=2):
        logs.artifact("graph", lambda: "line one\nline two\nline three")
    out = _lines(capsys)
    assert len(out) == 3
    prefixes = {GLOG.match(ln)["rest"].rsplit("] ", 1)[0] for ln in out}
    assert prefixes == {" [0/0_2] [__graph"}
    assert [ln.rsplit("] ", 1)[1] for ln in out] == ["line one", "line two", "line three"]


def test_component_logger_levels_and_fields(fresh_logs, capsys):
    logs.set_logs(frontend=logging.INFO)
    log = logs.get_logger("compiler.frontend.guards_test_module")
    log.debug("hidden")
    log.info("guard_installed", source="L['x']", kind="TENSOR_MATCH", note="two words")
    log.warning("careful")
    out = _lines(capsys)
    assert len(out) == 2
    assert GLOG.match(out[0])["L"] == "I" and GLOG.match(out[1])["L"] == "W"
    assert out[0].endswith("] guard_installed source=L['x'] kind=TENSOR_MATCH note='two words'")
    assert "[" not in GLOG.match(out[1])["rest"]        # no compile id outside a compile


def test_dotted_module_name_enables_only_that_package(fresh_logs, capsys):
    logs.configure_from_env({"TRACE_LOGS": "+compiler.backend"})
    logs.get_logger("compiler.backend.scheduler").debug("fused", a="buf0")
    logs.get_logger("compiler.frontend.guards").debug("not_shown")
    logs.get_logger("compiler.frontend.guards").warning("shown")
    out = _lines(capsys)
    assert [ln.rsplit("] ", 1)[1] for ln in out] == ["fused a=buf0", "shown"]


def test_exception_is_rendered(fresh_logs, capsys):
    log = logs.get_logger("compiler.backend.lowering")
    try:
        raise KeyError("boom")
    except KeyError:
        log.exception("lowering_failed", op="aten.foo")
    err = capsys.readouterr().err
    assert "lowering_failed op=aten.foo" in err and "KeyError: 'boom'" in err


def test_json_format_is_one_object_per_line(fresh_logs, capsys):
    core.set_format("json")
    logs.set_logs(aot=logging.DEBUG)
    with logs.compile_context(1, 0):
        logs.get_logger("compiler.aot.partition").debug("saved", tensors=3)
        logs.artifact("aot_graphs", lambda: "def forward(x):\n    return x", graph="forward")
    first, second = [json.loads(ln) for ln in _lines(capsys)]
    assert first["event"] == "saved" and first["tensors"] == 3 and first["compile_id"] == "1/0"
    assert first["level"] == "debug" and first["kind"] == "log" and first["pid"] == os.getpid()
    assert first["file"].endswith("test_log_console.py")
    assert second["event"] == "aot_graphs" and second["graph"] == "forward"
    assert second["payload"] == "def forward(x):\n    return x"


def test_console_format_uses_structlog_renderer(fresh_logs, capsys):
    core.set_format("console")
    logs.set_logs(backend=logging.INFO)
    with logs.compile_context(3, 0):
        logs.get_logger("compiler.backend.lowering").info("lowered", op="aten.add")
    (out,) = _lines(capsys)
    assert "[info" in out and "lowered" in out and "op=aten.add" in out and "compile_id=3/0" in out


def test_trace_logs_out_also_writes_to_a_file(fresh_logs, capsys, tmp_path):
    path = tmp_path / "sub" / "logs.txt"
    logs.configure_from_env({"TRACE_LOGS": "recompiles", "TRACE_LOGS_OUT": str(path)})
    logs.artifact("recompiles", lambda: "Recompiling function f")
    console = _lines(capsys)
    core.set_out(None)
    assert path.read_text().splitlines() == console and "Recompiling function f" in console[0]


def test_other_libraries_stdlib_loggers_still_print_normally(run_python):
    code = ("import logging, sys\n"
            "h = logging.StreamHandler(sys.stdout); h.setFormatter(logging.Formatter('%(name)s:%(message)s'))\n"
            "lib = logging.getLogger('somelib'); lib.addHandler(h); lib.setLevel(logging.INFO)\n"
            "from tracetorch import logs\n"
            "logs.get_logger('compiler.frontend.x').info('ours')\n"
            "lib.info('theirs')\n"
            "logging.getLogger('somelib.child').warning('child')\n")
    r = run_python(code, env={"TRACE_LOGS": "+all"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["somelib:theirs", "somelib.child:child"]
    assert "] ours" in r.stderr


def test_foreign_module_named_in_trace_logs_prints_in_our_format(run_python):
    code = ("import logging, logs\n"
            "logging.getLogger('json.decoder').debug('hello from json')\n")
    r = run_python(code, env={"TRACE_LOGS": "+json.decoder"})
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert GLOG.match(line) and line.endswith("] hello from json")


def test_minus_prefix_keeps_only_errors(fresh_logs, capsys):
    logs.configure_from_env({"TRACE_LOGS": "-inductor"})
    log = logs.get_logger("compiler.backend.codegen.cpp")
    log.warning("quiet")
    log.error("loud", op="aten.relu")
    (line,) = _lines(capsys)
    assert GLOG.match(line)["L"] == "E" and line.endswith("] loud op=aten.relu")


def test_default_shows_warnings_of_every_component(fresh_logs, capsys):
    logs.get_logger("compiler.aot.partition").info("quiet")
    logs.get_logger("compiler.aot.partition").warning("aot_training_fallback", graph="graph_0")
    (line,) = _lines(capsys)
    assert line.endswith("] aot_training_fallback graph=graph_0")
