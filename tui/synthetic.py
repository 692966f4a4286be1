"""A synthetic compile trace in the project's wire format, for tests and benchmarks.

It plays the part of a small model compiled by tracetorch: one frame with a graph break, its
resume frame, a recompile caused by a shape change, guards, FX graphs, IR before/after fusion,
fused kernels with provenance, metrics, and (optionally) a failed compile. `scale` repeats the
pattern over more frames and pads with fusion decisions, to build 100,000-event traces.

Records go through `logs.trace_writer.TraceWriter` when it exists (the real writer), else through
a minimal local writer of the same format. All times, pids and paths are fixed, so output is
byte-for-byte deterministic (snapshot tests depend on that).
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


class _Writer:
    """Formats records exactly like the trace writer, with a fixed clock and pid."""

    def __init__(self, fh):
        self.fh, self.strings, self.tick = fh, {}, 0

    def intern(self, filename):
        if filename not in self.strings:
            self.strings[filename] = len(self.strings)
            self._line({"str": [filename, self.strings[filename]]}, None)
        return self.strings[filename]

    def _line(self, env, payload, path="compiler/frontend/capture.py", line=1):
        self.tick += 1
        s, us = divmod(self.tick, 1000)
        prefix = f"V1122 12:{(s // 60) % 60:02d}:{s % 60:02d}.{us * 1000:06d} 4242 {path}:{line}]"
        text = f"{prefix} {json.dumps(env)}"
        if payload is not None:
            text += "".join(f"\n\t{ln}" for ln in payload.split("\n"))
        self.fh.write(text + "\n")

    def record(self, key, meta, payload=None, cid=None, path="compiler/frontend/capture.py"):
        if isinstance(meta, dict) and isinstance(meta.get("stack"), list):
            meta = {**meta, "stack": [{**fr, "filename": self.intern(fr["filename"])}
                                      if isinstance(fr.get("filename"), str) else fr
                                      for fr in meta["stack"]]}
        env = {key: meta}
        if cid is not None:
            env.update(frame_id=cid[0], frame_compile_id=cid[1], attempt=cid[2])
        if payload is not None and not isinstance(payload, str):
            payload = json.dumps(payload, indent=0)
        if payload is not None:
            env["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
        self._line(env, payload, path)

    def artifact(self, name, payload, cid, **fields):
        enc = "string" if isinstance(payload, str) else "json"
        self.record("artifact", {"name": name, "encoding": enc, **fields}, payload, cid)


def _graph(nodes):
    body = "\n".join(f"    {n} = torch.ops.aten.{op}.default({a})" for n, op, a in nodes)
    return f"def forward(self, L_x_: \"f32[8, 16]\"):\n{body}\n    return ({nodes[-1][0]},)"


def _compile(w: _Writer, fid: int, fcid: int, *, name: str, line: int, kernels: bool,
             breaks: bool, recompile_of: str | None, fail: bool):
    cid = _cid(fid, fcid)
    w.record("dynamo_start", {"stack": [{"line": line, "name": name, "filename": USER_FILE}]}, None, cid)
    if recompile_of:
        w.artifact("recompile", {"function": name, "cache_size": fcid,
                                 "reasons": [f"{recompile_of}: tensor 'x' size mismatch at index 0. "
                                             "expected 8, actual 4"]}, cid)
        w.artifact("guard_failure", {"cache_entry": recompile_of, "source": "L['x']",
                                     "guard": "TENSOR_MATCH L['x'].size()[0] == 8",
                                     "expected": "8", "actual": "4",
                                     "user_location": f"{USER_FILE}:{FIRST_LINE + 1}"}, cid)
    if name == "forward":
        w.artifact("source", USER_SOURCE, cid, filename=USER_FILE, firstlineno=FIRST_LINE)
    if fail:
        w.artifact("compile_error", {"stage": "backend", "error": "CompileError: injected relu bug",
                                     "repro": "repro/repro.py"}, cid)
        w.record("compilation_metrics", {"compile_id": f"{fid}/{fcid}", "co_name": name,
                                         "fail_type": "CompileError",
                                         "fail_reason": "injected relu bug",
                                         "entire_frame_compile_time_s": 0.02}, None, cid)
        return
    nodes = [("linear", "mm", "L_x_, w1"), ("relu", "relu", "linear"), ("mul", "mul", "relu, 2")]
    if breaks:
        w.artifact("graph_break", {"reason": "call to builtin print (side effect on stdout)",
                                   "instruction": "CALL print", "filename": USER_FILE,
                                   "lineno": FIRST_LINE + 3, "source_line": 'print("debug", h.shape)',
                                   "user_stack": [{"filename": USER_FILE, "line": FIRST_LINE + 3,
                                                   "name": name, "loc": 'print("debug", h.shape)'}]},
                   cid)
    w.record("dynamo_output_graph", {"sizes": {n: [8, 16] for n, _, _ in nodes}}, _graph(nodes), cid)
    w.artifact("guards", "\n".join([
        f"TENSOR_MATCH: L['x'] dtype=float32 shape=[8, 16] stride=[16, 1]  # {USER_FILE}:{FIRST_LINE + 1}",
        f"ID_MATCH: G['torch'] is module torch  # {USER_FILE}:{FIRST_LINE + 2}",
        "GRAD_MODE: torch.is_grad_enabled() == True",
    ]), cid)
    w.artifact("ir_pre_fusion", "buf0: ComputedBuffer(mm)\nbuf1: Pointwise(relu, buf0)\n"
                                "buf2: Pointwise(mul, buf1)", cid)
    w.artifact("fusion_decision", {"nodes": ["buf1", "buf2"], "fused": True,
                                   "reason": "same iteration space"}, cid)
    w.artifact("ir_post_fusion", "buf0: ComputedBuffer(mm)\nbuf1_buf2: FusedPointwise(relu, mul)", cid)
    if kernels:
        code = ("def kernel_relu_mul(in_ptr0, out_ptr0, xnumel):\n"
                "    # fused: relu, mul  (model.py:12)\n"
                "    for x0 in range(xnumel):\n"
                "        tmp0 = in_ptr0[x0]\n"
                "        out_ptr0[x0] = max(tmp0, 0.0) * 2.0\n")
        w.artifact("kernel", {"name": f"kernel_relu_mul_{fid}_{fcid}", "backend": "cpp",
                              "source": code, "provenance": {
                                  "fx_nodes": ["relu", "mul"],
                                  "user_lines": [{"filename": USER_FILE, "line": FIRST_LINE + 2}]}},
                   cid)
        w.record("inductor_output_code", {"filename": f"output_code_{fid}_{fcid}.py"},
                 f"# wrapper\n{code}\ndef call(args):\n    return kernel_relu_mul(*args)", cid)
    w.artifact("perf_hint", {"message": "mm falls back to ATen (no lowering for addmm with bias)"}, cid)
    w.record("compilation_metrics", {
        "compile_id": f"{fid}/{fcid}", "co_name": name, "co_filename": USER_FILE,
        "co_firstlineno": line, "graph_op_count": len(nodes), "guard_count": 3,
        "entire_frame_compile_time_s": 0.25, "frontend_time_s": 0.05, "aot_time_s": 0.04,
        "backend_compile_time_s": 0.16, "codegen_time_s": 0.08,
        "restart_reasons": [], "fail_type": None}, None, cid)


def write_synthetic_trace(path: str | Path, *, scale: int = 1, fail: bool = False,
                          pad_events: int = 0) -> Path:
    """Write the trace; returns its path. `scale` = how many copies of the model's frames,
    `pad_events` = extra fusion-decision records spread over the compiles (for big traces)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        w = _Writer(fh)
        w.record("artifact", {"name": "tracetorch_version", "encoding": "json"},
                 {"tracetorch_version": "0.1.0"}, None)
        for k in range(scale):
            f0, f1 = 2 * k, 2 * k + 1
            _compile(w, f0, 0, name="forward", line=FIRST_LINE, kernels=True, breaks=True,
                     recompile_of=None, fail=False)
            _compile(w, f1, 0, name="torch_dynamo_resume_in_forward_at_13", line=FIRST_LINE + 3,
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
    return path
