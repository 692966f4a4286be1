"""GPU time per kernel of one compiled call, ours next to inductor's (and eager's): which kernel
of a workload (scripts/workloads.py) or suite model (scripts/models) is slow.

    PYTHONPATH=. python scripts/profile_kernels.py transformer_block --dtype bfloat16
    PYTHONPATH=. python scripts/profile_kernels.py gnn --suite --dtype bfloat16
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(name, suite, dtype, device):
    if suite:
        from scripts.models import SUITE
        spec = SUITE[name]
        model = spec.build().to(device=device, dtype=dtype).eval()
        return model, spec.inputs(device, dtype, "gpu")
    from scripts.workloads import WORKLOADS
    return WORKLOADS[name].build(device, dtype, "cuda")


def kernel_times(fn, args, calls=5):
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*args)
            torch.cuda.synchronize()
    out: dict = {}
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == torch.autograd.DeviceType.CUDA:
            k = e.name()[:70]
            n, t = out.get(k, (0, 0.0))
            out[k] = (n + 1, t + (e.end_ns() - e.start_ns()) / 1e3 / calls)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name")
    ap.add_argument("--suite", action="store_true")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    import compiler
    dtype = getattr(torch, a.dtype)
    fn, args = build(a.name, a.suite, dtype, "cuda")
    for variant, compiled in (("eager", fn), ("ours", compiler.compile(fn)), ("inductor", torch.compile(fn))):
        times = kernel_times(compiled, args)
        total = sum(t for _, t in times.values())
        print(f"\n{variant}: {sum(n for n, _ in times.values()) // 5} kernels per call, {total:.1f} us GPU per call")
        for k, (n, t) in sorted(times.items(), key=lambda kv: -kv[1][1])[:a.top]:
            print(f"  {t:8.1f} us  x{n // 5:<3d} {k}")


if __name__ == "__main__":
    main()
