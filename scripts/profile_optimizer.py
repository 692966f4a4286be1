"""Where an optimizer step's time goes: AdamW over a real model's parameters (gradients from one
backward), eager torch.optim (foreach) against our compiled step and inductor's, side by side:
median synchronised wall ms per step, host ms to issue a step, and torch.profiler's kernels
(count, device time, the slowest). A diagnostic, not a benchmark.

    python scripts/profile_optimizer.py gpt2 --device cuda [--rows 8]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import harness  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--device", default="cuda", choices=harness.DEVICES)
    p.add_argument("--variants", default="eager,ours,inductor")
    p.add_argument("--rows", type=int, default=8)
    args = p.parse_args(argv)
    from bench_real_models import MODELS, _loss
    from torch.profiler import ProfilerActivity, profile
    from tracetorch import compiler
    torch.backends.cuda.matmul.allow_tf32 = True
    build, make_inputs = MODELS[args.model]
    torch.manual_seed(0)
    model = build().to(args.device).train()
    inputs = make_inputs(args.device)
    _loss(args.model, model, inputs).backward()
    for variant in args.variants.split(","):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
        step = {"eager": opt.step, "ours": compiler.compile(opt.step),
                "inductor": torch.compile(opt.step)}[variant]
        for _ in range(3):
            step()
        walls, hosts = harness.wall_and_host_ms(step, args.device, 20)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(5):
                step()
            harness.sync(args.device)
        kernels = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        device_ms = sum(e.self_device_time_total for e in kernels) / 5 / 1e3
        launches = sum(e.count for e in kernels) / 5
        print(f"{args.model} {variant:<9} wall {statistics.median(walls):7.3f} ms  host "
              f"{statistics.median(hosts):7.3f} ms  device {device_ms:7.3f} ms  kernels {launches:5.0f}")
        for e in sorted(kernels, key=lambda e: -e.self_device_time_total)[:args.rows]:
            print(f"    {e.self_device_time_total / 5 / 1e3:7.3f} ms  x{e.count / 5:5.1f}  {e.key[:90]}")
        time.sleep(0.1)


if __name__ == "__main__":
    main()
