"""Explicit Triton compilation of generated kernels, and ahead-of-time compilation in worker processes.

Why: Triton compiles a @jit kernel on its first launch (hundreds of ms each), so a graph with N
kernels costs N compiles one after the other, on one core, in the first call. Here:

* `specialize` computes, from a kernel's arguments, exactly the specialization Triton's JIT would
  (JITFunction's binder + _pack_args): the signature types, the 16-divisibility of pointers and
  ints (attrs), ints equal to 1 made constexpr, the constexpr block sizes, and the compile options
  JITFunction.run passes. Arguments may be real tensors/ints (first launch) or placeholders
  (`Ptr(type)`: a pointer assumed 16-byte aligned, as fresh CUDA allocations are) with the sizes
  known when the graph was compiled.
* A kernel's first launch on CUDA compiles that specialization explicitly
  (triton_compile_worker.compile_spec: `triton.compile(ASTSource(...), target, options)`) and
  launches the compiled kernel directly; JITFunction.run is no longer on the CUDA path.
* When a graph's output code is loaded, `precompile` sends every kernel's specialization (default
  config, plus the autotuning candidates where the sweep will run) to a pool of worker processes
  (`python triton_compile_worker.py`: imports triton only) running the same compile_spec. They fill
  Triton's on-disk cache (TRITON_CACHE_DIR and every other TRITON_* variable are sent with each
  request, so a worker writes where the main process reads), and the main process's compile of the
  same specialization is then a cache hit. The main process waits for a kernel's pending worker
  compile before compiling it itself; a failed or timed-out worker compile only means the main
  process compiles it (logged `triton_precompile_fallback`). Never wrong: the main process always
  compiles from the real arguments, the workers only warm the cache.

config.triton.compile_threads (TRACE_TRITON_COMPILE_THREADS) sizes the pool: 0 = min(cores, 16),
1 = no pool (each kernel compiled on its first launch, as before). Skipped under the Triton
interpreter and without a CUDA device (tests pass an explicit GPUTarget).
"""
from __future__ import annotations

import collections
import itertools
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import NamedTuple

from tracetorch import logs
from tracetorch.compiler.backend.runtime import triton_compile_worker as worker_mod

log = logs.get_logger(__name__)

# torch dtype name -> Triton pointer element type (what Triton's specialization names them)
TRITON_DTYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "u1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}


def ptr_type(dtype) -> str | None:
    """'*fp32' for torch.float32, ...; None for a dtype Triton has no name for here."""
    name = TRITON_DTYPES.get(str(dtype).removeprefix("torch."))
    return None if name is None else "*" + name


class Ptr(NamedTuple):
    """A pointer argument known by type only (ahead of time): `type` like '*fp32'."""
    type: str
    aligned: bool = True


class Spec(NamedTuple):
    """One specialization of one kernel: everything Triton's compile key depends on besides the
    kernel source and the target. Hashable; JSON-able (lists) for the worker protocol."""
    types: tuple          # per parameter: '*fp32', 'i32', 'i64', 'u64', 'fp64', 'constexpr'
    descs: tuple          # per parameter: 'D' (divisible by 16), '' or None (not specialised)
    constexprs: tuple     # ((parameter index, value), ...)
    options: tuple        # sorted (name, value) items passed to backend.parse_options


def _int_type(v: int) -> str:
    if -2 ** 31 <= v < 2 ** 31:
        return "i32"
    if v >= 2 ** 63:
        return "u64"
    return "i64"


def _knobs():
    try:
        from triton import knobs
        return knobs
    except ImportError:
        return None


def jit_options(fn, num_warps: int, num_stages: int) -> dict:
    """The options JITFunction.run passes to backend.parse_options (besides the launch kwargs)."""
    knobs = _knobs()
    debug = getattr(fn, "debug", None)
    opts = {"num_warps": int(num_warps), "num_stages": int(num_stages)}
    if knobs is not None:
        opts["debug"] = bool(debug or knobs.runtime.debug)
        comp = knobs.compilation
        for name in ("instrumentation_mode", "fpsan_homomorphic_casts"):
            if hasattr(type(comp), name) or hasattr(comp, name):
                opts[name] = getattr(comp, name)
    else:
        opts["debug"] = bool(debug)
    return opts


def specialize(fn, values, meta: dict, num_warps: int, num_stages: int) -> Spec | None:
    """The specialization Triton's JIT computes for `fn` called with `values` (non-constexpr
    parameters in order: tensors or Ptr, ints, floats) and `meta` (constexpr values by name).
    None where this kernel or argument is outside what this function models (the caller then
    uses JITFunction.run)."""
    types, descs, consts = [], [], []
    it = iter(values)
    for i, p in enumerate(fn.params):
        if p.is_constexpr:
            if p.name not in meta:
                return None
            types.append("constexpr")
            descs.append("")
            consts.append((i, meta[p.name]))
            continue
        if getattr(p, "do_not_specialize", False) or getattr(p, "do_not_specialize_on_alignment", False):
            return None
        try:
            v = next(it)
        except StopIteration:
            return None
        ann = p.annotation_type
        if ann:
            if isinstance(ann, str) and (ann == "u1" or ann[:2] in ("fp", "bf")):
                types.append(ann)      # JIT: annotated floats/bools are never specialised
                descs.append(None)
                continue
            return None
        if isinstance(v, Ptr):
            ty, aligned = v.type, v.aligned
        elif hasattr(v, "data_ptr") and hasattr(v, "dtype"):
            ty, aligned = ptr_type(v.dtype), v.data_ptr() % 16 == 0
            if ty is None:
                return None
        elif isinstance(v, bool) or not isinstance(v, int):
            return None
        elif v == 1:
            types.append("constexpr")  # JIT: an int equal to 1 is a constant
            descs.append("")
            consts.append((i, 1))
            continue
        else:
            ty, aligned = _int_type(v), v % 16 == 0
        types.append(ty)
        descs.append("D" if aligned else "")
    if next(it, _END) is not _END:
        return None
    opts = jit_options(fn, num_warps, num_stages)
    return Spec(tuple(types), tuple(descs), tuple(consts), tuple(sorted(opts.items())))


_END = object()


# ------------------------------------------------------------------ targets

_TARGETS: dict = {}


def current_device() -> int:
    from triton.runtime import driver
    return driver.active.get_current_device()


def current_target(device: int | None = None):
    """Triton's GPUTarget of the current CUDA device (what the JIT compiles for)."""
    if device is None:
        device = current_device()
    t = _TARGETS.get(device)
    if t is None:
        from triton.runtime import driver
        t = _TARGETS[device] = driver.active.get_current_target()
    return t


def target_key(target) -> tuple:
    return (target.backend, target.arch, target.warp_size)


# ------------------------------------------------------------------ compiling

_PENDING: dict[tuple, Future] = {}
_PENDING_LOCK = threading.Lock()
_LAUNCHERS: dict[tuple, Future] = {}     # launcher key -> a worker's build of that launcher
STATS = {"submitted": 0, "precompiled": 0, "failed": 0, "cancelled": 0, "in_process": 0, "waited_s": 0.0,
         "key_mismatch": 0, "not_submitted": 0}


def _request_key(path: str, name: str, spec: Spec, target) -> tuple:
    return (path, name, spec, target_key(target))


def compile_kernel(kernel, spec: Spec, target):
    """Triton's CompiledKernel of `kernel` (a TritonKernel) for `spec`, compiled in this process;
    first waits for a worker's compile of the same specialization, if one is pending."""
    key = _request_key(kernel.path, kernel.name, spec, target)
    with _PENDING_LOCK:
        fut = _PENDING.pop(key, None)
    if fut is None and _POOL:
        # a pool runs, yet this specialization was never sent to it: the first call's compile
        # is on the main process (what a first call that is slow despite the pool shows first)
        STATS["not_submitted"] += 1
        log.debug("triton_compile_not_submitted", kernel=kernel.name, spec=str(spec)[:300])
    if fut is not None and fut.cancel():
        STATS["cancelled"] += 1        # no worker has started it (busy or still starting): compile it here
        fut = None
    worker_hash = worker_facts = None
    if fut is not None:
        t0 = time.perf_counter()
        try:
            res = fut.result(timeout=_timeout() + 10)
            if not res.get("ok"):
                raise RuntimeError(res.get("error", "worker compile failed"))
            worker_hash, worker_facts = res.get("hash"), res.get("key_facts")
        except Exception as e:   # never wrong: compile here instead
            log.warning("triton_precompile_fallback", kernel=kernel.name,
                        error=f"{type(e).__name__}: {e}"[:300])
        STATS["waited_s"] += time.perf_counter() - t0
    with _PENDING_LOCK:
        lfut = _LAUNCHERS.get(_launcher_key(spec, target, _env()))
    # its launcher, built by a worker beside the compile, is then a cache hit at the first launch;
    # one no worker has started yet is left to that first launch
    if lfut is not None and not lfut.cancel():
        try:
            lfut.result(timeout=_timeout() + 10)
        except Exception:
            pass
    STATS["in_process"] += 1
    ck = worker_mod.compile_spec(kernel.fn, spec.types, spec.descs, spec.constexprs,
                                 dict(spec.options), target)
    if worker_hash is not None and ck.hash != worker_hash:
        # the worker's binary was not this process's cache hit: some Triton setting differs
        STATS["key_mismatch"] += 1
        differs = key_differences(worker_facts or {}, worker_mod.key_facts(ck))
        MISMATCHES.append(f"{kernel.name}: {'; '.join(differs) or 'no option, variable or source differs'}")
        log.warning("triton_precompile_key_mismatch", kernel=kernel.name, worker_hash=worker_hash[:16],
                    main_hash=str(ck.hash)[:16], differs=differs,
                    hint="a Triton setting differs between this process and the compile workers")
    return ck


#: the latest key mismatches, each with what differed (what the bench's rows show)
MISMATCHES: "collections.deque[str]" = collections.deque(maxlen=8)


def key_differences(worker: dict, main: dict) -> list[str]:
    """'name: worker=.. main=..' for every key fact (triton_compile_worker.key_facts) that differs
    between a worker's compile and this process's, skipping facts one side does not report."""
    out = []
    for name in sorted(set(worker) & set(main)):
        if worker[name] != main[name]:
            w, m = _around_difference(str(worker[name]), str(main[name]))
            out.append(f"{name}: worker={w} main={m}")
    only = sorted((set(worker) ^ set(main)) - {"unknown"})
    if only:
        out.append(f"only one side has {', '.join(only)[:160]}")
    return out


def _around_difference(a: str, b: str, width: int = 80) -> tuple[str, str]:
    """Both texts cut to `width` characters around where they first differ (two ptxas version
    banners share their first hundred characters)."""
    if len(a) <= width and len(b) <= width:
        return a, b
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, i - width // 4)

    def cut(t: str) -> str:
        return ("..." if start else "") + t[start:start + width] + ("..." if len(t) > start + width else "")
    return cut(a), cut(b)


def _timeout() -> float:
    from tracetorch.compiler import config
    return float(config.triton.compile_timeout)


def pool_size() -> int:
    """config.triton.compile_threads; 0 means min(cores, 16)."""
    from tracetorch.compiler import config
    n = int(config.triton.compile_threads)
    if n <= 0:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        n = min(cores, 16)
    return max(1, n)


# ------------------------------------------------------------------ the worker pool

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def worker_command(target=None) -> list[str]:
    cmd = [sys.executable, os.path.abspath(worker_mod.__file__), _REPO_ROOT]
    if target is not None:             # the worker warms up for it before its first request
        cmd += [str(x) for x in target_key(target)]
    return cmd


class _Worker:
    """One worker process (started by us; ended by closing its stdin, or killed by pid on a
    timeout)."""

    def __init__(self, cmd):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1,
                                     close_fds=True)
        self._buf = ""

    def request(self, req: dict, timeout: float) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while "\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"worker compile took longer than {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise RuntimeError(f"worker exited (code {self.proc.poll()})")
            self._buf += chunk.decode()
        line, _, self._buf = self._buf.partition("\n")
        return json.loads(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass


class CompilePool:
    """`size` worker processes, each driven by one daemon thread that takes requests from a shared
    queue (threads wait on pipes, not on the GIL; daemon threads never hold up interpreter exit).
    Workers start when the pool is created, so their start-up (import triton, warm-up compile)
    overlaps the rest of the compile. A request still queued can be cancelled (Future.cancel):
    the main process then compiles that kernel itself."""

    def __init__(self, size: int, cmd: list[str] | None = None, target=None):
        self.size = size
        self.pid = os.getpid()
        self.cmd = cmd or worker_command(target)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._ids = itertools.count()
        self._closed = False
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        for i in range(size):
            w = self._spawn()
            threading.Thread(target=self._serve, args=(w,), name=f"tracetorch-compile-{i}",
                             daemon=True).start()

    def _spawn(self) -> _Worker:
        w = _Worker(self.cmd)
        with self._lock:
            self._workers.append(w)
        return w

    def _replace(self, w: _Worker) -> _Worker:
        w.kill()                           # its state is unknown: a fresh worker takes its place
        with self._lock:
            if w in self._workers:
                self._workers.remove(w)
        return self._spawn()

    def submit(self, req: dict) -> Future:
        fut: Future = Future()
        self._queue.put((dict(req, id=next(self._ids)), fut))
        return fut

    def _serve(self, w: _Worker) -> None:
        # Take requests only once the worker has started (imported triton, warmed up): until then
        # they stay queued, and the main process compiles (cancels) those it reaches first,
        # rather than waiting on a worker that is still starting.
        try:
            w.request({"op": "ping", "id": -1}, _timeout())
        except BaseException:              # noqa: BLE001
            if not self._closed:
                w = self._replace(w)
        while True:
            item = self._queue.get()
            if item is None or self._closed:
                break
            req, fut = item
            if not fut.set_running_or_notify_cancel():
                continue                   # cancelled while queued
            try:
                if not w.alive():
                    w = self._replace(w)
                res = w.request(req, _timeout())
            except BaseException as e:     # noqa: BLE001  (reported through the future)
                if not self._closed:
                    w = self._replace(w)
                fut.set_exception(e)
                continue
            fut.set_result(res)

    def close(self):
        self._closed = True
        while True:                        # requests nobody will serve: cancelled
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].cancel()
        for _ in range(self.size):
            self._queue.put(None)
        with self._lock:
            workers, self._workers = list(self._workers), []
        for w in workers:
            w.close()                      # end of input: the worker exits
        for w in workers:
            try:
                w.proc.wait(timeout=2)
            except Exception:
                w.kill()


_POOL: list = []
_POOL_LOCK = threading.Lock()


def get_pool(size: int | None = None, target=None) -> CompilePool | None:
    """The process's pool (created on first use, its workers warmed up for `target`); None when
    compile_threads is 1."""
    size = pool_size() if size is None else size
    if size <= 1:
        return None
    with _POOL_LOCK:
        if _POOL and _POOL[0].pid != os.getpid():
            _POOL.clear()              # inherited through fork: the parent's workers, not ours
            forget_pending()
        if _POOL and _POOL[0].size != size:
            _POOL.pop().close()
        if not _POOL:
            _POOL.append(CompilePool(size, target=target))
            log.info("triton_compile_pool_started", workers=size)
        return _POOL[0]


def shutdown_pool() -> None:
    with _POOL_LOCK:
        while _POOL:
            pool = _POOL.pop()
            if pool.pid == os.getpid():
                pool.close()


import atexit  # noqa: E402
atexit.register(shutdown_pool)


def _env() -> dict:
    """TRITON_* variables (cache folder, knobs that change compile keys) sent with each request:
    this process's environment, then every knob set in this process by assignment (which a
    worker, reading only its environment, would not see), as the variable that knob reads;
    TRITON_CACHE_DIR is the folder this process's Triton uses."""
    env = {k: v for k, v in os.environ.items() if k.startswith("TRITON_") and k != "TRITON_INTERPRET"}
    knobs = _knobs()
    env.update(_assigned_knobs(knobs))
    try:
        d = knobs.cache.dir if knobs is not None else None
    except Exception:
        d = None
    if d:
        env["TRITON_CACHE_DIR"] = d
    return env


def _assigned_knobs(knobs) -> dict:
    """{variable: text} for the knobs assigned in this process. Why: inductor sets
    `knobs.nvidia.libdevice_path` by assignment when it compiles; Triton releases that do not
    mirror an assignment into the environment left the workers on the bundled libdevice, so every
    kernel compiled by a worker had another cache key than the main process's, which compiled
    them all again (GPT-2's first call after inductor's in one process: 40 kernels, 9 s on an
    H100 host). Values without a text form (hooks, None) are left out."""
    base = getattr(knobs, "base_knobs", None)
    if base is None:
        return {}
    out = {}
    for group in list(vars(knobs).values()):
        if not isinstance(group, base):
            continue
        try:
            descriptors = group.knob_descriptors
        except Exception:
            continue
        for name, desc in descriptors.items():
            if name not in group.__dict__:
                continue
            key, text = getattr(desc, "key", ""), _knob_text(group.__dict__[name])
            if text is not None and isinstance(key, str) and key.startswith("TRITON_"):
                out[key] = text
    return out


def _knob_text(value) -> str | None:
    """A knob's value as its environment variable spells it (Triton's own rule: booleans 1/0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (str, int)):
        return str(value)
    return None


def request(kernel, spec: Spec, target, env: dict, main_hash: str | None, op: str = "compile") -> dict:
    """`env`: _env(); `main_hash`: backend_hash(target), both read once per batch of requests."""
    return {"op": op, "path": kernel.path, "name": kernel.name, "module": kernel.module_name,
            "types": list(spec.types), "descs": list(spec.descs),
            "constexprs": [list(c) for c in spec.constexprs], "options": dict(spec.options),
            "target": list(target_key(target)), "env": env, "backend_hash": main_hash}


def backend_hash(target) -> str | None:
    """This process's backend hash for `target` (Triton's, with the ptxas version it cached):
    sent with each request, the workers compile under it (worker.pin_backend_hash)."""
    try:
        from triton.compiler.compiler import make_backend
        return str(make_backend(target).hash())
    except Exception:
        return None


def _launcher_key(spec: Spec, target, env: dict) -> tuple:
    """What Triton's per-signature launcher source depends on (argument types and constexprs),
    and the cache folder it is built into (`env`: _env())."""
    return (tuple(spec.types), tuple(spec.constexprs), target_key(target), env.get("TRITON_CACHE_DIR"))


def precompile(items, target=None, pool: CompilePool | None = None) -> int:
    """Submit (kernel, spec) pairs to the worker pool; returns how many were submitted.

    Skipped (0) when the pool size is 1, and, unless `target` is given, without a CUDA device."""
    items = [(k, s) for k, s in items if s is not None and not k.interpret]
    if not items:
        return 0
    if target is None:
        import torch
        if not torch.cuda.is_available():
            return 0
        target = current_target()
    if pool is None:
        pool = get_pool(target=target)
        if pool is None:
            return 0
    t0 = time.perf_counter()
    futures = []
    env, main_hash = _env(), backend_hash(target)
    # With several workers each distinct launcher signature is built by a worker of its own,
    # beside the kernel compiles (queued after them: idle workers take them at once), instead of
    # by each compile's worker after compiling, serially. One worker does both in turn.
    separate = pool.size > 1
    submitted = []
    with _PENDING_LOCK:
        for kernel, spec in items:
            key = _request_key(kernel.path, kernel.name, spec, target)
            if key in _PENDING or (kernel.device_key(target), spec) in kernel.compiled:
                continue
            req = request(kernel, spec, target, env, main_hash)
            req["launcher"] = not separate
            fut = pool.submit(req)
            _PENDING[key] = fut
            futures.append(fut)
            submitted.append((kernel, spec))
        launchers = 0
        for kernel, spec in submitted if separate else ():
            lkey = _launcher_key(spec, target, env)
            if lkey not in _LAUNCHERS:
                req = request(kernel, spec, target, env, main_hash, op="launcher")
                _LAUNCHERS[lkey] = pool.submit(req)
                launchers += 1
    n = len(futures)
    if not n:
        return 0
    STATS["submitted"] += n
    state = {"left": n, "ok": 0, "failed": 0, "cancelled": 0, "worker_s": 0.0}
    lock = threading.Lock()
    cid = logs.current_compile_id()

    def done(fut):
        outcome, secs = "failed", 0.0
        if fut.cancelled():
            outcome = "cancelled"
        else:
            try:
                res = fut.result()
                outcome = "ok" if res.get("ok") else "failed"
                secs = float(res.get("compile_s", 0.0))
            except BaseException:
                pass
        with lock:
            state[outcome] += 1
            state["worker_s"] += secs
            state["left"] -= 1
            last = state["left"] == 0
        if outcome != "cancelled":
            STATS["precompiled" if outcome == "ok" else "failed"] += 1
        if last:
            log.info("triton_precompile_done", kernels=n, ok=state["ok"], failed=state["failed"],
                     compiled_in_main=state["cancelled"],
                     workers=pool.size, wall_s=round(time.perf_counter() - t0, 3),
                     worker_compile_s=round(state["worker_s"], 3),
                     compile_id=str(cid) if cid is not None else None)

    for f in futures:
        f.add_done_callback(done)
    log.info("triton_precompile_submitted", kernels=n, launchers=launchers, workers=pool.size)
    return n


def forget_pending() -> None:
    with _PENDING_LOCK:
        _PENDING.clear()
        _LAUNCHERS.clear()


__all__ = ["specialize", "Spec", "Ptr", "ptr_type", "compile_kernel", "precompile", "CompilePool",
           "get_pool", "pool_size", "shutdown_pool", "current_target", "jit_options"]
