"""A synthetic compile trace in the project's wire format, for tests and benchmarks.

It plays the part of a small model compiled by tracetorch: one frame with a graph break, its
resume frame, a recompile caused by a shape change, guards, FX graphs, IR before/after fusion,
fused kernels with provenance, metrics, and (optionally) a failed compile. `scale` repeats the
pattern over more frames and pads with fusion decisions, to build 100,000-event traces.

Records go through logs' own `TraceWriter`, with a fixed line prefix: times, pids and paths are
fixed, so the output is deterministic (snapshot tests depend on that).
"""

from __future__ import annotations

from pathlib import Path

from tracetorch.logs.compile_ids import CompileId
from tracetorch.logs.trace_writer import TraceWriter, encode_payload

USER_FILE = "/work/demo/model.py"
USER_SOURCE = '''def forward(self, x):
    h = self.fc1(x)
    h = torch.relu(h) * 2
    print("debug", h.shape)
    y = self.fc2(h)
    return torch.softmax(y, dim=-1)
'''
FIRST_LINE = 10


def _cid(f, c, a=0):
    return CompileId(f, c, a)


class _FixedPrefix:
    """Each line's glog prefix from a tick counter, not the clock, pid and caller: the same trace
    on every run."""

    def __init__(self):
        self.tick = 0

    def __call__(self, when, pathname, lineno) -> str:
        self.tick += 1
        s, us = divmod(self.tick, 1000)
        return f"V1122 12:{(s // 60) % 60:02d}:{s % 60:02d}.{us * 1000:06d} 4242 compiler/frontend/capture.py:1]"


class _Writer:
    """Records of the synthetic program, written by logs' TraceWriter (logs owns the format)."""

    def __init__(self, path: Path):
        self.trace = TraceWriter(path=str(path), prefix=_FixedPrefix())

    def record(self, key, meta, payload=None, cid=None, stack=None):
        self.trace.write(key, meta, encode_payload(payload), cid, "", 0, 0.0, stack)

    def artifact(self, name, payload, cid, stack=None, **fields):
        enc = "string" if isinstance(payload, str) else "json"
        self.record("artifact", {"name": name, "encoding": enc, **fields}, payload, cid, stack)

    def close(self):
        self.trace.close()


def _graph(nodes):
    body = "\n".join(f"    {n} = torch.ops.aten.{op}.default({a})" for n, op, a in nodes)
    return f"def forward(self, L_x_: \"f32[8, 16]\"):\n{body}\n    return ({nodes[-1][0]},)"


def _compile(w: _Writer, fid: int, fcid: int, *, name: str, line: int, kernels: bool,
             breaks: bool, recompile_of: str | None, fail: bool):
    """One compile, with the record shapes tracetorch's compiler writes."""
    cid = _cid(fid, fcid)
    if recompile_of:  # written before the new compile starts, so with a stack, no compile id
        stack = [{"line": 30, "name": "<module>", "filename": USER_FILE, "loc": "model(x)"}]
        reason = "tensor 'x' size mismatch at index 0. expected 8, actual 4"
        w.artifact("recompile", {"function": name, "location": f"{USER_FILE}:{line}",
                                 "cache_size": fcid, "reasons": [{"compile_id": recompile_of,
                                                                  "failures": [reason]}]},
                   None, stack=stack)
        w.artifact("guard_failure", {"function": name, "cache_entry": recompile_of, "reason": reason,
                                     "guard": "TENSOR_MATCH: check_tensor(L['x'], size=[8, 16])",
                                     "source": "L['x']", "expected": "8", "actual": "4",
                                     "user_location": f"{USER_FILE}:{FIRST_LINE + 1}"},
                   None, stack=stack)
    w.record("dynamo_start", {"stack": [{"line": line, "name": name, "filename": USER_FILE}]}, None, cid)
    if name == "forward":
        w.artifact("source", USER_SOURCE, cid, filename=USER_FILE, firstlineno=FIRST_LINE)
    if fail:
        w.artifact("compile_error", {"stage": "backend", "error": "CompileError: injected relu bug",
                                     "repro": "repro/repro.py"}, cid)
        w.record("compilation_metrics", {"co_name": name, "co_filename": USER_FILE,
                                         "co_firstlineno": line, "fail_type": "CompileError",
                                         "fail_reason": "injected relu bug",
                                         "entire_frame_compile_time_s": 0.02}, None, cid)
        return
    nodes = [("linear", "mm", "L_x_, w1"), ("relu", "relu", "linear"), ("mul", "mul", "relu, 2")]
    w.record("dynamo_output_graph", {}, _graph(nodes), cid)
    w.artifact("ir_pre_fusion", "buf0: ComputedBuffer(mm)\nbuf1: Pointwise(relu, buf0)\n"
                                "buf2: Pointwise(mul, buf1)", cid, filename="ir_pre_fusion.txt")
    w.artifact("fusion_decision", {"nodes": ["buf1", "buf2"], "fused": True,
                                   "reason": "same iteration space"}, cid)
    w.artifact("ir_post_fusion", "buf0: ComputedBuffer(mm)\nbuf1_buf2: FusedPointwise(relu, mul)",
               cid, filename="ir_post_fusion.txt")
    if kernels:
        kname = f"kernel{fid}_relu_mul"
        code = (f'extern "C" int {kname}(const float* in_ptr0, float* out_ptr0) {{\n'
                "    for (int64_t x0 = 0; x0 < 128; x0++) {\n"
                "        auto tmp0 = in_ptr0[x0];\n"
                "        out_ptr0[x0] = std::max(tmp0, 0.0f) * 2.0f;\n"
                "    }\n    return 0;\n}")
        w.artifact("kernel_code", f"# {kname} (cpp)\n{code}", cid, kernel=kname,
                   filename=f"{kname}.cpp")
        w.artifact("kernel", {"name": kname, "language": "cpp", "source": code, "provenance": [
            {"node": "relu", "source": f"{USER_FILE}:{FIRST_LINE + 2}"},
            {"node": "mul", "source": f"{USER_FILE}:{FIRST_LINE + 2}"}]}, cid)
        w.record("inductor_output_code", {"filename": "output_code.py"},
                 f'"""output code: compile id {fid}/{fcid}"""\ncpp_source = r\'\'\'\n{code}\n\'\'\'\n'
                 "def call(args):\n    return run(cpp_source, args)", cid)
    if breaks:
        w.artifact("graph_break", {"reason": "print() (a side effect outside the graph)",
                                   "instruction": "CALL", "filename": USER_FILE,
                                   "lineno": FIRST_LINE + 3, "source_line": 'print("debug", h.shape)',
                                   "user_stack": [f'{USER_FILE}:{FIRST_LINE + 3} in {name}: '
                                                  'print("debug", h.shape)']}, cid)
    w.record("dynamo_guards", {}, [
        {"code": "TENSOR_MATCH: check_tensor(L['x'], Tensor, torch.float32, size=[8, 16], "
                 "stride=[16, 1])", "kind": "TENSOR_MATCH", "source": "L['x']",
         "user_location": f"{USER_FILE}:{FIRST_LINE + 1}"},
        {"code": "ID_MATCH: ___check_obj_id(G['torch'], 1)", "kind": "ID_MATCH",
         "source": "G['torch']", "user_location": f"{USER_FILE}:{FIRST_LINE + 2}"},
        {"code": "GLOBAL_STATE: torch.is_grad_enabled() is True", "kind": "GRAD_MODE",
         "source": "", "user_location": None}], cid)
    w.artifact("perf_hint", {"message": "mm falls back to ATen (no lowering for addmm with bias)"}, cid)
    w.record("compilation_metrics", {
        "co_name": name, "co_filename": USER_FILE, "co_firstlineno": line,
        "graph_op_count": len(nodes), "guard_count": 3, "entire_frame_compile_time_s": 0.25,
        "frontend_time_s": 0.05, "backend_compile_time_s": 0.2, "fail_type": None}, None, cid)


def write_synthetic_trace(path: str | Path, *, scale: int = 1, fail: bool = False,
                          pad_events: int = 0) -> Path:
    """Write the trace; returns its path. `scale` = how many copies of the model's frames,
    `pad_events` = extra fusion-decision records spread over the compiles (for big traces)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")  # logs' writer appends: start from an empty file
    w = _Writer(path)
    for k in range(scale):
        f0, f1 = 2 * k, 2 * k + 1
        _compile(w, f0, 0, name="forward", line=FIRST_LINE, kernels=True, breaks=True,
                 recompile_of=None, fail=False)
        _compile(w, f1, 0, name="__resume_at_40_forward", line=FIRST_LINE,
                 kernels=True, breaks=False, recompile_of=None, fail=False)
        _compile(w, f0, 1, name="forward", line=FIRST_LINE, kernels=True, breaks=True,
                 recompile_of=f"{f0}/0", fail=False)
        for p in range(pad_events // max(scale, 1)):
            w.artifact("fusion_decision", {"nodes": [f"buf{p}", f"buf{p + 1}"], "fused": p % 3 != 0,
                                           "reason": "score" if p % 3 else "different sizes"},
                       _cid(f0, 1))
    if fail:
        _compile(w, 2 * scale, 0, name="broken", line=40, kernels=False, breaks=False,
                 recompile_of=None, fail=True)
    w.close()
    return path
