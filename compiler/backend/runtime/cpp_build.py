"""Build C++ kernel sources into shared objects with the system compiler and load them (ctypes).

Shared objects are cached on disk under <cache_dir>/cpp/<hash>.so, keyed by the source, the
compiler command line and the versions involved, so a second process loading the same kernels
does not compile again. Writes go through a temporary file + rename (atomic on POSIX), so
concurrent processes never load a half-written library.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
import time

import torch

from tracetorch import logs
from tracetorch.compiler import config

log = logs.get_logger(__name__)

_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()
_cxx_version: dict[str, str] = {}


def cache_dir() -> str:
    base = config.backend.cache_dir or os.path.join(os.path.expanduser("~"), ".cache", "tracetorch")
    return base


def _compiler_version(cxx: str) -> str:
    if cxx not in _cxx_version:
        try:
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
            _cxx_version[cxx] = out.splitlines()[0] if out else cxx
        except (OSError, subprocess.SubprocessError):
            _cxx_version[cxx] = cxx
    return _cxx_version[cxx]


_MVEC_CANDIDATES = ("sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh exp exp2 expm1 log log2 "
                    "log10 log1p erf erfc pow atan2 hypot").split()
_mvec: list | None = None


def libmvec_functions() -> list[str]:
    """Math functions glibc's libmvec has vector versions of (so loops calling them vectorise)."""
    global _mvec
    if _mvec is None:
        _mvec = []
        try:
            lib = ctypes.CDLL("libmvec.so.1")
        except OSError:
            return _mvec
        for name in _MVEC_CANDIDATES:
            arity = "vv" if name in ("pow", "atan2", "hypot") else "v"
            if all(hasattr(lib, sym) for sym in (f"_ZGVbN4{arity}_{name}f", f"_ZGVbN2{arity}_{name}")):
                _mvec.append(name)
    return _mvec


def simd_math_declarations() -> str:
    """C declarations marking libmvec's functions as having SIMD versions (what glibc's math.h
    does only under -ffast-math, which we avoid: it breaks NaN/inf semantics)."""
    lines = []
    for name in libmvec_functions():
        n = 2 if name in ("pow", "atan2", "hypot") else 1
        for t, suffix in (("float", "f"), ("double", "")):
            params = ", ".join([t] * n)
            lines.append(f'__attribute__((__simd__("notinbranch"))) {t} {name}{suffix}({params});')
    if not lines:
        return ""
    return 'extern "C" {\n' + "\n".join(lines) + "\n}\n"


def compile_command(src: str, out: str) -> list[str]:
    cxx = config.cpp.cxx
    # -fno-math-errno: math calls may be vectorised/inlined (torch never reads errno).
    # -fno-trapping-math: without it GCC will not if-convert a NaN-aware select such as
    # tt_relu's `(x != x || x > 0) ? x : 0` (the ordered compare may raise FE_INVALID), so any loop
    # using one was left scalar ("control flow in loop"), libmvec calls included. No value
    # changes: rounding stays IEEE (that is -frounding-math's business); torch never reads FP flags.
    # -ffp-contract=off: no fused multiply-add where the source has a multiply and an add; FMA
    # skips the product's rounding, so `x * c - max(x * c)` was not 0 at the max (log_softmax gave
    # -inf where torch gives 0). ATen's own kernels round each operation.
    # -fwrapv: signed integer overflow wraps, as torch's integer ops do. Without it overflow is
    # undefined and GCC reasons from it: an argmin index (>= 0) to the power 49 was taken to stay
    # >= 0, so sign(idx ^ idx ** 49) was compiled as 0-or-1 and gave 0 where the wrapped value
    # is negative (fuzz 480784).
    cmd = [cxx, "-shared", "-fPIC", "-std=c++17", "-w", "-fno-math-errno", "-fno-trapping-math",
           "-ffp-contract=off", "-fwrapv", *config.cpp.extra_flags]
    if config.cpp.openmp:
        cmd.append("-fopenmp")
    cmd += [src, "-o", out]
    if libmvec_functions():
        cmd.append("-lmvec")
    return cmd


def source_key(source: str) -> str:
    flags = " ".join(compile_command("SRC", "OUT"))
    h = hashlib.sha256()
    for part in (source, flags, _compiler_version(config.cpp.cxx), torch.__version__, "tracetorch-cpp-1"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


class CppCompileError(RuntimeError):
    pass


def build(source: str) -> str:
    """Path of the shared object for `source`, compiling it if it is not cached."""
    key = source_key(source)
    folder = os.path.join(cache_dir(), "cpp")
    os.makedirs(folder, exist_ok=True)
    so_path = os.path.join(folder, f"{key}.so")
    if os.path.exists(so_path):
        log.debug("cpp_cache_hit", key=key)
        return so_path
    # Each build writes its own temporary source: processes compiling the same kernel at once
    # (parallel minifier candidates, xdist workers) must never truncate a .cpp that another g++
    # is reading, or an empty .so would be renamed into the cache and every later load would
    # fail with "undefined symbol".
    fd, tmp_src = tempfile.mkstemp(suffix=".cpp", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    fd, tmp_out = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    cmd = compile_command(tmp_src, tmp_out)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and "internal compiler error" in proc.stderr:
        # the compiler's own bug (GCC 12's vectorizer on a kernel of fuzz 400205): the same code
        # serial and unvectorized (without -fopenmp its `omp simd` pragmas, which force the
        # vectorizer, are ignored; -fno-tree-vectorize after -O3, which turns it on), logged
        log.warning("cpp_compiler_crashed", key=key, stderr=proc.stderr[-1000:],
                    action="compile again without OpenMP and auto-vectorization")
        cmd = [c for c in cmd if c != "-fopenmp"] + ["-fno-tree-vectorize"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp_out)
        os.unlink(tmp_src)
        log.error("cpp_compile_failed", key=key, command=" ".join(cmd), stderr=proc.stderr[-4000:])
        raise CppCompileError(f"C++ compilation failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
    os.replace(tmp_src, os.path.join(folder, f"{key}.cpp"))  # kept beside the .so for readers
    os.replace(tmp_out, so_path)
    log.info("cpp_compiled", key=key, seconds=round(time.perf_counter() - t0, 3), path=so_path)
    return so_path


def forget_loaded() -> None:
    """Forget which libraries this process has loaded, so the next load of a source goes through
    the disk cache (or a build) again: benchmarks use it to time cold compiles in one process."""
    with _lock:
        _loaded.clear()


def load_library(source: str) -> ctypes.CDLL:
    key = source_key(source)
    with _lock:
        lib = _loaded.get(key)
        if lib is None:
            lib = ctypes.CDLL(build(source))
            _loaded[key] = lib
        return lib


_STATUS = {1: "injected relu runtime error (testing.inject_relu_bug=runtime_error)",
           2: "index out of bounds in an indexing op",
           3: "ZeroDivisionError: integer division by zero"}


class CppKernel:
    """A loaded kernel: call it with tensors (passed as data pointers) and ints."""

    def __init__(self, lib: ctypes.CDLL, name: str, arg_kinds: str):
        self.name = name
        self.fn = getattr(lib, name)
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p if k == "p" else ctypes.c_double if k == "d" else ctypes.c_int64
                            for k in arg_kinds]
        self.arg_kinds = arg_kinds

    def __call__(self, *args):
        # "d": a float scalar (ctypes converts the Python float to a double exactly)
        status = self.fn(*[a.data_ptr() if k == "p" else a if k == "d" else int(a)
                           for k, a in zip(self.arg_kinds, args)])
        if status != 0:
            raise RuntimeError(f"C++ kernel {self.name} failed: {_STATUS.get(status, f'status {status}')}")


class CppModule:
    """All kernels of one compiled graph, built as one shared object."""

    def __init__(self, source: str, kernels: dict[str, str]):
        threads = config.cpp.threads or torch.get_num_threads()
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        self.lib = load_library(source)
        for name, kinds in kernels.items():
            setattr(self, name, CppKernel(self.lib, name, kinds))


def load_cpp_module(source: str, kernels: dict[str, str]) -> CppModule:
    """Entry point used by generated output code."""
    return CppModule(source, kernels)
