"""A synthetic compile trace in the project's wire format, for tests and benchmarks.

It plays the part of a small model compiled by tracetorch: one frame with a graph break, its
resume frame, a recompile caused by a shape change, guards, FX graphs, IR before/after fusion,
fused kernels with provenance, metrics, and (optionally) a failed compile. `scale` repeats the
pattern over more frames and pads with fusion decisions, to build 100,000-event traces.

Records go through `logs.trace_writer.TraceWriter` when it exists (the real writer, with its
clock fixed), else through a minimal local writer of the same format. Times, pids and paths are
fixed, so the output is deterministic (snapshot tests depend on that).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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
    return (f, c, a)


def _fixed_prefix(tick: int, path: str = "compiler/frontend/capture.py", line: int = 1) -> str:
    s, us = divmod(tick, 1000)
    return f"V1122 12:{(s // 60) % 60:02d}:{s % 60:02d}.{us * 1000:06d} 4242 {path}:{line}]"


class _LocalWriter:
    """The wire format, for when logs' writer is not available."""

    def __init__(self, fh):
        self.fh, self.strings, self.tick = fh, {}, 0

    def intern(self, filename):
        if filename not in self.strings:
            self.strings[filename] = len(self.strings)
            self._line({"str": [filename, self.strings[filename]]}, None)
        return self.strings[filename]

    def _line(self, env, payload):
        self.tick += 1
        text = f"{_fixed_prefix(self.tick)} {json.dumps(env)}"
        if payload is not None:
            text += "".join(f"\n\t{ln}" for ln in payload.split("\n"))
        self.fh.write(text + "\n")

    def write(self, key, meta, payload, cid, stack=None):
        if isinstance(meta, dict) and isinstance(meta.get("stack"), list):
            meta = {**meta, "stack": [{**fr, "filename": self.intern(fr["filename"])}
                                      for fr in meta["stack"]]}
        env = {key: meta}
        if cid is not None:
            env.update(frame_id=cid[0], frame_compile_id=cid[1], attempt=cid[2])
        elif stack is not None:
            env["stack"] = [{**fr, "filename": self.intern(fr["filename"])} for fr in stack]
        if payload is not None:
            env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
        self._line(env, payload)


def _logs_writer(path: Path):
    """logs' own TraceWriter with a fixed clock and pid (deterministic output), or None."""
    try:
        from tracetorch.logs.compile_ids import CompileId
        from tracetorch.logs.trace_writer import TraceWriter
    except ImportError:
        return None

    class FixedClockWriter(TraceWriter):
        tick = 0

        def _prefix(self, when, pathname, lineno):
            FixedClockWriter.tick += 1
            return _fixed_prefix(FixedClockWriter.tick)

        def write4(self, key, meta, payload, cid, stack=None):
            self.write(key, meta, payload, CompileId(*cid) if cid else None, "", 0, 0.0, stack)

    w = FixedClockWriter(path=str(path))
    FixedClockWriter.tick = 0
    return w


class _Writer:
    """Records of the synthetic program, through logs' writer when it exists."""

    def __init__(self, path: Path, fh):
        self.real = _logs_writer(path)
        self.local = _LocalWriter(fh) if self.real is None else None

    def record(self, key, meta, payload=None, cid=None, stack=None):
        if isinstance(payload, list):  # the writer's layout for lists: one item per line
            payload = "[\n" + ",\n".join(json.dumps(i) for i in payload) + "\n]"
        elif payload is not None and not isinstance(payload, str):
            payload = json.dumps(payload, indent=0)
        if self.real is not None:
            self.real.write4(key, meta, payload, cid, stack)
        else:
            self.local.write(key, meta, payload, cid, stack)

    def artifact(self, name, payload, cid, stack=None, **fields):
        enc = "string" if isinstance(payload, str) else "json"
        self.record("artifact", {"name": name, "encoding": enc, **fields}, payload, cid, stack)

    def close(self):
        if self.real is not None:
            self.real.close()


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
    if path.exists():
        path.unlink()  # logs' writer appends
    with path.open("w", encoding="utf-8") as fh:
        w = _Writer(path, fh)
        if w.local is not None:  # logs' writer writes its own version record
            w.record("artifact", {"name": "tracetorch_version", "encoding": "json"},
                     {"tracetorch_version": "0.1.0"}, None)
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
