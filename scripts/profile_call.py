"""Where does one compiled call's time go? A cProfile of steady-state calls of a suite model
(scripts/models), a kernel workload (scripts/workloads.py) or a real model of
scripts/bench_real_models.py (`real:<name>`, e.g. `real:t5_small`).

    python scripts/profile_call.py gpt2 --device cuda --dtype bfloat16
    python scripts/profile_call.py real:gpt2 --device cuda --dtype bfloat16 --kernels
    python scripts/profile_call.py gpt2 --device cpu --calls 50
    python scripts/profile_call.py transformer_block --device cuda --dtype bfloat16 --kernels
    python scripts/profile_call.py real:resnet50 --device cuda --dtype bfloat16 --mode reduce-overhead --kernels

Compiles the model with compiler.compile (default backend), warms it up, then profiles `--calls`
calls and prints the top functions by total (self) time and by cumulative time, plus the median
wall time per call next to eager's. This is how the per-call Python overhead (guards, the aot
wrapper, the output code, kernel launches) is found; it is a diagnostic, not a benchmark.
`--kernels` adds torch.profiler's per-kernel device-time tables of ours, eager and
torch.compile/inductor (which kernel is slow, next to the peer's).
"""
import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import harness  # noqa: E402


def call(fn, inputs):
    """fn on the model's inputs: a tuple of positional arguments, or a dict of keywords (the
    encoder-decoder real models are called with keywords)."""
    return fn(**inputs) if isinstance(inputs, dict) else fn(*inputs)


def kernel_profile(compiled, model, inputs, args) -> str:
    """torch.profiler tables of device time per kernel: ours, eager and (unless --no-inductor)
    torch.compile/inductor."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    sort = "self_cuda_time_total" if args.device == "cuda" else "self_cpu_time_total"
    text = ""
    variants = [("ours", compiled), ("eager", model)]
    if not args.no_inductor:
        variants.append(("inductor", torch.compile(model)))
    for label, fn in variants:
        for _ in range(3):       # compile (inductor) and warm up outside the profile
            call(fn, inputs)
        with profile(activities=acts) as prof:
            for _ in range(10):
                call(fn, inputs)
            if args.device == "cuda":
                torch.cuda.synchronize()
        text += f"\n=== {label}: 10 calls ===\n" + prof.key_averages().table(sort_by=sort, row_limit=args.top)
    return text


#: CUDA runtime calls that make the host wait for the device (or may: allocation and freeing)
SYNCING = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
           "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaStreamWaitEvent")


def sync_report(label, fn, inputs, calls=5) -> str:
    """Does a call make the host wait for the device? torch's sync debug mode over one call
    (each synchronizing ATen call it reports), the synchronizing CUDA runtime calls in a
    profile of `calls` calls, and the device's busy time against the span its work covers per
    call (idle gaps: the host was behind, or waited)."""
    import collections
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        call(fn, inputs)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call(fn, inputs)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call(fn, inputs)
        torch.cuda.synchronize()
    events = prof.events()
    runtime = collections.Counter(e.name for e in events if e.name.startswith(SYNCING))
    spans = sorted((e.time_range.start, e.time_range.end) for e in events
                   if e.device_type == torch.autograd.DeviceType.CUDA)
    busy, end = 0, None
    for a, b in spans:
        if end is None or a >= end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    span = (spans[-1][1] - spans[0][0]) if spans else 0
    lines = [f"=== syncs: {label} ===",
             f"device busy {busy / calls / 1000:.3f} ms per call over a span of {span / calls / 1000:.3f} ms "
             f"(idle {(span - busy) / calls / 1000:.3f} ms)",
             f"synchronizing runtime calls in {calls} calls: {dict(runtime) or 'none'}"]
    msgs = collections.Counter(str(w.message).splitlines()[0] for w in caught)
    lines += [f"sync debug mode: {n}x {m}" for m, n in msgs.most_common(10)] or ["sync debug mode: no sync"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    harness.add_device_dtype_args(p, device="cpu")
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--top", type=int, default=35)
    p.add_argument("--kernels", action="store_true",
                   help="also print torch.profiler's per-kernel device time tables (ours, eager, inductor)")
    p.add_argument("--no-inductor", action="store_true", help="--kernels without the inductor table")
    p.add_argument("--syncs", action="store_true",
                   help="CUDA: report host waits (sync debug mode, synchronizing runtime calls) and device "
                        "idle time per call, for ours and (unless --no-inductor) inductor")
    p.add_argument("--via", choices=["compile", "backend"], default="compile",
                   help="compile: compiler.compile (our frontend); backend: torch.compile(backend=compiler.backend)")
    p.add_argument("--mode", choices=["default", "reduce-overhead"], default="default",
                   help="compiler.compile's mode (reduce-overhead: CUDA graphs); --via compile only")
    args = p.parse_args(argv)

    import torch
    from tracetorch import compiler
    from models import SUITE
    from workloads import WORKLOADS

    from scripts.bench_real_models import MODELS as REAL_MODELS, build_real
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    if args.model in SUITE:
        spec = SUITE[args.model]
        model = spec.build().to(args.device).to(dtype).eval()
        scale = "cpu" if args.device == "cpu" else "gpu"
        inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in spec.inputs(args.device, dtype, scale))
    elif args.model in WORKLOADS:
        model, inputs = WORKLOADS[args.model].build(args.device, dtype, args.device)
    elif args.model.startswith("real:") and args.model[5:] in REAL_MODELS:
        # float inputs in the model's dtype too (a bf16 ResNet was fed float32 images)
        model, inputs = build_real(args.model[5:], args.device, dtype)
    else:
        sys.exit(f"profile_call: unknown model {args.model!r}; valid: suite models {', '.join(SUITE)}; "
                 f"workloads {', '.join(WORKLOADS)}; real models "
                 f"{', '.join('real:' + n for n in REAL_MODELS)}")
    compiled = compiler.compile(model, mode=args.mode) if args.via == "compile" \
        else torch.compile(model, backend=compiler.backend)
    with torch.no_grad():
        t = time.perf_counter()
        call(compiled, inputs)
        cold = time.perf_counter() - t
        for _ in range(5):
            call(compiled, inputs)
        eager_ms, eager_host_ms = map(statistics.median,
                                      harness.wall_and_host_ms(lambda: call(model, inputs), args.device, 30))
        ours_ms, host_ms = map(statistics.median,
                               harness.wall_and_host_ms(lambda: call(compiled, inputs), args.device, 30))
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            call(compiled, inputs)
        prof.disable()
        if args.device == "cuda":
            torch.cuda.synchronize()
        kernel_tables = kernel_profile(compiled, model, inputs, args) if args.kernels else ""
        if args.syncs and args.device == "cuda":
            kernel_tables += sync_report("ours", compiled, inputs)
            kernel_tables += sync_report("eager", model, inputs)
            if not args.no_inductor:
                kernel_tables += sync_report("inductor", torch.compile(model), inputs)
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    text = out.getvalue()
    from tracetorch import logs
    logs.get_logger("scripts.profile_call").info(
        "profile_call", model=args.model, cold_s=round(cold, 3), eager_ms=round(eager_ms, 4),
        ours_ms=round(ours_ms, 4), host_ms=round(host_ms, 4), eager_host_ms=round(eager_host_ms, 4),
        calls=args.calls, via=args.via)
    sys.stdout.write(f"{args.model} {args.device} {args.dtype} via {args.via}: cold {cold:.2f}s, "
                     f"eager {eager_ms:.3f} ms (host {eager_host_ms:.3f}), "
                     f"ours {ours_ms:.3f} ms (host {host_ms:.3f}) per call\n"
                     f"{text}{kernel_tables}")


if __name__ == "__main__":
    main()
