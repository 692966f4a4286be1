"""The structured trace writer: PyTorch's TORCH_TRACE wire format, written line-buffered."""
import hashlib
import json
import os
import re
import sys

from tracetorch import logs
from tracetorch.logs import trace_writer

PREFIX = re.compile(r"^V\d{4} \d\d:\d\d:\d\d\.\d{6} (\d+) ([^ ]+):(\d+)\] (\{.*\})$")


def records(path):
    """[(envelope, payload text or None, prefix match)] parsed by hand, independent of the reader."""
    out = []
    for line in open(path, encoding="utf-8").read().split("\n"):
        if not line:
            continue
        if line.startswith("\t"):
            env, payload, m = out[-1]
            out[-1] = (env, line[1:] if payload is None else payload + "\n" + line[1:], m)
        else:
            m = PREFIX.match(line)
            assert m, line
            out.append((json.loads(m.group(4)), None, m))
    return out


def test_first_record_names_tracetorch_version(fresh_logs, tmp_path):
    path = tmp_path / "t.log"
    logs.open_trace(str(path))
    logs.artifact("graph_code", lambda: "x")
    env, payload, m = records(path)[0]
    assert env["artifact"] == {"name": "tracetorch_version", "encoding": "json"}
    info = json.loads(payload)
    assert info["tracetorch_version"] and info["python"]
    assert int(m.group(1)) == os.getpid()


def test_envelope_compile_id_md5_and_tab_payload(fresh_logs, tmp_path):
    path = tmp_path / "t.log"
    logs.open_trace(str(path))
    with logs.compile_context(3, 1, attempt=2):
        logs.artifact("graph_code", lambda: "def forward(x):\n    return x + 1")
    raw = path.read_text()
    assert "\n\tdef forward(x):\n\t    return x + 1\n" in raw
    env, payload, m = records(path)[1]
    assert env["artifact"] == {"name": "graph_code", "encoding": "string"}
    assert (env["frame_id"], env["frame_compile_id"], env["attempt"]) == (3, 1, 2)
    assert env["has_payload"] == hashlib.md5(payload.encode()).hexdigest()
    assert m.group(2).endswith("test_trace_writer.py")


def test_json_payload_layout_matches_pytorch(fresh_logs, tmp_path):
    path = tmp_path / "t.log"
    logs.open_trace(str(path))
    logs.artifact("graph_break", lambda: {"reason": "print", "n": 1})
    logs.artifact("kernel", lambda: [{"a": 1}, {"b": 2}])
    (_, p_dict, _), (_, p_list, _) = records(path)[-2:]
    assert p_dict == '{\n"reason": "print",\n"n": 1\n}'          # json.dumps(indent=0)
    assert p_list == '[\n{"a": 1},\n{"b": 2}\n]'                  # one item per line


def test_artifact_name_to_pytorch_envelope_keys(fresh_logs, tmp_path):
    path = tmp_path / "t.log"
    logs.open_trace(str(path))
    with logs.compile_context(0, 0):
        logs.artifact("graph", lambda: "graph text")
        logs.artifact("guards", lambda: "guard text")
        logs.artifact("guards", lambda: [{"code": "check(L['x'])"}])
        logs.artifact("output_code", lambda: "code", filename="/tmp/out.py")
        for which in ("forward", "backward", "inference"):
            logs.artifact("aot_graphs", lambda: "g", graph=which)
        logs.artifact("aot_joint_graph", lambda: "j")
        logs.artifact("compile_metrics", lambda: {"co_name": "f", "graph_op_count": 2})
        logs.artifact("recompile", lambda: {"reasons": ["size"]})
    recs = records(path)[1:]
    keys = [next(iter(env)) for env, _, _ in recs]
    assert keys == ["dynamo_output_graph", "dynamo_cpp_guards_str", "dynamo_guards",
                    "inductor_output_code", "aot_forward_graph", "aot_backward_graph",
                    "aot_inference_graph", "aot_joint_graph", "compilation_metrics", "artifact"]
    assert recs[3][0]["inductor_output_code"] == {"filename": "/tmp/out.py"}
    metrics_env, metrics_payload, _ = recs[8]
    assert metrics_env["compilation_metrics"] == {"co_name": "f", "graph_op_count": 2,
                                                  "restart_reasons": []}  # filled by logs
    assert metrics_payload is None and "has_payload" not in metrics_env
    assert recs[9][0]["artifact"] == {"name": "recompile", "encoding": "json"}
    logs.artifact("aot_graphs", lambda: "text", graph="partition", name="graph_0")
    env, _, _ = records(path)[-1]
    assert env["artifact"] == {"graph": "partition", "field_name": "graph_0", "name": "aot_graphs",
                               "encoding": "string"}
    assert logs.envelope_key("graph", {}) == "dynamo_output_graph"


def test_trace_record_raw_and_string_table_for_stacks(fresh_logs, tmp_path):
    path = tmp_path / "t.log"
    logs.trace_record("dynamo_start", lambda: {"stack": []})      # no trace: a no-op
    assert not path.exists()
    logs.open_trace(str(path))
    with logs.compile_context(0, 0):
        logs.trace_record("dynamo_start", lambda: {"stack": [
            {"line": 3, "name": "f", "filename": "/src/demo.py", "loc": "y = x + 1"},
            {"line": 9, "name": "g", "filename": "/src/demo.py"}]})
    logs.trace_record("describe_source", lambda: {"id": 1})      # outside a compile: a stack
    recs = [env for env, _, _ in records(path)]
    table = {r["str"][1]: r["str"][0] for r in recs if "str" in r}
    start = next(r for r in recs if "dynamo_start" in r)
    frames = start["dynamo_start"]["stack"]
    assert [table[f["filename"]] for f in frames] == ["/src/demo.py", "/src/demo.py"]
    assert sum(1 for r in recs if r.get("str", [None])[0] == "/src/demo.py") == 1   # interned once
    outside = next(r for r in recs if "describe_source" in r)
    assert "frame_id" not in outside
    assert table[outside["stack"][-1]["filename"]].endswith("test_trace_writer.py")


def test_written_line_by_line_so_a_crash_leaves_a_valid_prefix(fresh_logs, tmp_path):
    path = tmp_path / "t.log"
    writer = logs.open_trace(str(path))
    logs.artifact("graph_code", lambda: "a")
    assert path.read_text().endswith("\ta\n")                    # visible before close / exit
    logs.close_trace(writer)
    logs.artifact("graph_code", lambda: "b")
    assert "\tb" not in path.read_text()


def test_trace_dir_from_environment_writes_trace_pid_log(run_python, tmp_path):
    code = ("from tracetorch import logs\n"
            "with logs.compile_context(0, 0):\n"
            "    logs.artifact('graph_break', lambda: {'reason': 'x'})\n"
            "print(logs.trace_dir_writer().path)\n")
    r = run_python(code, env={"TRACE_DIR": str(tmp_path / "traces")})
    assert r.returncode == 0, r.stderr
    files = os.listdir(tmp_path / "traces")
    assert len(files) == 1 and re.fullmatch(r"trace_\d+\.log", files[0])
    assert r.stdout.strip() == str(tmp_path / "traces" / files[0])
    assert '"graph_break"' in (tmp_path / "traces" / files[0]).read_text()


def test_no_trace_file_without_records(run_python, tmp_path):
    r = run_python("import tracetorch.logs", env={"TRACE_DIR": str(tmp_path / "traces")})
    assert r.returncode == 0 and not (tmp_path / "traces").exists()


class FakeDist:
    """Stand-in for an initialised torch.distributed (rank 3): the writer only asks these."""

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def get_rank():
        return 3


def test_rank_in_file_name_and_envelope_under_torch_distributed(fresh_logs, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed", FakeDist)
    writer = logs.open_trace_dir(str(tmp_path / "traces"))
    with logs.compile_context(0, 0):
        logs.artifact("graph_code", lambda: "x")
    logs.close_trace(writer)
    (name,) = os.listdir(tmp_path / "traces")
    assert name == f"trace_rank_3_{os.getpid()}.log"
    env, _, _ = records(tmp_path / "traces" / name)[-1]
    assert env["rank"] == 3


def test_encode_payload_helpers():
    assert trace_writer.encode_payload(None) is None
    assert trace_writer.encode_payload("x") == "x"
    assert trace_writer.md5("abc") == hashlib.md5(b"abc").hexdigest()


def test_unwritable_trace_dir_warns_once_and_compilation_goes_on(fresh_logs, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    logs.open_trace_dir(str(blocker / "traces"))
    import pytest
    with pytest.warns(RuntimeWarning, match="cannot write the structured trace"):
        logs.artifact("graph_code", lambda: "x")
    import warnings
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        logs.artifact("graph_code", lambda: "y")          # no second warning, no exception
    assert later == []


def test_unwritable_trace_logs_out_is_a_clean_error(run_python, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run_python("import tracetorch.logs", env={"TRACE_LOGS_OUT": str(blocker / "out.txt")})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "TRACE_LOGS_OUT=" in r.stderr and "cannot open the file for writing" in r.stderr


def test_forked_child_gets_its_own_trace_dir_file_and_leaves_a_path_trace_alone(fresh_logs,
                                                                                tmp_path):
    path = tmp_path / "trace.log"
    logs.open_trace(str(path))
    logs.open_trace_dir(str(tmp_path / "dir"))
    logs.artifact("graph_code", lambda: "parent")
    pid = os.fork()
    if pid == 0:                                          # child: write, then leave at once
        try:
            logs.artifact("graph_code", lambda: "child")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert "\tchild" not in path.read_text()
    files = sorted(os.listdir(tmp_path / "dir"))
    assert files == sorted([f"trace_{os.getpid()}.log", f"trace_{pid}.log"])
    assert "\tchild" in (tmp_path / "dir" / f"trace_{pid}.log").read_text()
