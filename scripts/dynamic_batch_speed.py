"""Is a real model slower once its batch is dynamic? One batch size, timed as: eager, ours compiled
for that size alone (static), ours after two other sizes (one dynamic graph), ours in
reduce-overhead mode with size buckets (also after two other sizes, and at a size that pads to
the same bucket), and inductor.

    python scripts/dynamic_batch_speed.py bert --device cuda --dtype bfloat16 --batch 16 --profile

Session 27 found BERT at 13.8 ms dynamic against 3.4 ms static on the H100 this way (ATen's math
attention for an expanded mask). Medians of CUDA-event timings (synchronised per call);
`--profile` adds the device's busy time per call and the top kernels of the static and the
dynamic graph (torch.profiler). A diagnostic, not a benchmark table: the real-model suite is
scripts/bench_real_models.py.
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import bench_real_models as bench  # noqa: E402
from scripts import harness  # noqa: E402
from scripts.cudagraph_buckets import _at_batch  # noqa: E402


def median_ms(fn, inputs, device, reps=20) -> float:
    for _ in range(3):
        bench._call(fn, inputs)
    harness.sync(device)
    if device != "cuda":
        return harness.median_ms(lambda: bench._call(fn, inputs), device)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        bench._call(fn, inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def profile(fn, inputs, label, calls=5) -> None:
    """Device busy time per call and the top kernels by device time."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    for _ in range(3):
        bench._call(fn, inputs)
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            bench._call(fn, inputs)
        torch.cuda.synchronize()
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA)
    busy, end = 0, None
    for a, b in spans:
        if end is None or a >= end:
            busy, end = busy + b - a, b
        elif b > end:
            busy, end = busy + b - end, b
    print(f"--- {label}: device busy {busy / calls / 1000:.3f} ms per call")
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(bench.MODELS))
    harness.add_device_dtype_args(p, device="cuda")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--profile", action="store_true", help="device busy time and top kernels (CUDA)")
    args = p.parse_args(argv)
    from tracetorch import compiler
    model, inputs = bench.build_real(args.model, args.device, getattr(torch, args.dtype))
    at = lambda n: _at_batch(inputs, n)  # noqa: E731
    n, x = args.batch, at(args.batch)
    others = (max(1, n // 5), max(2, n // 3))          # two other sizes first: the batch turns dynamic
    with torch.no_grad():
        print(f"{args.model} {args.device} {args.dtype}, batch {n}", flush=True)
        print(f"  eager             {median_ms(model, x, args.device):8.3f} ms", flush=True)
        compiler.reset()
        static = compiler.compile(model)
        print(f"  ours static       {median_ms(static, x, args.device):8.3f} ms", flush=True)
        compiler.reset()
        dynamic = compiler.compile(model)
        for k in others:
            bench._call(dynamic, at(k))
        print(f"  ours dynamic      {median_ms(dynamic, x, args.device):8.3f} ms", flush=True)
        if args.device == "cuda":
            compiler.reset()
            ro = compiler.compile(model, mode="reduce-overhead", options={"backend.cudagraph_buckets": True})
            for k in others:
                bench._call(ro, at(k))
            padded = n - max(1, n // 5)
            print(f"  ours ro, buckets  {median_ms(ro, x, args.device):8.3f} ms; at batch {padded} "
                  f"{median_ms(ro, at(padded), args.device):.3f} ms", flush=True)
        inductor = torch.compile(model)
        print(f"  inductor          {median_ms(inductor, x, args.device):8.3f} ms", flush=True)
        if args.profile and args.device == "cuda":
            profile(static, x, "ours static")
            profile(dynamic, x, "ours dynamic")


if __name__ == "__main__":
    main()
