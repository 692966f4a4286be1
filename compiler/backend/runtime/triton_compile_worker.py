"""Compile one generated Triton kernel for an explicit specialization, in this process or in a worker.

`compile_spec` is the ONE function that turns (kernel, specialization, target) into Triton's
`triton.compile(ASTSource(...), target=..., options=...)` call. The main process (first launch of a
kernel, runtime/triton_compile.py) and the worker processes of the pre-compilation pool both call
it, so both compute the same Triton cache key: what a worker compiled is an on-disk cache hit for
the main process.

Run as a script (`python triton_compile_worker.py <repo root>`) this file is a pool worker: it
imports triton and nothing of tracetorch but the kernel helpers (`triton_helpers`, loaded through
stub parent packages so that `compiler/__init__` and torch are never imported), then answers one
JSON request per stdin line with one JSON line on its original stdout (anything Triton prints goes
to stderr). It exits at end of input, so it dies with the process that started it.

This module must not import tracetorch or torch at module level.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import types

_BACKENDS: dict = {}
_FNS: dict = {}


def _backend(target):
    key = (target.backend, target.arch, target.warp_size)
    be = _BACKENDS.get(key)
    if be is None:
        from triton.compiler.compiler import make_backend
        be = _BACKENDS[key] = make_backend(target)
    return be


def make_target(backend: str, arch, warp_size: int):
    from triton.backends.compiler import GPUTarget
    return GPUTarget(backend, arch, warp_size)


def make_source(fn, types_, descs, constexprs, target):
    """ASTSource for the specialization: what JITFunction._pack_args builds from its binder.

    types_: one Triton type string per parameter ("*fp32", "i32", "fp64", "constexpr");
    descs: per parameter the specialization descriptor ("D": divisible by 16, "": none, None:
    not specialised, e.g. fp64 scalars); constexprs: ((param index, value), ...)."""
    from triton.compiler import ASTSource
    backend = _backend(target)
    values = dict(constexprs)
    pack = getattr(fn, "_pack_args", None)
    if pack is not None:
        # Triton's own packing of the binder's specialization list (its exact dict contents and
        # order differ between versions: 3.9 lists constexpr positions in attrs, 3.6 does not)
        spec = [("constexpr", values[i]) if ty == "constexpr" else (ty, d)
                for i, (ty, d) in enumerate(zip(types_, descs))]
        bound = {name: values.get(i) for i, name in enumerate(fn.arg_names)}
        try:
            _, signature, consts, attrs = pack(backend, {}, bound, spec, None)
            return ASTSource(fn, signature, consts, attrs)
        except Exception:
            pass
    signature = {name: ty for name, ty in zip(fn.arg_names, types_)}
    consts = {(i,): v for i, v in constexprs}
    attrs = {(i,): backend.parse_attr(d) for i, d in enumerate(descs) if d is not None}
    return ASTSource(fn, signature, consts, attrs)


def parse_options(target, options: dict):
    return _backend(target).parse_options(dict(options))


def compile_spec(fn, types_, descs, constexprs, options: dict, target):
    """Triton's compiled kernel for this specialization (a disk-cache hit if compiled before)."""
    import triton
    src = make_source(fn, types_, descs, constexprs, target)
    opts = parse_options(target, options)
    return triton.compile(src, target=target, options=opts.__dict__)


def key_facts(ck) -> dict:
    """What a compiled kernel's cache key was made of, in a form two processes can compare. The
    key is Triton's install hash, the source's hash (the kernel and every function it calls),
    the backend's hash (the ptxas version and the architecture), the options, the
    cache-invalidating TRITON_* variables, and what a stages inspection hook adds. The options
    and variables are in the kernel's metadata; the rest is recomputed here. When a worker's
    binary and the main process's differ for the same request, the facts that differ name the
    setting (triton_compile.key_differences)."""
    facts = {}
    meta = getattr(ck, "metadata", None)
    fields = meta._asdict() if hasattr(meta, "_asdict") else dict(getattr(meta, "__dict__", {}))
    for k, v in fields.items():
        if k == "hash":
            continue
        if isinstance(v, (tuple, list)):
            v = [x for x in v if isinstance(x, (str, int, float, bool))]
        if isinstance(v, (str, int, float, bool, list)) or v is None:
            facts[k] = v
    for name, compute in (("source_hash", lambda: ck.src.hash()),
                          ("backend_hash", lambda: _backend_hash(fields.get("target"))),
                          ("triton_key", _triton_key_hash),
                          ("stages_hook", _stages_hook_key)):
        try:
            facts[name] = compute()
        except Exception as e:           # a Triton without that part: left out, not guessed
            facts.setdefault("unknown", []).append(f"{name} ({type(e).__name__})")
    return facts


def _backend_hash(target) -> str:
    from triton.compiler.compiler import make_backend
    return str(make_backend(target).hash())


def _triton_key_hash() -> str:
    import hashlib

    from triton.runtime.cache import triton_key
    return hashlib.sha256(triton_key().encode()).hexdigest()[:16]


def _stages_hook_key():
    from triton import knobs
    hook = knobs.runtime.add_stages_inspection_hook
    return None if hook is None else str(hook()[0])[:120]


def build_launcher(ck) -> bool:
    """Triton versions whose CUDA launcher is a small C module compiled per signature (3.6: the
    driver's make_launcher + compile_module_from_src, cached on disk by its source) build it on
    first launch in the main process; a worker builds it here so that it is a cache hit there too.
    False where this Triton has no such step (3.9: one generic launcher) or it failed."""
    return build_launcher_for(ck.src, getattr(ck.metadata, "tensordesc_meta", None))


def build_launcher_for(src, tensordesc_meta=None) -> bool:
    """The launcher of an ASTSource's signature: it needs no compiled kernel, so a second worker
    builds it (a C compiler run, ~0.2 s) while the first compiles the kernel."""
    try:
        from triton.backends.nvidia import driver as nvd
    except Exception:
        return False
    make_launcher = getattr(nvd, "make_launcher", None)
    build = getattr(nvd, "compile_module_from_src", None)
    if make_launcher is None or build is None:
        return False
    constants = {((src.fn.arg_names.index(k),) if isinstance(k, str) else k): v
                 for k, v in getattr(src, "constants", {}).items()}
    signature = dict(src.signature)
    try:
        code = make_launcher(constants, signature, tensordesc_meta)
        build(src=code, name="__triton_launcher", library_dirs=nvd.library_dirs(),
              include_dirs=nvd.include_dirs, libraries=nvd.libraries)
    except Exception:
        return False
    return True


# ------------------------------------------------------------------ worker process

def load_kernel(path: str, name: str, module_name: str):
    """The @triton.jit function `name` of the kernel file (imported once per worker)."""
    key = (path, name)
    fn = _FNS.get(key)
    if fn is None:
        mod = sys.modules.get(module_name)
        if mod is None or getattr(mod, "__file__", None) != path:
            spec = importlib.util.spec_from_file_location(module_name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = mod
            spec.loader.exec_module(mod)
        fn = _FNS[key] = getattr(mod, name)
    return fn


def _stub_packages(root: str) -> None:
    """`tracetorch.compiler.backend.runtime.triton_helpers` without running the packages'
    __init__ files (they import torch). `root` is the folder holding compiler/."""
    for pkg, folder in (("tracetorch", root), ("tracetorch.compiler", ("compiler",)),
                        ("tracetorch.compiler.backend", ("compiler", "backend")),
                        ("tracetorch.compiler.backend.runtime", ("compiler", "backend", "runtime"))):
        if pkg not in sys.modules:
            m = types.ModuleType(pkg)
            m.__path__ = [folder if isinstance(folder, str) else os.path.join(root, *folder)]
            sys.modules[pkg] = m


def _set_env(env: dict) -> None:
    for k in [k for k in os.environ if k.startswith("TRITON_") and k not in env]:
        del os.environ[k]
    os.environ.update(env)


def pin_backend_hash(target, main_hash: str | None) -> bool:
    """Make this worker's backend hash (part of every compile key) the main process's.

    Triton computes the ptxas version that goes into the backend hash once per process and
    caches it. The main process may have computed it before inductor set TRITON_PTXAS_PATH (to
    torch's own ptxas, the first time inductor compiles in-process); a worker started later
    computes it from the new variable. The same ptxas then compiles in both processes, yet every
    binary a worker made had another key and missed in the main process, which compiled them all
    again (ResNet-50 and ViT-B/16 first calls after inductor's on an H100: all 50 and 38
    kernels). The worker is ours and compiles only for the main process, so its key follows the
    main process's. True when the hash had to be pinned."""
    if not main_hash:
        return False
    from triton.compiler.compiler import make_backend
    cls = type(make_backend(target))
    if cls.hash(make_backend(target)) == main_hash:
        return False
    cls.hash = lambda self, _pinned=main_hash: _pinned
    return True


def handle(req: dict) -> dict:
    op = req.get("op", "compile")
    if op == "ping":
        return {"pid": os.getpid()}
    if op not in ("compile", "launcher"):
        raise ValueError(f"unknown op {op!r}")
    _set_env(req.get("env", {}))
    target = make_target(*req["target"])
    pin_backend_hash(target, req.get("backend_hash"))
    fn = load_kernel(req["path"], req["name"], req["module"])
    if op == "launcher":
        src = make_source(fn, req["types"], req["descs"], [tuple(c) for c in req["constexprs"]], target)
        return {"launcher": build_launcher_for(src)}
    t0 = time.perf_counter()
    ck = compile_spec(fn, req["types"], req["descs"], [tuple(c) for c in req["constexprs"]],
                      req["options"], target)
    out = {"hash": ck.hash, "compile_s": round(time.perf_counter() - t0, 4), "key_facts": key_facts(ck)}
    if req.get("launcher", True):
        out["launcher"] = build_launcher(ck)
    return out


_WARM_SRC = """import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def tracetorch_worker_warmup(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    x = tl.load(in_ptr0 + xindex, xmask).to(tl.float32)
    tl.store(out_ptr0 + xindex, libdevice.tanh(x) * 0.5 + tl.sum(x, 0), xmask)
"""


def warm_up(target) -> None:
    """Pay Triton's one-time costs (backend, LLVM, libdevice) before the first real request: compile
    a small kernel into a private, throw-away cache folder."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tracetorch_warm_") as d:
        path = os.path.join(d, "tracetorch_worker_warmup.py")
        with open(path, "w") as f:
            f.write(_WARM_SRC)
        old = os.environ.get("TRITON_CACHE_DIR")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(d, "cache")
        try:
            fn = load_kernel(path, "tracetorch_worker_warmup", "tracetorch_worker_warmup")
            compile_spec(fn, ["*fp32", "*bf16", "i32", "constexpr"], ["D", "D", "D", ""], [(3, 1024)],
                         {"num_warps": 4, "num_stages": 1}, target)
        finally:
            if old is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = old
            _FNS.pop((path, "tracetorch_worker_warmup"), None)
            sys.modules.pop("tracetorch_worker_warmup", None)


def main(argv) -> int:
    root = argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)                # run as a script: its folder is not a package root
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                      # stray prints must not corrupt the protocol
    _stub_packages(root)
    import triton  # noqa: F401  (the import is the worker's start-up cost: pay it before requests)
    if len(argv) >= 5:                 # a target to warm up for: backend arch warp_size
        try:
            arch = int(argv[3]) if argv[3].isdigit() else argv[3]
            warm_up(make_target(argv[2], arch, int(argv[4])))
        except Exception:
            pass
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            rid = req.get("id")
        except ValueError as e:
            proto.write(json.dumps({"id": None, "ok": False, "error": f"bad request: {e}"}) + "\n")
            continue
        try:
            res = {"id": rid, "ok": True, **handle(req)}
        except BaseException as e:    # noqa: BLE001  (any failure is reported, the worker lives on)
            res = {"id": rid, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        proto.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
