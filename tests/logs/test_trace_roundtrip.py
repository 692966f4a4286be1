"""Round trip: what the writer writes, the reader (logs.trace_reader) reads back identically."""
import json

from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from tracetorch import logs
from tracetorch.logs.sanitize import clean, clean_deep
from tracetorch.logs.trace_reader import read_trace

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)
JSONABLE = st.recursive(st.none() | st.booleans() | st.integers(-10**9, 10**9) | TEXT,
                        lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
FIELD_NAMES = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True).filter(
    lambda k: k not in ("name", "encoding"))
NAMES = st.sampled_from(["graph_break", "guard_failure", "recompile", "fusion_decision", "kernel",
                         "perf_hint", "graph_code", "bytecode", "ir_post_fusion"])
EVENT = st.tuples(
    NAMES,
    st.none() | st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 3)),
    TEXT | st.dictionaries(st.text(max_size=8), JSONABLE, max_size=5),
    st.dictionaries(FIELD_NAMES, st.integers() | TEXT, max_size=3),
)


def emit(events):
    for name, cid, payload, fields in events:
        if cid is None:
            logs.artifact(name, lambda p=payload: p, **fields)
        else:
            with logs.compile_context(*cid):
                logs.artifact(name, lambda p=payload: p, **fields)


@settings(max_examples=40, deadline=None, phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(EVENT, min_size=1, max_size=8))
def test_artifacts_round_trip(fresh_logs, tmp_path_factory, events):
    path = tmp_path_factory.mktemp("rt") / "trace.log"
    writer = logs.open_trace(str(path))
    emit(events)
    logs.close_trace(writer)
    trace = read_trace(path)
    assert trace.skipped == [] and trace.damaged == []
    got = [e for e in trace.events if e.key not in ("tracetorch_version", "str")]
    assert len(got) == len(events)
    for ev, (name, cid, payload, fields) in zip(got, events):
        assert ev.key == name
        assert ev.compile_id == (logs.CompileId(*cid) if cid is not None else None)
        # the reader shows control characters as visible escapes (a trace is untrusted input
        # whose strings reach a terminal): everything else comes back exactly
        assert ev.metadata == clean_deep({**fields, "name": name,
                                          "encoding": "string" if isinstance(payload, str) else "json"})
        if isinstance(payload, str):
            assert ev.payload == clean(payload)
        else:
            assert ev.payload_json() == clean_deep(json.loads(json.dumps(payload)))
        assert ev.payload_ok
        if cid is None:                    # outside a compile the writer records the stack
            assert ev.stack[-1]["name"] == "emit"


def test_mapped_records_round_trip(fresh_logs, tmp_path):
    path = tmp_path / "trace.log"
    logs.open_trace(str(path))
    frames = [{"line": 7, "name": "f", "filename": "/src/demo.py", "loc": "return x.sin()"}]
    with logs.compile_context(2, 0):
        logs.trace_record("dynamo_start", lambda: {"stack": frames})
        logs.artifact("graph", lambda: "graph():\n    %x : placeholder", sizes={"x": [3]})
        logs.artifact("output_code", lambda: "def call(args):\n    pass", filename="/tmp/o.py")
        logs.artifact("compile_metrics", lambda: {"co_name": "f", "graph_op_count": 1})
    trace = read_trace(path)
    evs = {e.key: e for e in trace.events}
    assert evs["dynamo_start"].stack == frames
    assert evs["dynamo_output_graph"].payload == "graph():\n    %x : placeholder"
    assert evs["dynamo_output_graph"].metadata == {"sizes": {"x": [3]}}
    assert evs["inductor_output_code"].metadata == {"filename": "/tmp/o.py"}
    # restart_reasons: filled by logs (the compile's graph breaks; none here) for tlparse
    assert evs["compilation_metrics"].metadata == {"co_name": "f", "graph_op_count": 1,
                                                   "restart_reasons": []}
    assert trace.compile_ids() == [logs.CompileId(2, 0)]
    assert all(e.compile_id == logs.CompileId(2, 0) for e in trace.events
               if e.key not in ("tracetorch_version", "str"))


def test_restart_reasons_belong_to_one_compile(fresh_logs, tmp_path):
    """A compile that broke but never reported its metrics (it failed, or ran eagerly) must not
    lend its breaks to a later compile with the same id (frame ids restart after a reset)."""
    path = tmp_path / "trace.log"
    logs.open_trace(str(path))
    with logs.compile_context(2, 0):
        logs.artifact("graph_break", lambda: {"reason": "print()", "filename": "a.py", "lineno": 3})
    with logs.compile_context(2, 0):
        logs.artifact("compile_metrics", lambda: {"co_name": "g"})
    with logs.compile_context(2, 0):
        logs.artifact("graph_break", lambda: {"reason": "data-dependent branch"})
    with logs.compile_context(2, 0, attempt=1):    # the restart of that compile: same compile
        logs.artifact("compile_metrics", lambda: {"co_name": "h"})
    metrics = [e.metadata for e in read_trace(path).events if e.key == "compilation_metrics"]
    assert [m["restart_reasons"] for m in metrics] == [[], ["data-dependent branch"]]
