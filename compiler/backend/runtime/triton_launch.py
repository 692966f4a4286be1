"""Run generated Triton kernels: write the source to a file, import it, launch it with a grid.

Triton's @jit reads the kernel's source back through `inspect`, so a generated kernel must live in
a real file. Files are named after the hash of their source (`<dir>/<h[:2]>/k_<h>.py`), so the
same kernel compiled twice (another graph, another process) maps to the same file, and Triton's
own on-disk cache of compiled binaries then hits too.

CPU tensors run through Triton's interpreter (TRITON_INTERPRET=1, used by the CPU tests and by
`backend.cpu_codegen = "triton"`). The interpreter must be on both when @jit runs (it decides what
kind of function the decorator returns) and while the kernel runs, so `interpreter_mode()` sets it
around both; on a machine without a GPU the tests simply run the whole process with it set.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from functools import reduce
from operator import methodcaller, or_
from typing import Any, Callable

from tracetorch import logs

log = logs.get_logger(__name__)

_LOCK = threading.Lock()
_DATA_PTR = methodcaller("data_ptr")     # (any tensor-like: the tests pass stand-ins)
_MODULES: dict[str, Any] = {}          # file path -> imported module (one import per process)


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def kernel_dir() -> str:
    """Where kernel files go: config.triton.kernel_dir, else <tmp>/tracetorch_<user>/triton."""
    try:
        from tracetorch.compiler import config
        d = config.triton.kernel_dir
    except (ImportError, AttributeError):
        d = None
    if not d:
        user = os.environ.get("USER") or str(os.getuid())
        d = os.path.join(tempfile.gettempdir(), f"tracetorch_{user}", "triton")
    return d


def write_source(source: str) -> str:
    """Write `source` under its hash (atomically: another process may be writing it too)."""
    h = source_hash(source)
    path = os.path.join(kernel_dir(), h[:2], f"k_{h[:40]}.py")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
        log.debug("triton_source_written", path=path)
    return path


def interpreter_active() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@contextlib.contextmanager
def interpreter_mode(on: bool):
    """Set TRITON_INTERPRET for the duration (Triton reads it at @jit time and at launch)."""
    if on == interpreter_active():
        yield
        return
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


def interpreter_usable() -> bool:
    """The interpreter works only if TRITON_INTERPRET was set when triton itself was imported:
    triton.language's own @jit helpers (tl.sum, ...) are made interpretable at that moment."""
    if "triton" not in sys.modules:
        if interpreter_active():
            return True
        import torch
        if not torch.cuda.is_available():
            # A process without CUDA can only interpret Triton: switch it on before the import.
            os.environ["TRITON_INTERPRET"] = "1"
            return True
        return False
    try:
        from triton.language import standard
        from triton.runtime.interpreter import InterpretedFunction
        return isinstance(standard.sum, InterpretedFunction)
    except ImportError:
        return False


def module_name(path: str, interpret: bool = False) -> str:
    return f"tracetorch_triton_{os.path.basename(path)[:-3]}{'_interp' if interpret else ''}"


def import_source(source: str, interpret: bool = False):
    """Import the module holding `source` (once per process per file) and return it."""
    path = write_source(source)
    key = f"{path}:{int(interpret)}"
    with _LOCK:
        mod = _MODULES.get(key)
        if mod is None:
            name = module_name(path, interpret)
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod   # Triton looks functions up by module for nested @jit calls
            with interpreter_mode(interpret):
                spec.loader.exec_module(mod)
            _MODULES[key] = mod
    return mod


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class LaunchConfig:
    """One point of the autotuning space: constexpr block sizes plus Triton launch options."""
    meta: dict[str, int]                       # e.g. {"XBLOCK": 1024} or {"XBLOCK": 1, "RBLOCK": 2048}
    num_warps: int = 4
    num_stages: int = 1

    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.meta.items())) + \
            f",num_warps={self.num_warps},num_stages={self.num_stages}"

    def to_json(self) -> dict:
        return {"meta": dict(self.meta), "num_warps": self.num_warps, "num_stages": self.num_stages}

    @staticmethod
    def from_json(d: dict) -> "LaunchConfig":
        return LaunchConfig(dict(d["meta"]), int(d["num_warps"]), int(d["num_stages"]))


@dataclass
class TritonKernel:
    """A generated kernel, loaded and ready to launch.

    grid_fn(meta, *size_args) -> (gx, gy, gz) computes the launch grid from the chosen block sizes
    and the kernel's size arguments (symbolic sizes arrive at run time as ints)."""
    name: str
    source: str
    grid_fn: Callable[..., tuple]
    interpret: bool = False
    fn: Any = field(default=None, repr=False)
    # Triton's compiled kernels by ((device, target), specialization): see runtime/triton_compile.py
    compiled: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.path = write_source(self.source)
        self.module_name = module_name(self.path, self.interpret)
        if self.fn is None:
            mod = import_source(self.source, self.interpret)
            self.fn = getattr(mod, self.name)

    @staticmethod
    def device_key(target, device: int | None = None) -> tuple:
        from tracetorch.compiler.backend.runtime import triton_compile
        return (device, triton_compile.target_key(target))

    def spec(self, args: list, size_args: list, config: LaunchConfig):
        from tracetorch.compiler.backend.runtime import triton_compile
        return triton_compile.specialize(self.fn, list(args) + list(size_args), config.meta,
                                         config.num_warps, config.num_stages)

    def compile(self, spec, target, device: int | None = None):
        """Triton's compiled kernel for this specialization (memoised per device and target)."""
        key = (self.device_key(target, device), spec)
        ck = self.compiled.get(key)
        if ck is None:
            from tracetorch.compiler.backend.runtime import triton_compile
            ck = self.compiled[key] = triton_compile.compile_kernel(self, spec, target)
        return ck

    def launch(self, args: list, size_args: list, config: LaunchConfig):
        grid = self.grid_fn(config.meta, *size_args)
        if self.interpret:
            with interpreter_mode(True):
                # The interpreter ignores warps and stages; passing them keeps one call path.
                return self.fn[grid](*args, *size_args, **config.meta,
                                     num_warps=config.num_warps, num_stages=config.num_stages)
        spec = self.spec(args, size_args, config)
        if spec is not None:
            # Compile this exact specialization explicitly (a disk-cache hit when the worker pool
            # compiled it ahead of time) and launch Triton's compiled kernel directly.
            from tracetorch.compiler.backend.runtime import triton_compile
            device = triton_compile.current_device()
            ck = self.compile(spec, triton_compile.current_target(device), device)
            full = list(args) + list(size_args)
            full += [config.meta[k] for k in self.fn.arg_names[len(full):]]
            run = ck.run                   # loads the binary on first use
            stream = current_stream(device)
            enter, leave = launch_hooks()
            meta = None if enter is None else ck.launch_metadata(grid, stream, *full)
            gx, gy, gz = (tuple(grid) + (1, 1))[:3]
            run(gx, gy, gz, stream, ck.function, ck.packed_metadata, meta, enter, leave, *full)
            return ck
        return self.fn[grid](*args, *size_args, **config.meta,
                             num_warps=config.num_warps, num_stages=config.num_stages)


class TritonLauncher:
    """What the output code binds a kernel name to (define_code of codegen/triton.py).

    Called with the kernel's call_args (tensors, then size-symbol ints): computes xnumel/rnumel
    from the sizes, picks the launch config for this size bucket (autotuned on CUDA on the first
    call, remembered afterwards), computes the grid and launches."""

    def __init__(self, name: str, source: str, *, kind: str, n_ptrs: int, numel: Callable, n_floats: int = 0,
                 rblock: int | None = None, interpret: bool = False, clone_args: tuple = (),
                 status: bool = False, persistent_source: str | None = None,
                 persistent_max: int = 0, ptr_types: tuple | None = None, outer: bool = False):
        self.name, self.kind, self.n_ptrs, self.numel = name, kind, n_ptrs, numel
        # a reduction whose loads are contiguous along its outputs (autotune.reduction_configs)
        self.outer = outer
        # float scalar arguments (after the pointers): passed at every launch, never in the plan
        self.n_floats = n_floats
        # kernel reports a failure in an int32 status word: True = read after every launch,
        # "async" = read at the next launch on CUDA (see _async_status)
        self.status = status
        self.rblock, self.clone_args = rblock, tuple(clone_args)
        self.reduction = kind not in ("pointwise", "combo")
        self.kernel = TritonKernel(name, source, self._grid, interpret=interpret)
        # symbolic reduction size: a persistent variant for rows that fit in one block
        self.persistent_source, self.persistent_max = persistent_source, persistent_max
        self.interpret = interpret
        self.persistent_kernel = None
        self._configs: dict[tuple, LaunchConfig] = {}
        self._plans: dict[tuple, LaunchPlan] = {}
        # CUDA, status "async": (device status word, pinned host copy) (see _async_status)
        self._status_words = None
        # Triton pointer types of the tensor arguments ('*fp32', ...), known at codegen time:
        # what ahead-of-time compilation needs besides the sizes (precompile_items)
        self.ptr_types = tuple(ptr_types) if ptr_types is not None else None

    def precompile_items(self, size_hints: dict | None = None) -> list:
        """(kernel, specialization) pairs the first call will compile: the launch plan's kernel
        at the sizes known now (static sizes, or `size_hints` by size-argument name) with
        16-byte-aligned pointers, for the default config and, where the sweep will run, every
        autotuning candidate. Empty where the sizes are not known."""
        if self.interpret or self.ptr_types is None or len(self.ptr_types) != self.n_ptrs:
            return []
        code = self.numel.__code__
        names = code.co_varnames[:code.co_argcount]
        try:
            sizes = [int(size_hints[n]) for n in names] if names else []
        except (KeyError, TypeError, ValueError):
            return []
        xnumel, rnumel = (int(v) for v in self.numel(*sizes))
        if xnumel == 0:
            return []
        ints = sizes + [xnumel] + ([rnumel] if self.reduction else [])
        from tracetorch.compiler.backend import autotune
        from tracetorch.compiler.backend.runtime import triton_compile
        kernel, kind, rblock = self._pick(rnumel) if self.reduction else (self.kernel, self.kind, None)
        key = (kind,) + autotune.size_bucket([xnumel, rnumel])
        cfg = self._configs.get(key)
        if cfg is None:
            cfg = autotune.known_config(kernel, ints)
        if cfg is not None:
            cands = [cfg]
        else:
            cands = autotune.candidates_to_compile(kernel, self._candidates(kind, xnumel, rnumel))
        if kind == "persistent":       # the plan launches the chosen config with RBLOCK = rblock
            cands = cands + [LaunchConfig({**c.meta, "RBLOCK": rblock}, c.num_warps, c.num_stages)
                             for c in cands if c.meta.get("RBLOCK") != rblock]
        values = [triton_compile.Ptr(t) for t in self.ptr_types]
        if self.status:
            values.append(triton_compile.Ptr("*i32"))
        values += [0.0] * self.n_floats
        out = []
        for c in cands:
            spec = triton_compile.specialize(kernel.fn, values + ints, c.meta, c.num_warps, c.num_stages)
            if spec is not None:
                out.append((kernel, spec))
        return out

    def _grid(self, meta, *ints):
        xnumel = ints[-2] if self.reduction else ints[-1]
        return (cdiv(xnumel, meta["XBLOCK"]), 1, 1)

    def _candidates(self, kind, xnumel, rnumel):
        from tracetorch.compiler import config
        from tracetorch.compiler.backend import autotune
        if kind == "combo":       # the parts' program ranges were fixed for this block size
            from tracetorch.compiler.backend.codegen.triton_combo import COMBO_WARPS, COMBO_XBLOCK
            return [LaunchConfig({"XBLOCK": COMBO_XBLOCK}, num_warps=COMBO_WARPS)]
        if kind == "pointwise":
            cands = autotune.pointwise_configs(xnumel)
        else:
            cands = autotune.reduction_configs(xnumel, rnumel, persistent=kind == "persistent",
                                               outer=self.outer)
        # Each candidate is one more Triton compile (cold compile time); where the heuristic
        # default is as good as the sweep's winner, only the default is used.
        if kind != "looped" and not config.triton.autotune_pointwise:
            cands = cands[:1]
        return cands

    def _pick(self, rnumel):
        """(kernel, kind, RBLOCK or None) for this reduction size."""
        if self.persistent_source is not None and 0 < rnumel <= self.persistent_max:
            if self.persistent_kernel is None:
                self.persistent_kernel = TritonKernel(self.name, self.persistent_source, self._grid,
                                                      interpret=self.interpret)
            return self.persistent_kernel, "persistent", 1 << (rnumel - 1).bit_length()
        return self.kernel, self.kind, self.rblock

    def __call__(self, *call_args):
        # Hot path: one dict lookup by the size arguments gives the launch plan (grid, config,
        # integer arguments); a second by pointer alignment gives Triton's compiled kernel, which is
        # launched directly. Triton's own JITFunction.run re-binds and re-specialises every argument
        # on every launch (tens of microseconds); the plan makes a steady-state launch a few.
        n = self.n_ptrs
        nf = self.n_floats
        sizes = call_args[n + nf:] if nf else call_args[n:]
        plan = self._plans.get(sizes)
        if plan is None:
            plan = self._plan(sizes, call_args[:n + nf])
            if plan is None:
                return              # nothing to compute: outputs are empty
        if plan.fast is not None and n:
            ptrs = call_args[:n]
            device = ptrs[0].get_device()
            # The addresses, read once: they give the alignment key and are what the launch
            # passes. Triton's launcher takes an int as the pointer itself; given a tensor it
            # calls data_ptr() and asks the driver to validate the address (cuPointerGetAttribute),
            # once per pointer per launch (an optimizer step's 644 pointers: ~0.5 ms per step).
            addrs = list(map(_DATA_PTR, ptrs))
            if reduce(or_, addrs) & 15 == 0:      # the usual case: every pointer 16-byte aligned
                align = (device << n) | ((1 << n) - 1)
            else:
                align = device
                for a in addrs:
                    align = (align << 1) | ((a & 15) == 0)
            compiled = plan.fast.get(align)
            if self.status:                       # "async" (scatters): see _async_status
                ptrs = ptrs + (self._async_status(ptrs[0].device),) + call_args[n:n + nf]
            elif nf:
                ptrs = call_args[:n + nf]         # the pointers, then the float scalars
            if compiled is not None:
                ck, run, function, packed, launch, cooperative, pdl = compiled
                stream = current_stream(device)
                enter, leave = launch_hooks()
                if enter is None:
                    args = addrs + list(ptrs[n:]) if len(ptrs) > n else addrs
                    if launch is not None:
                        launch(plan.gx, plan.gy, plan.gz, stream, function, cooperative, pdl, None, None,
                               packed, None, None, leave, *args, *plan.tail)
                    else:
                        run(plan.gx, plan.gy, plan.gz, stream, function, packed, None, enter, leave,
                            *args, *plan.tail)
                else:
                    # what JITFunction.run passes: metadata for the hooks, made from the tensors
                    meta = ck.launch_metadata(plan.grid, stream, *ptrs, *plan.tail)
                    run(plan.gx, plan.gy, plan.gz, stream, function, packed, meta, enter, leave,
                        *ptrs, *plan.tail)
            else:
                ck = plan.kernel.launch(list(ptrs), plan.ints, plan.cfg)
                plan.remember(align, ck)
            if self.status:
                self._after_async_launch()
            return
        self._launch_slow(plan, list(call_args[:n]), list(call_args[n:n + nf]))

    def _plan(self, sizes, ptrs) -> "LaunchPlan | None":
        """Everything about a launch that depends only on the size arguments (cached per sizes)."""
        int_sizes = [int(s) for s in sizes]
        xnumel, rnumel = (int(v) for v in self.numel(*int_sizes))
        if xnumel == 0:
            return None
        ints = int_sizes + [xnumel] + ([rnumel] if self.reduction else [])
        from tracetorch.compiler.backend.autotune import choose_config, size_bucket
        kernel, kind, rblock = self._pick(rnumel) if self.reduction else (self.kernel, self.kind, None)
        key = (kind,) + size_bucket([xnumel, rnumel])
        cfg = self._configs.get(key)
        if cfg is None:
            args = list(ptrs[:self.n_ptrs])
            if self.status:
                import torch
                args.append(torch.zeros(1, dtype=torch.int32, device=ptrs[0].device))
            args += list(ptrs[self.n_ptrs:])     # float scalars (ptrs holds them after the pointers)
            cfg = choose_config(kernel, self._candidates(kind, xnumel, rnumel), args, ints,
                                clone_args=self.clone_args)
            if kind == "persistent":
                cfg = LaunchConfig({**cfg.meta, "RBLOCK": rblock}, cfg.num_warps, cfg.num_stages)
            self._configs[key] = cfg
        # a status word read after every launch needs the slow path; an "async" one (scatters
        # on CUDA) rides along in the direct launch (_async_status)
        direct = not (self.interpret or self.status is True)
        plan = LaunchPlan(kernel, cfg, ints, self._grid(cfg.meta, *ints), direct=direct)
        if len(self._plans) < 64:      # dynamic sizes: keep the cache bounded
            self._plans[tuple(sizes)] = plan
        return plan

    def _launch_slow(self, plan, ptrs, floats=()):
        if not self.status:
            plan.kernel.launch(ptrs + list(floats), plan.ints, plan.cfg)
            return
        import torch
        device = ptrs[0].device
        status = torch.zeros(1, dtype=torch.int32, device=device)
        plan.kernel.launch(ptrs + [status] + list(floats), plan.ints, plan.cfg)
        if int(status.item()) != 0:
            raise RuntimeError(f"{self.name}: {_STATUS_MESSAGE}")

    def _async_status(self, device):
        """The status word of a scatter kernel on CUDA: one per launcher, sticky (a kernel only
        ever sets it), with a pinned host copy refreshed after every launch without a sync.
        Reading it right away would stall the host on every launch (a scatter in every call of
        a model); as with ATen's own device-side index asserts, a bad index surfaces after the
        launch: at this kernel's next launch, or at check_all_statuses(). Its out-of-range
        stores are masked off, so nothing outside the buffers is ever written."""
        if self._status_words is None:
            import torch
            dev = torch.zeros(1, dtype=torch.int32, device=device)
            host = torch.zeros(1, dtype=torch.int32, device="cpu", pin_memory=True)
            self._status_words = (dev, host)
            _ASYNC_STATUS.add(self)
        self.check_status()
        return self._status_words[0]

    def _after_async_launch(self):
        dev, host = self._status_words
        host.copy_(dev, non_blocking=True)

    def check_status(self, wait: bool = False) -> None:
        """Raise if a CUDA launch of this (async-status) kernel reported a failure. The host
        copy may lag the device by the launches still in flight; wait=True synchronises."""
        if self._status_words is None:
            return
        dev, host = self._status_words
        if wait:
            import torch
            torch.cuda.synchronize(dev.device)
        if host.item() != 0:
            raise RuntimeError(f"{self.name}: an earlier launch {_STATUS_MESSAGE} (checked after the "
                               "launch, as CUDA reports device-side errors)")


#: launchers with an asynchronously read status word (they register on their first CUDA launch)
_ASYNC_STATUS: "weakref.WeakSet[TritonLauncher]" = weakref.WeakSet()


def check_all_statuses() -> None:
    """Wait for every CUDA launch of a kernel with an asynchronously read status word, and
    raise if one reported a failure (what a caller that must know now, such as a test, calls)."""
    for launcher in list(_ASYNC_STATUS):
        launcher.check_status(wait=True)


_STATUS_MESSAGE = ("kernel reported a failure: an index out of range (its stores were masked "
                   "off), or the injected relu runtime error (testing.inject_relu_bug)")


class LaunchPlan:
    """A launch at fixed sizes: grid, config and integer arguments, plus Triton's compiled kernels
    keyed by the device and by which pointers are 16-byte aligned (Triton specialises on that, and
    on the integers, which the plan fixes). `fast` is None where a direct launch is not possible (interpreter)."""

    __slots__ = ("kernel", "cfg", "ints", "grid", "gx", "gy", "gz", "tail", "fast")

    def __init__(self, kernel: TritonKernel, cfg: LaunchConfig, ints: list, grid: tuple, direct: bool):
        self.kernel, self.cfg, self.ints = kernel, cfg, ints
        self.grid = tuple(grid)
        self.gx, self.gy, self.gz = (self.grid + (1, 1))[:3]
        self.fast = None
        self.tail = None
        if direct:
            names = list(getattr(kernel.fn, "arg_names", []) or [])
            n_pos = len(names) - len(cfg.meta)
            # Triton's launcher takes every parameter in signature order, constexprs included
            # (it skips them itself): the integers, then the block sizes, must come in that order.
            if n_pos >= len(ints) and all(k in cfg.meta for k in names[n_pos:]):
                self.tail = tuple(ints) + tuple(cfg.meta[k] for k in names[n_pos:])
                self.fast = {}

    def remember(self, align: int, compiled) -> None:
        """Keep Triton's compiled kernel from a slow launch for direct launches later."""
        run = getattr(compiled, "run", None)
        function = getattr(compiled, "function", None)
        packed = getattr(compiled, "packed_metadata", None)
        if run is None or function is None or packed is None:
            self.fast = None       # an unknown Triton: stay on the slow path
            return
        launch = direct_launch(run)
        self.fast[align] = (compiled, run, function, packed, launch,
                            getattr(run, "launch_cooperative_grid", None), getattr(run, "launch_pdl", None))


#: Triton launcher classes -> does calling them only pass their arguments on to `launch`?
_PASS_THROUGH: dict = {}

# What a pass-through launcher's __call__ may read besides its arguments: its compiled `launch`,
# the two launch flags it forwards, and the scratch-memory bookkeeping that does nothing for a
# kernel without scratch memory.
_PASS_THROUGH_NAMES = {"launch", "launch_cooperative_grid", "launch_pdl", "global_scratch_size",
                       "global_scratch_align", "profile_scratch_size", "profile_scratch_align",
                       "num_ctas", "_allocation", "_allocator", "_profile_allocator", "get"}
_PASS_THROUGH_PARAMS = ("self", "gridX", "gridY", "gridZ", "stream", "function")


def direct_launch(run) -> Callable | None:
    """The compiled launch function behind Triton's launcher object `run`, or None.

    Triton's CUDA launcher is a Python object whose __call__ allocates scratch memory for kernels
    that need it and then calls its compiled `launch` with two launch flags and the two scratch
    pointers inserted after the function handle. That Python frame (a closure and two calls)
    costs 1-2 us per launch, and a training step makes hundreds of launches. For a kernel with
    no scratch memory, the direct call `launch(gx, gy, gz, stream, function, cooperative, pdl,
    None, None, *rest)` does the same. Used only where the launcher's __call__ has that shape:
    exactly these parameters plus *args, and reading nothing but `launch`, the flags and the
    scratch bookkeeping (checked once per class, so another Triton's launcher, whose arguments
    may differ, keeps the call through its object)."""
    cls = type(run)
    ok = _PASS_THROUGH.get(cls)
    if ok is None:
        code = getattr(getattr(cls, "__call__", None), "__code__", None)
        ok = _PASS_THROUGH[cls] = bool(
            code is not None
            and code.co_varnames[:code.co_argcount] == _PASS_THROUGH_PARAMS
            and code.co_flags & 0x04                         # *args
            and not code.co_kwonlyargcount
            and set(code.co_names) <= _PASS_THROUGH_NAMES
            and {"launch", "global_scratch_size", "profile_scratch_size"} <= set(code.co_names)
            and _verified_triton(cls))
        log.debug("triton_direct_launch", launcher=f"{cls.__module__}.{cls.__qualname__}", used=ok,
                  reason="its call only passes arguments on" if ok else
                  "another launcher shape or an unverified Triton: launched through the object")
    if not ok:
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1) \
            or not hasattr(run, "launch_cooperative_grid") or not hasattr(run, "launch_pdl"):
        return None
    return run.launch


#: Triton releases whose CUDA launcher was read against direct_launch's call (3.5 and 3.6 insert
#: exactly the two flags and two scratch pointers); an older one inserts one scratch pointer
#: with the same parameter names, a newer one may change anything.
_VERIFIED_TRITON = {(3, 5), (3, 6)}


def _verified_triton(cls) -> bool:
    """Is `cls` Triton's own launcher from a verified release? (Other classes, such as the
    tests' stand-ins, are judged by their shape alone.)"""
    if not cls.__module__.startswith("triton"):
        return True
    try:
        import triton
        version = tuple(int(p) for p in triton.__version__.split(".")[:2])
    except (ImportError, ValueError):
        return False
    return version in _VERIFIED_TRITON


def launch_hooks() -> tuple:
    """Triton's launch enter/exit hooks (profilers set them); passed on as Triton does, except
    that an empty hook chain is passed as None: newer Tritons keep a HookChain object there even
    with no hook in it, and a non-None hook makes every launch build the launch metadata and call
    the (empty) chain twice, a few microseconds per launch for nothing. (Every launch asks: the
    lookups are inlined, a profiler may set a hook between two launches.)"""
    runtime = _RUNTIME[0] if _RUNTIME else _runtime()
    if runtime is None:
        return None, None
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    if enter is not None and getattr(enter, "calls", None) == []:
        enter = None
    if leave is not None and getattr(leave, "calls", None) == []:
        leave = None
    return enter, leave


_RUNTIME: list = []


def _runtime():
    """triton.knobs.runtime (the hooks' home), or None for a Triton without knobs."""
    knobs = _knobs()
    _RUNTIME.append(knobs.runtime if knobs is not None else None)
    return _RUNTIME[0]


_KNOBS: list = []


def _knobs():
    if not _KNOBS:
        try:
            from triton import knobs
        except ImportError:
            knobs = None
        _KNOBS.append(knobs)
    return _KNOBS[0]


def current_stream(device_index):
    """The raw CUDA stream Triton would launch on (its driver asks torch the same way)."""
    if not _RAW_STREAM:
        import torch
        _RAW_STREAM.append(torch._C._cuda_getCurrentRawStream)
    return _RAW_STREAM[0](device_index)


_RAW_STREAM: list = []
