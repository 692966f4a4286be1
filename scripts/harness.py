"""What every benchmark script shares: its --device/--dtype arguments, synchronising a device,
timing a call (median), the geometric mean of ratios. One copy here, imported as
`from scripts import harness` (repository root on sys.path) or `import harness` (scripts/ on
sys.path).

Timing rules (docs: speed lives in scripts, reported as medians of side-by-side runs): on CUDA
`triton.testing.do_bench` times with device events and returns the median; on the CPU the call
runs at least `min_calls` times and then until `budget_s` seconds or `max_calls` calls.

torch is imported inside the functions that need it: run_suite.py's parent process uses
`geomean` and must not import torch (each model runs in a subprocess of its own).
"""
from __future__ import annotations

import contextlib
import math
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter


DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "bfloat16", "float16")


def add_device_dtype_args(parser, *, device: str = "auto", dtype: str | None = "float32",
                          dtypes=DTYPES) -> None:
    """--device and --dtype, spelled the same in every script. device="auto": cuda where torch
    sees a GPU, else cpu (imports torch: a parent process that must not passes a name);
    dtype=None: the script takes no --dtype (or spells its own, e.g. a comma list)."""
    if device == "auto":
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=device, choices=DEVICES)
    if dtype is not None:
        parser.add_argument("--dtype", default=dtype, choices=tuple(dtypes))


def sync(device) -> None:
    """Wait for queued device work (device: a name like "cuda" or a torch.device)."""
    import torch
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def wall_and_host_ms(fn, device, calls: int) -> tuple[list, list]:
    """Per call of fn: (wall ms, host ms). Each call starts with the device idle; wall time waits
    for its device work, host time is what issuing it took (above the device part of the wall
    time, a call is host-bound)."""
    wall, host = [], []
    for _ in range(calls):
        sync(device)
        t = time.perf_counter()
        fn()
        issued = time.perf_counter()
        sync(device)
        wall.append((time.perf_counter() - t) * 1e3)
        host.append((issued - t) * 1e3)
    return wall, host


PHASES = ("forward", "backward", "optimizer")


def phase_walls_ms(forward, step, device, steps: int, *, warmup: int = 0, before=None) -> dict:
    """Median wall ms of each phase of `steps` training steps, each phase synchronised:
    forward(i) returns the loss, its backward(), then step() (the optimizer). `before(i)`, when
    given, runs untimed ahead of each step; the first `warmup` steps are not counted."""
    walls = {p: [] for p in PHASES}
    for i in range(steps):
        if before is not None:
            before(i)
        sync(device)
        t0 = time.perf_counter()
        loss = forward(i)
        sync(device)
        t1 = time.perf_counter()
        loss.backward()
        sync(device)
        t2 = time.perf_counter()
        step()
        sync(device)
        t3 = time.perf_counter()
        if i >= warmup:
            for p, d in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2)):
                walls[p].append(1e3 * d)
    return {p: statistics.median(v) for p, v in walls.items()}


def median_ms(fn, device, *, warmup_ms: float = 100, rep_ms: float = 300, min_calls: int = 5,
              max_calls: int = 200, budget_s: float = 1.0, warmup_calls: int = 1) -> float:
    """Median milliseconds of one call of `fn` (on the CPU after `warmup_calls` untimed calls)."""
    import torch
    if torch.device(device).type == "cuda":
        import triton.testing
        return triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    for _ in range(warmup_calls):
        fn()
    times, start = [], time.perf_counter()
    while len(times) < min_calls or (time.perf_counter() - start < budget_s and len(times) < max_calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def native_checks_ready(timeout: float = 180.0) -> str:
    """Wait for compiler/native_checks.py's extension (built in the background on a machine's
    first compiled call, ~15 s of one core) before timing steady-state calls, as a long-running
    process would have it; returns its status ("loaded", "unavailable", ...) for the report."""
    from tracetorch.compiler import native_checks
    native_checks.wait_until_loaded(timeout)
    return native_checks._NATIVE.status


def geomean(xs) -> float:
    """Geometric mean of the positive, finite values (NaN when there are none)."""
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


@contextlib.contextmanager
def cold_caches():
    """Every compiler's on-disk cache in a new empty folder for the duration (Triton's kernels,
    inductor's FX graphs and kernels, our compiled graphs, kernel files and autotuning results):
    a first call inside is a cold compile however often the machine ran the same models before.
    The environment and our config are restored and the folder removed afterwards."""
    from tracetorch.compiler import config
    root = tempfile.mkdtemp(prefix="bench_caches_")
    env = {"TRITON_CACHE_DIR": os.path.join(root, "triton"),
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with config.patch(**{"backend.cache_dir": os.path.join(root, "tracetorch"),
                             "triton.kernel_dir": os.path.join(root, "kernels")}):
            yield root
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(root, ignore_errors=True)


#: what the compiler does on CUDA, asked of it on CPU tensors: Triton kernels (run by the
#: interpreter, or not at all under `kernels_not_run`), channels_last convolutions, biases added
#: in our kernels. (var's accumulation type, float64 on the CPU as ATen's, float32 on CUDA, is
#: CUDA's only under `kernels_not_run`.)
AS_ON_CUDA = {"backend.cpu_codegen": "triton", "backend.conv_layout": "channels_last",
              "backend.conv_bias": "kernel", "backend.cache_enabled": False}


@contextlib.contextmanager
def kernels_not_run(on_launch=None, **options):
    """Compile on the CPU as for CUDA (AS_ON_CUDA plus `options`), with every Triton launch
    skipped: `on_launch(launcher)` is called instead. The structure (graphs, kernels, launches) is
    what a GPU gets at the same sizes; the values are garbage. Needs TRITON_INTERPRET=1 set before
    triton is imported. The launcher's __call__ is restored afterwards."""
    from tracetorch.compiler import config
    from tracetorch.compiler.backend.lowering import reductions
    from tracetorch.compiler.backend.runtime.triton_launch import TritonLauncher
    launch, var_acc = TritonLauncher.__call__, reductions._var_acc
    TritonLauncher.__call__ = (lambda self, *a: on_launch(self)) if on_launch else (lambda self, *a: None)
    # var accumulates as on CUDA (float32 for float32 data; float64 is the CPU's rule): the
    # kernels' registers and loads are the GPU's. Nothing is computed here, so nothing is lost.
    reductions._var_acc = lambda dtype, device: reductions._acc(dtype)
    try:
        with config.patch(**{**AS_ON_CUDA, **options}):
            yield
    finally:
        TritonLauncher.__call__, reductions._var_acc = launch, var_acc


class EventCounter:
    """A logs sink (`logs.add_sink(counter, ...)`) that counts the compiler's own decisions by
    event name: breaks, recompiles, fallbacks, kernels, graphs run eagerly."""

    def __init__(self):
        self.counts = Counter()

    def __call__(self, event):
        self.counts[event.name] += 1

    def get(self, *names) -> int:
        return sum(self.counts[n] for n in names)
