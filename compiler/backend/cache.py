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
        return f"T({list(map(str, v.shape))},{list(map(str, v.stride()))},{v.storage_offset()},{v.dtype},{v.device.type})"
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
    if os.path.exists(p):
        with open(p) as f:
            code = f.read()
        log.info("cache_hit", key=key, path=p)
        return code
    log.info("cache_miss", key=key)
    return None


def store(key: str, code: str) -> str:
    p = path_for(key)
    if not config.backend.cache_enabled:
        return p
    fd, tmp = tempfile.mkstemp(suffix=".py", dir=os.path.dirname(p))
    with os.fdopen(fd, "w") as f:
        f.write(code)
    os.replace(tmp, p)
    log.debug("cache_store", key=key, path=p)
    return p
