"""The per-call checks of compiled calls over many objects, each in one call: do these tensors
still have the metadata the code was compiled for, and are these dict entries still the objects
the guards resolved?

Every call of a compiled function checks the tensors it reads without taking them as arguments:
a module's parameters and buffers (the guards' static tensors) and, for a compiled optimizer
step, every parameter's gradient and state (aot.inference.InputCheck). Their dtype, device,
sizes, strides and requires_grad must be those the code was compiled for. Read from Python that
is about 0.7 us per tensor, because every property read builds an object: ResNet-50's guards
spent ~200 of their ~440 us per call on its 267 static tensors (this project's CPU machine), where
Dynamo's guards, in C++, spend a few. On a GPU, a host-bound call waits for exactly that time.

`TensorLayout.of(tensors)` remembers the metadata; `layout.matches(tensors)` compares. Likewise the
guards' module fingerprint (frontend/mutation.py) reads ~1500 dict entries per ResNet-50 call
and compares them with the objects it resolved: `DictEntries(...).same()`. Both use a small
C++ extension (native_checks.cpp: a loop over the TensorImpls, dict lookups without
__getitem__) when one is built, and Python's reads otherwise, with the same answer. The
extension is built once per machine, in a background thread the first time a check is made
(about 15 s of one core), into ~/.cache/tracetorch/native/ (keyed by the source, torch's and
Python's versions); until it is loaded, and wherever it cannot be built (no C++ compiler), the
Python reads answer. A native "no" is confirmed by the Python reads, so the native path can only
make a check faster, never change its answer. config.backend.native_checks = False keeps everything in Python.
"""
from __future__ import annotations

import contextvars
import hashlib
import importlib.machinery
import importlib.util
import itertools
import operator
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

import torch

from tracetorch import logs

log = logs.get_logger(__name__)

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native_checks.cpp")
_MODULE_NAME = "tracetorch_native_checks"
#: one C-level read of a tensor's metadata, in the order of TensorLayout.metas (the guards' static
#: tensors are compared in it too, frontend/guards.py)
TENSOR_META = operator.attrgetter("dtype", "device", "shape", "requires_grad")
_STRIDE = torch.Tensor.stride


class _Native:
    """The extension's state in this process: not started, building, loaded or unavailable."""

    def __init__(self):
        self.lock = threading.Lock()
        self.module = None
        self.status = "unstarted"     # -> "building" -> "loaded" | "unavailable"


_NATIVE = _Native()


def native():
    """The loaded extension module, or None (the first call starts loading or building it)."""
    if _NATIVE.module is not None:
        return _NATIVE.module
    if _NATIVE.status == "unstarted":
        _start()
    return _NATIVE.module


def _enabled() -> bool:
    from tracetorch.compiler import config
    return bool(config.backend.native_checks)


def _start() -> None:
    with _NATIVE.lock:
        if _NATIVE.status != "unstarted":
            return
        if not _enabled():
            return                      # asked again at the next check (the option may change)
        _NATIVE.status = "building"
    path = library_path()
    if os.path.exists(path):
        _load(path, built_s=None)
        return
    # in the compile's context: the build's events carry the compile id that started it
    threading.Thread(target=contextvars.copy_context().run, args=(_build_and_load, path),
                     name="tracetorch-native-build", daemon=True).start()


def library_path() -> str:
    """Where this machine's build lives: one per source, compiler, torch install and Python. (Read
    on the first compiled call: torch's install folder stands for the include and library paths,
    which only the build itself imports torch.utils.cpp_extension to list, 0.1 s.)"""
    with open(_SOURCE, "rb") as f:
        source = f.read()
    key = hashlib.sha256(b"\0".join([source, os.environ.get("CXX", "g++").encode(), torch.__version__.encode(),
                                     os.path.dirname(torch.__file__).encode(), sys.version.encode(),
                                     sysconfig.get_paths()["include"].encode()])).hexdigest()[:16]
    base = os.path.join(os.path.expanduser("~"), ".cache", "tracetorch", "native")
    return os.path.join(base, f"{_MODULE_NAME}-{key}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}")


def _compile_command(source: str, output: str) -> list[str]:
    from torch.utils import cpp_extension
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    includes = cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]
    return ([os.environ.get("CXX", "g++"), "-O2", "-shared", "-fPIC", "-std=c++17", "-w",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
            + [f"-I{p}" for p in includes]
            + [source, "-o", output, f"-L{torch_lib}", "-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10",
               f"-Wl,-rpath,{torch_lib}"])


def _build_and_load(path: str) -> None:
    t0 = time.perf_counter()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".so.tmp")
        os.close(fd)
        try:
            done = subprocess.run(_compile_command(_SOURCE, tmp), capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"the C++ compiler failed: {done.stderr.strip()[-400:]}")
            os.replace(tmp, path)     # atomic: another process loads the whole file or none
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    except Exception as e:        # (no compiler, no headers, a timeout): the Python reads stay
        _NATIVE.status = "unavailable"
        log.warning("native_checks_unavailable", error=f"{type(e).__name__}: {e}"[:500],
                    action="tensor metadata is checked from Python (slower per call)")
        return
    _load(path, built_s=round(time.perf_counter() - t0, 2))


def _load(path: str, built_s) -> None:
    try:
        loader = importlib.machinery.ExtensionFileLoader(_MODULE_NAME, path)
        spec = importlib.util.spec_from_loader(_MODULE_NAME, loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except Exception as e:
        _NATIVE.status = "unavailable"
        log.warning("native_checks_unavailable", error=f"{type(e).__name__}: {e}"[:500], path=path,
                    action="tensor metadata is checked from Python (slower per call)")
        return
    _NATIVE.module = module
    _NATIVE.status = "loaded"
    log.info("native_checks_loaded", path=path, built_s=built_s)


def wait_until_loaded(timeout: float = 600.0) -> bool:
    """Start loading or building the extension if that has not begun, and wait for the outcome
    (tests, and scripts that want every timed call native). True when it is loaded."""
    native()
    deadline = time.monotonic() + timeout
    while _NATIVE.status == "building" and time.monotonic() < deadline:
        time.sleep(0.05)
    return _NATIVE.module is not None


class TensorLayout:
    """The dtype, device, sizes, strides and requires_grad of a fixed sequence of tensors:
    `metas` as (dtype, device, torch.Size, requires_grad) per tensor, `strides` as tuples."""

    __slots__ = ("metas", "strides", "record")

    def __init__(self, metas: list, strides: list):
        self.metas = list(metas)
        self.strides = [tuple(s) for s in strides]
        self.record = None            # the extension's bytes, made from tensors that matched

    @classmethod
    def of(cls, tensors) -> "TensorLayout":
        """The layout `tensors` have now (raises for a tensor without strides, e.g. sparse)."""
        return cls(map(TENSOR_META, tensors), map(_STRIDE, tensors))

    def matches(self, tensors) -> bool:
        """Do `tensors` (a list or tuple) have exactly this metadata? Raises nothing."""
        mod = _NATIVE.module if _NATIVE.module is not None else native()
        if mod is not None and self.record is not None:
            if mod.check(tensors, self.record):
                return True
        try:
            same = list(map(TENSOR_META, tensors)) == self.metas and list(map(_STRIDE, tensors)) == self.strides
        except (AttributeError, TypeError, RuntimeError):
            return False
        if same and mod is not None and self.record is None:
            self.record = mod.record(tensors)
        return same


class DictEntries:
    """mappings[i][keys[i]] is expected[i], for every i, compared by identity. `exact`: the
    mappings are exact dicts or OrderedDicts (a module's __dict__, _parameters, _buffers,
    _modules), which the extension reads without __getitem__; other mappings keep their own
    __getitem__ and are read from Python."""

    __slots__ = ("dicts", "keys", "expected", "exact", "_getters", "_gdicts", "_gobjs")

    def __init__(self, dicts, keys, expected, exact: bool = True):
        self.dicts, self.keys, self.expected = tuple(dicts), tuple(keys), tuple(expected)
        self.exact = exact
        # the Python reads: one itemgetter per mapping (two keys at least, so that it returns a
        # tuple), all called from C, the values compared pairwise by identity from C
        # (operator.is_: not ==, which a one-element tensor answers by value)
        groups: dict[int, tuple] = {}
        for d, k, obj in zip(self.dicts, self.keys, self.expected):
            entry = groups.setdefault(id(d), (d, [], []))
            entry[1].append(k)
            entry[2].append(obj)
        getters, gdicts, gobjs = [], [], []
        for d, keys, objs in groups.values():
            if len(keys) == 1:
                keys, objs = keys * 2, objs * 2
            getters.append(operator.itemgetter(*keys))
            gdicts.append(d)
            gobjs += objs
        self._getters, self._gdicts, self._gobjs = tuple(getters), tuple(gdicts), tuple(gobjs)
        if exact:
            native()

    def same(self) -> bool:
        mod = _NATIVE.module
        if self.exact and mod is not None and mod.items_are(self.dicts, self.keys, self.expected):
            return True
        try:
            return all(map(operator.is_, itertools.chain.from_iterable(map(operator.call, self._getters,
                                                                           self._gdicts)), self._gobjs))
        except (KeyError, TypeError):
            return False
