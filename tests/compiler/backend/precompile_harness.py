"""Scenarios of test_triton_precompile.py, run in a child process WITHOUT TRITON_INTERPRET (the test
process interprets Triton, and @jit decides at import what kind of function it returns): Triton
compiles CUDA binaries for an explicit GPUTarget on a machine without a GPU; nothing is launched.

    python precompile_harness.py <scenario>     prints one JSON object
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time

os.environ.pop("TRITON_INTERPRET", None)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

BASE = tempfile.mkdtemp(prefix="tracetorch_precompile_test_")
os.environ["TRACE_TRITON_KERNEL_DIR"] = os.path.join(BASE, "kernels")
os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, "triton_cache_startup")

import torch  # noqa: E402

from tracetorch import logs  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
config.reload()
from tracetorch.compiler.backend.runtime import triton_compile as TC  # noqa: E402
from tracetorch.compiler.backend.runtime import triton_launch as TL  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)

HEAD = '''import triton
import triton.language as tl
from tracetorch.compiler.backend.runtime import triton_helpers as th
from triton.language.extra import libdevice


'''

POINTWISE = HEAD + '''@triton.jit
def pw_kernel(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    a = tl.load(in_ptr0 + xindex, xmask).to(tl.float32)
    b = tl.load(in_ptr1 + xindex, xmask).to(tl.float32)
    tl.store(out_ptr0 + xindex, th.maximum(libdevice.tanh(a) * b, 0.0), xmask)
'''

REDUCTION = HEAD + '''@triton.jit
def red_kernel(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    acc = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = rindex < rnumel
        v = tl.load(in_ptr0 + (rindex + rnumel * xindex), xmask & rmask, other=0.0).to(tl.float32)
        acc = acc + tl.where(xmask & rmask, v, 0)
    tl.store(out_ptr0 + xindex, tl.sum(acc, 1)[:, None], xmask)
'''

SPEC = HEAD + '''@triton.jit
def spec_kernel(p0, p1, p2, p3, p4, p5, f0: tl.float64, s0, s1, s2, xnumel, XBLOCK: tl.constexpr,
                RBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(p5 + x, tl.load(p0 + x).to(tl.float32) * f0 + s0 + s1 + s2 + xnumel + RBLOCK)
'''


def launchers():
    pw = TL.TritonLauncher("pw_kernel", POINTWISE, kind="pointwise", n_ptrs=3, numel=lambda: (5000, 1),
                           ptr_types=("*fp32", "*bf16", "*bf16"))
    looped = TL.TritonLauncher("red_kernel", REDUCTION, kind="looped", n_ptrs=2,
                               numel=lambda: (64, 100000), ptr_types=("*fp32", "*fp32"))
    return [pw, looped]


class FakeDriver:
    """What JITFunction.run asks the driver for, without a GPU."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return TARGET

    def __getattr__(self, name):
        raise AttributeError(name)


def jit_key(fn, args, kwargs):
    """Triton's own compile key for fn(*args, **kwargs): JITFunction.run up to the compile."""
    from triton.runtime import driver
    from triton.runtime.cache import get_cache_key
    from triton._C.libtriton import get_cache_invalidating_env_vars
    captured = {}

    def fake_compile(key, signature, device, constexprs, options, attrs, warmup):
        captured.update(signature=signature, constexprs=constexprs, options=options, attrs=attrs)
        return "compiled"
    old = driver._active
    driver.set_active(FakeDriver())
    fn.device_caches.clear()
    fn._do_compile = fake_compile
    try:
        fn.run(*args, grid=(1,), warmup=True, **kwargs)
    finally:
        del fn._do_compile
        driver._active = old
        fn.device_caches.clear()
    src = fn.ASTSource(fn, captured["signature"], captured["constexprs"], captured["attrs"])
    backend = TC.worker_mod._backend(TARGET)
    opts = backend.parse_options(captured["options"].__dict__)
    return get_cache_key(src, backend, opts, get_cache_invalidating_env_vars()), captured


def our_key(fn, spec):
    from triton.runtime.cache import get_cache_key
    from triton._C.libtriton import get_cache_invalidating_env_vars
    src = TC.worker_mod.make_source(fn, spec.types, spec.descs, spec.constexprs, TARGET)
    backend = TC.worker_mod._backend(TARGET)
    opts = backend.parse_options(TC.worker_mod.parse_options(TARGET, dict(spec.options)).__dict__)
    return get_cache_key(src, backend, opts, get_cache_invalidating_env_vars())


def scenario_spec():
    """specialize() == JITFunction's specialization (whole compile keys) for representative args."""
    k = TL.TritonKernel("spec_kernel", SPEC, lambda meta, *a: (1, 1, 1))
    fn = k.fn
    aligned = {dt: torch.empty(64, dtype=dt) for dt in (torch.float32, torch.bfloat16, torch.float16,
                                                         torch.bool, torch.int64, torch.int8,
                                                         torch.uint8, torch.float64, torch.int32)}
    unaligned = torch.empty(65, dtype=torch.float32)[1:]
    unaligned_bf16 = torch.empty(65, dtype=torch.bfloat16)[3:]
    ptr_sets = [
        [aligned[torch.float32], aligned[torch.bfloat16], aligned[torch.bool], aligned[torch.int64],
         aligned[torch.float16], aligned[torch.float64]],
        [unaligned, aligned[torch.int8], aligned[torch.uint8], unaligned_bf16, aligned[torch.int32],
         aligned[torch.float32]],
    ]
    int_sets = [(1, 16, 17, 4096), (0, -16, 2 ** 31, 2 ** 40), (32, 3, 2 ** 31 - 1, 1), (-1, 2 ** 63, 48, 100000)]
    metas = [({"XBLOCK": 1024, "RBLOCK": 1}, 4, 1), ({"XBLOCK": 1, "RBLOCK": 2048}, 8, 2)]
    checked, mismatches = 0, []
    for ptrs in ptr_sets:
        for ints in int_sets:
            for meta, warps, stages in metas:
                args = ptrs + [0.5] + list(ints)
                spec = TC.specialize(fn, args, meta, warps, stages)
                ours = our_key(fn, spec)
                theirs, cap = jit_key(fn, args, dict(meta, num_warps=warps, num_stages=stages))
                checked += 1
                if ours != theirs:
                    mismatches.append({"ints": list(ints), "ours": spec._asdict(),
                                       "jit_signature": cap["signature"], "jit_attrs": repr(cap["attrs"]),
                                       "jit_constexprs": repr(cap["constexprs"])})
    # the ahead-of-time form (Ptr placeholders) gives the same spec as real aligned tensors
    ptr_form = TC.specialize(fn, [TC.Ptr(TC.ptr_type(t.dtype)) for t in ptr_sets[0]] + [0.5, 1, 16, 17, 4096],
                             metas[0][0], 4, 1)
    real_form = TC.specialize(fn, ptr_sets[0] + [0.5, 1, 16, 17, 4096], metas[0][0], 4, 1)
    return {"checked": checked, "mismatches": mismatches, "ptr_form_equal": ptr_form == real_form}


def _listen():
    from triton import knobs
    hits = []
    knobs.compilation.listener = lambda **kw: hits.append(bool(kw.get("cache_hit")))
    return hits


def _events():
    events = []
    logs.add_sink(events.append, level=20)
    return events


def scenario_pool():
    """The pool compiles every kernel's specializations (default config + looped-reduction autotune
    candidates); the main process's compiles are then all cache hits in the same cache folder."""
    events = _events()
    pool = TC.CompilePool(2, target=TARGET)
    # the cache folder is chosen after the workers started: requests carry it
    cache = os.path.join(BASE, "triton_cache")
    os.environ["TRITON_CACHE_DIR"] = cache
    ls = launchers()
    items = [it for l in ls for it in l.precompile_items({})]
    t0 = time.perf_counter()
    n = TC.precompile(items, target=TARGET, pool=pool)
    for f in list(TC._PENDING.values()):
        f.result()
    launcher_results = [f.result() for f in TC._LAUNCHERS.values()]
    hits = _listen()
    # the main process computes its specialization from real (aligned) tensors, as a launch does
    from tracetorch.compiler.backend import autotune
    pw, looped = ls
    x, y = torch.empty(5000), torch.empty(5000, dtype=torch.bfloat16)
    o = torch.empty(5000, dtype=torch.bfloat16)
    real = [(pw.kernel, pw.kernel.spec([x, y, o], [5000], pw._candidates("pointwise", 5000, 1)[0]))]
    inp, out = torch.empty(64 * 100000), torch.empty(64)
    for cfg in autotune.candidates_to_compile(looped.kernel, looped._candidates("looped", 64, 100000)):
        real.append((looped.kernel, looped.kernel.spec([inp, out], [64, 100000], cfg)))
    same = [s_real == s for (_, s_real), (_, s) in zip(real, items)]
    for k, s in real:
        k.compile(s, TARGET)
    wall = time.perf_counter() - t0
    pool.close()
    done = [e.fields for e in events if e.name == "triton_precompile_done"]
    files = sum(len(f) for _, _, f in os.walk(cache))
    return {"submitted": n, "items": len(items), "hits": hits, "real_equals_precompiled": same,
            "launcher_results": launcher_results,
            "done_events": done, "cache_files": files, "stats": dict(TC.STATS), "wall_s": wall}


def scenario_knobs():
    """A knob assigned in this process and absent from its environment (inductor assigns
    knobs.nvidia.libdevice_path; some Triton releases do not mirror an assignment into the
    environment): the workers compile with it too, so the main process's compile is a hit."""
    import shutil

    import triton.backends.nvidia as nvidia
    from triton import knobs
    copy = os.path.join(BASE, "libdevice_copy", "libdevice.10.bc")
    os.makedirs(os.path.dirname(copy))
    shutil.copy(os.path.join(os.path.dirname(nvidia.__file__), "lib", "libdevice.10.bc"), copy)
    pool = TC.get_pool(2, target=TARGET)          # the process's pool, as a compile starts it
    os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, "triton_cache_knobs")
    knobs.nvidia.libdevice_path = copy
    os.environ.pop("TRITON_LIBDEVICE_PATH", None)
    items = launchers()[0].precompile_items({})
    TC.precompile(items, target=TARGET, pool=pool)
    for f in list(TC._PENDING.values()):
        f.result()
    hits = _listen()
    compiled = [k.compile(s, TARGET) for k, s in items]
    # a specialization the pool never saw (another warp count) is counted as such
    kernel, spec = items[0]
    kernel.compile(spec._replace(options=tuple((n, 8 if n == "num_warps" else v) for n, v in spec.options)),
                   TARGET)
    TC.shutdown_pool()
    return {"hits": hits[:len(items)], "key_mismatch": TC.STATS.get("key_mismatch", 0),
            "not_submitted": TC.STATS.get("not_submitted", 0),
            "libdevice": [str(dict(c.metadata.extern_libs).get("libdevice")) == copy for c in compiled],
            "sent": TC._env().get("TRITON_LIBDEVICE_PATH") == copy}


def _pool_then_main(items, pool) -> dict:
    """The pool compiles `items`; then this process compiles them: were those cache hits?"""
    TC.precompile(items, target=TARGET, pool=pool)
    for f in list(TC._PENDING.values()):
        f.result()
    hits = _listen()
    for k, s in items:
        k.compile(s, TARGET)
    TC.shutdown_pool()
    return {"items": len(items), "hits": hits[:len(items)], "key_mismatch": TC.STATS.get("key_mismatch", 0),
            "examples": list(TC.MISMATCHES)}


def scenario_ptxas():
    """A ptxas setting the main process makes after the workers warmed up (inductor sets
    TRITON_PTXAS_PATH the first time it compiles in-process; here the version override, which
    feeds the same cached version): the workers' binaries still match the main process's key."""
    pool = TC.get_pool(2, target=TARGET)    # each worker warms up (a compile) before its first request
    os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, "triton_cache_ptxas")
    os.environ["TRITON_MOCK_PTX_VERSION"] = "tracetorch-test-ptxas 0.1"
    items = launchers()[0].precompile_items({})
    return _pool_then_main(items, pool)


def scenario_ptxas_stale():
    """The other order, the one seen on the H100: this process computed its backend hash (with
    the ptxas version) before the variable changed, the workers start after the change and would
    compute another; they compile under this process's hash."""
    items = launchers()[0].precompile_items({})
    os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, "triton_cache_ptxas_first")
    kernel, spec = items[0]
    kernel.compile(spec._replace(options=tuple((n, 8 if n == "num_warps" else v) for n, v in spec.options)),
                   TARGET)                       # caches this process's ptxas version
    os.environ["TRITON_MOCK_PTX_VERSION"] = "tracetorch-test-ptxas 0.2"
    pool = TC.get_pool(2, target=TARGET)         # the workers see the variable from the start
    os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, "triton_cache_ptxas_stale")
    return _pool_then_main(items, pool)


def scenario_mismatch():
    """A setting that changes the compile key after the workers compiled (here a variable set
    too late): every main-process compile misses the workers' binaries, and each miss names
    what differed."""
    pool = TC.get_pool(2, target=TARGET)
    os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, "triton_cache_mismatch")
    items = launchers()[0].precompile_items({})
    TC.precompile(items, target=TARGET, pool=pool)
    for f in list(TC._PENDING.values()):
        f.result()
    events = _events()
    os.environ["TRITON_DEFAULT_FP_FUSION"] = "0"
    for k, s in items:
        k.compile(s, TARGET)
    TC.shutdown_pool()
    return {"items": len(items), "key_mismatch": TC.STATS.get("key_mismatch", 0),
            "examples": list(TC.MISMATCHES),
            "differs": [e.fields.get("differs") for e in events if e.name == "triton_precompile_key_mismatch"]}


_PING = "import sys, json; sys.stdin.readline(); print(json.dumps({'id': -1, 'ok': True}), flush=True); "


def scenario_fallback():
    """A worker that dies, and one that hangs past compile_timeout, while compiling the kernel the
    main process waits for: the main process compiles it itself (logged). A worker that never
    gets ready: the request stays queued, and the main process cancels it and compiles at once."""
    events = _events()
    out = {}
    pw = launchers()[0]
    (kernel, spec), = pw.precompile_items({})
    for mode, cmd in (("dies", [sys.executable, "-c", _PING + "sys.exit(3)"]),
                      ("hangs", [sys.executable, "-c", _PING + "import time; time.sleep(120)"]),
                      ("never_ready", [sys.executable, "-c", "import time; time.sleep(120)"])):
        kernel.compiled.clear()
        TC.forget_pending()
        os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, f"triton_cache_{mode}")
        with config.patch({"triton.compile_timeout": 2.0}):
            pool = TC.CompilePool(1, cmd=cmd)
            cancelled = TC.STATS["cancelled"]
            TC.precompile([(kernel, spec)], target=TARGET, pool=pool)
            fut = TC._PENDING[TC._request_key(kernel.path, kernel.name, spec, TARGET)]
            t0 = time.perf_counter()
            while mode != "never_ready" and not fut.running() and time.perf_counter() - t0 < 30:
                time.sleep(0.01)
            running = fut.running()
            hits = _listen()
            t0 = time.perf_counter()
            ck = kernel.compile(spec, TARGET)
            secs = time.perf_counter() - t0
        pool.close()
        out[mode] = {"hits": hits, "seconds": secs, "compiled": ck.metadata.name, "was_running": running,
                     "cancelled": TC.STATS["cancelled"] - cancelled,
                     "fallback_events": [e.fields for e in events if e.name == "triton_precompile_fallback"]}
        events.clear()
    return out


def scenario_sizes():
    """precompile_items: dynamic sizes from size_hints (nothing without them), persistent variant
    chosen by the hinted rnumel, no pool when compile_threads is 1."""
    src = REDUCTION.replace("red_kernel(in_ptr0, out_ptr0, xnumel", "dyn_kernel(in_ptr0, out_ptr0, s0, s1, xnumel")
    dyn = TL.TritonLauncher("dyn_kernel", src, kind="looped", n_ptrs=2,
                            numel=lambda s0, s1: (s0, s1), ptr_types=("*fp32", "*fp32"),
                            persistent_source=src + "\n# persistent\n", persistent_max=4096)
    without = dyn.precompile_items({})
    small = dyn.precompile_items({"s0": 64, "s1": 1000})
    large = dyn.precompile_items({"s0": 64, "s1": 100000})
    with config.patch({"triton.compile_threads": 1}):
        pool = TC.get_pool()
    return {"without_hints": len(without),
            "small": [dict(s.constexprs) for _, s in small], "large": [dict(s.constexprs) for _, s in large],
            "small_ints": [list(s.types) for _, s in small], "pool_with_1": pool is None}


class FakeCudaTensor:
    """What the launcher reads of a CUDA tensor argument: data_ptr, dtype, device index (as
    .device.index and, on the direct launch path, get_device())."""

    def __init__(self, t):
        self.t, self.dtype = t, t.dtype
        self.device = type("Device", (), {"index": 0, "type": "cuda"})()

    def data_ptr(self):
        return self.t.data_ptr()

    def get_device(self):
        return 0


def scenario_launch():
    """The CUDA launch path without a GPU: the first call compiles the explicit specialization
    (waiting for the pool's compile of it) and calls Triton's launcher with the grid and every
    argument in signature order; later calls take the plan's fast path with the same kernel."""
    os.environ["TRITON_CACHE_DIR"] = os.path.join(BASE, "triton_cache_launch")
    calls = []
    compile_kernel = TC.compile_kernel

    def compile_and_record(kernel, spec, target):
        ck = compile_kernel(kernel, spec, target)
        ck._run = lambda *a: calls.append(a)     # Triton's launcher, recorded instead of run
        return ck
    TC.compile_kernel = compile_and_record
    TC.current_device = lambda: 0
    TC.current_target = lambda device=None: TARGET
    TL.current_stream = lambda device: 1234
    pool = TC.CompilePool(1, target=TARGET)
    pw = launchers()[0]
    hits = _listen()
    TC.precompile(pw.precompile_items({}), target=TARGET, pool=pool)
    for f in list(TC._PENDING.values()):
        f.result()                     # the worker's compile done: the launch must hit the cache
    x, y, o = (FakeCudaTensor(torch.empty(5000, dtype=dt)) for dt in (torch.float32, torch.bfloat16, torch.bfloat16))
    pw(x, y, o)
    pw(x, y, o)
    pool.close()
    ck = next(iter(pw.kernel.compiled.values()))
    return {"hits": hits, "n_calls": len(calls), "kernels": len(pw.kernel.compiled),
            "grid": [list(c[:4]) for c in calls],
            "args": [[a if isinstance(a, int) else str(a.dtype) for a in c[9:]] for c in calls],
            "packed_is_kernels": [c[5] is ck.packed_metadata for c in calls]}


if __name__ == "__main__":
    result = globals()[f"scenario_{sys.argv[1]}"]()
    sys.stdout.write("\nRESULT " + json.dumps(result, default=str) + "\n")
