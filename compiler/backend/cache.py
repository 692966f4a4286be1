"""On-disk cache of compiled graphs: the generated output code, keyed by the post-aot graph, its
input metadata, the configuration and the versions involved (torch, python, the compiler's own
source). A second process compiling the same graph skips lowering, scheduling and codegen; the
C++ shared objects it loads are cached separately by source hash (runtime/cpp_build.py)."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile

import torch

from tracetorch import logs
from tracetorch.compiler import config

log = logs.get_logger(__name__)   # component "cache"

_source_hash = None


def _compiler_source_hash() -> str:
    global _source_hash
    if _source_hash is None:
        h = hashlib.sha256()
        root = os.path.dirname(os.path.abspath(__file__))
        for base in (root, os.path.join(os.path.dirname(root), "aot")):
            for dirpath, _, files in sorted(os.walk(base)):
                for f in sorted(files):
                    if f.endswith(".py"):
                        with open(os.path.join(dirpath, f), "rb") as fh:
                            h.update(f.encode())
                            h.update(fh.read())
        _source_hash = h.hexdigest()[:16]
    return _source_hash


def _spec(v) -> str:
    if isinstance(v, torch.Tensor):
        shape, stride = list(map(str, v.shape)), list(map(str, v.stride()))
        return f"T({shape},{stride},{v.storage_offset()},{v.dtype},{v.device.type})"
    if isinstance(v, torch.SymInt):
        return f"S({v.node.expr})"
    if isinstance(v, (torch.SymFloat, float)):
        # a float input is a runtime scalar of the compiled code (or unused): never its value
        return "F"
    return f"V({type(v).__name__}:{v!r})"


def graph_key(gm, example_inputs) -> str:
    h = hashlib.sha256()
    h.update(gm.code.encode())
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            h.update(_spec(node.meta.get("val")).encode())
        elif node.op == "get_attr":
            # constants are bound at load time, but their sizes/strides are baked into the code
            h.update(f"attr:{node.target}:{_spec(getattr(gm, node.target, None))}".encode())
    for v in example_inputs:
        h.update(_spec(v).encode())
    cfg = config.to_dict()
    for section in ("backend", "cpp", "triton", "testing"):
        items = [(k, v) for k, v in sorted(cfg.get(section, {}).items()) if (section, k) not in _NOT_IN_KEY]
        h.update(repr(items).encode())
    h.update(f"{torch.__version__}|{sys.version_info[:2]}|{_compiler_source_hash()}".encode())
    return h.hexdigest()[:32]


#: options that change how the generated code is compiled, never the code itself
_NOT_IN_KEY = {("triton", "compile_threads"), ("triton", "compile_timeout")}


def _folder() -> str:
    from tracetorch.compiler.backend.runtime.cpp_build import cache_dir
    d = os.path.join(cache_dir(), "graphs")
    os.makedirs(d, exist_ok=True)
    return d


def path_for(key: str) -> str:
    return os.path.join(_folder(), f"{key}.py")


def lookup(key: str):
    """The cached output code for key, or None."""
    if not config.backend.cache_enabled:
        return None
    if config.debug.compile_debug:
        # The debug folder exists to show how this graph was compiled (IR, schedule, kernels);
        # a cache hit would skip those stages and leave their files out, so compile afresh.
        log.info("cache_bypassed", key=key, reason="TRACE_COMPILE_DEBUG=1 wants every stage's artifacts")
        return None
    p = path_for(key)
    _stop_recording()
    if os.path.exists(p):
        with open(p) as f:
            code = f.read()
        replayed = _replay(key)
        log.info("cache_hit", key=key, path=p, artifacts=replayed)
        # issue 18: the hit itself is in the trace (tlparse marks cache_hit files), and the
        # kernels/provenance/fusion records stored with the entry were emitted again above
        logs.artifact("cache_hit", lambda: {"key": key, "path": p, "replayed_artifacts": replayed})
        return code
    log.info("cache_miss", key=key)
    _start_recording(key)
    return None


# -- the records a compile emits, stored with its entry and emitted again on a hit (issue 18) --
_RECORDED = frozenset({"kernel", "kernel_code", "fusion_decision", "fusion", "ir_pre_fusion",
                       "ir_post_fusion", "schedule", "perf_hint", "perf_hints"})
#: of those, the ones whose payloads are already at hand (kernel sources, hints): recorded on
#: every miss. The IR, schedule and fusion records print every node's loop body with SymPy
#: (GPT-2: about 1.2 s of a compile) and are recorded only while some consumer builds them anyway
#: (a trace is open, or a log/sink asked for them): a disabled artifact costs nothing. A hit on
#: an entry stored without them replays what it has.
_CHEAP = frozenset({"kernel", "kernel_code", "perf_hint", "perf_hints"})
_recorder = None   # (key, list of events, sink) between a miss and its store()


def _wanted_records() -> frozenset:
    if logs.tracing():
        return _RECORDED
    return _CHEAP | frozenset(n for n in _RECORDED if logs.enabled(n))


def _artifacts_path(key: str) -> str:
    return os.path.join(_folder(), f"{key}.artifacts.json")


def _start_recording(key: str) -> None:
    global _recorder
    events: list = []

    wanted = _wanted_records()

    def sink(ev):
        if ev.kind == "artifact" and ev.name in wanted:
            events.append({"name": ev.name, "fields": dict(ev.fields), "payload": ev.payload})

    _recorder = (key, events, sink)
    logs.add_sink(sink, artifacts=wanted)


def _stop_recording():
    global _recorder
    rec, _recorder = _recorder, None
    if rec is not None:
        logs.remove_sink(rec[2])
    return rec


def _replay(key: str) -> int:
    import json
    try:
        with open(_artifacts_path(key)) as f:
            items = json.load(f)
    except (OSError, ValueError):
        return 0                      # an entry stored before records were kept with it
    for it in items if isinstance(items, list) else []:
        if isinstance(it, dict) and it.get("name") in _RECORDED:
            logs.artifact(it["name"], lambda p=it.get("payload"): p, **(it.get("fields") or {}))
    return len(items) if isinstance(items, list) else 0


def store(key: str, code: str) -> str:
    p = path_for(key)
    if not config.backend.cache_enabled:
        return p
    rec = _stop_recording()
    if rec is not None and rec[0] == key:
        import json
        fd, tmp = tempfile.mkstemp(suffix=".json", dir=os.path.dirname(p))
        with os.fdopen(fd, "w") as f:
            json.dump(rec[1], f, default=repr)
        os.replace(tmp, _artifacts_path(key))
    fd, tmp = tempfile.mkstemp(suffix=".py", dir=os.path.dirname(p))
    with os.fdopen(fd, "w") as f:
        f.write(code)
    os.replace(tmp, p)
    log.debug("cache_store", key=key, path=p)
    return p
