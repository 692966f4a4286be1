"""Where a training step's time goes, per phase (forward, backward, optimizer), for eager, ours
and inductor side by side: wall time per phase (synchronised), kernels launched and GPU kernel
time per phase (torch.profiler). A phase whose wall time is far above its GPU time is bound by
host-side overhead (guards, wrappers, launches); one whose GPU time is high has slow kernels.

    PYTHONPATH=. python scripts/profile_training.py --device cuda [--models mlp_adamw,cnn_sgd]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scripts import harness  # noqa: E402
from scripts.bench_training import generic_loss, make_models, setup_variant  # noqa: E402

from scripts.harness import PHASES, sync  # noqa: E402


def phase_walls(fwd, step, opt, data, device, steps):
    def forward(i):
        x, y = data[i % len(data)]
        return generic_loss(fwd(*x), y)
    return harness.phase_walls_ms(forward, step, device, steps, warmup=3,
                                  before=lambda i: opt.zero_grad(set_to_none=True))


def phase_kernels(fwd, step, opt, data, device):
    """(kernel count, GPU kernel ms, top kernels) per phase, from one profiled step."""
    from torch.profiler import ProfilerActivity, profile, record_function
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    x, y = data[0]
    opt.zero_grad(set_to_none=True)
    with profile(activities=acts) as prof:
        with record_function("phase:forward"):
            loss = generic_loss(fwd(*x), y)
            sync(device)
        with record_function("phase:backward"):
            loss.backward()
            sync(device)
        with record_function("phase:optimizer"):
            step()
            sync(device)
    events = prof.profiler.kineto_results.events()
    spans = {e.name()[6:]: (e.start_ns(), e.end_ns()) for e in events if e.name().startswith("phase:")}
    out = {p: [0, 0.0, {}] for p in PHASES}
    for e in events:
        if e.device_type() != torch.autograd.DeviceType.CUDA or e.name().startswith("phase:"):
            continue
        # GPU events run after their launch: attribute them by the phase whose span holds them
        # (every phase ends with a synchronize, so a kernel finishes inside its own phase)
        for p, (a, b) in spans.items():
            if a <= e.start_ns() <= b:
                rec = out[p]
                rec[0] += 1
                dur = (e.end_ns() - e.start_ns()) / 1e6
                rec[1] += dur
                rec[2][e.name()[:60]] = rec[2].get(e.name()[:60], 0.0) + dur
                break
    return out


def cprofile_phase(phase, fwd, step, opt, data, device, steps=10):
    import cProfile
    import pstats
    prof = cProfile.Profile()
    for i in range(steps):
        x, y = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        sync(device)
        if phase == "forward":
            prof.enable()
        loss = generic_loss(fwd(*x), y)
        sync(device)
        prof.disable()
        if phase == "backward":
            prof.enable()
        loss.backward()
        sync(device)
        prof.disable()
        if phase == "optimizer":
            prof.enable()
        step()
        sync(device)
        prof.disable()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(18)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_device_dtype_args(ap, device="cuda", dtype=None)
    ap.add_argument("--models", default="")
    ap.add_argument("--variants", default="eager,ours,inductor")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--cprofile", default="", help="also print a cProfile of this phase (forward, "
                    "backward or optimizer) over 10 steps, per variant")
    a = ap.parse_args()
    device = torch.device(a.device)
    models = make_models(device, a.quick)
    names = [n for n in models if not a.models or n in a.models.split(",")]
    for name in names:
        factory, batch, make_opt = models[name]
        for variant in a.variants.split(","):
            model, opt, fwd, step, data = setup_variant(variant, factory, batch, make_opt, device,
                                                        torch.float32)
            walls = phase_walls(fwd, step, opt, data, device, a.steps)
            kern = phase_kernels(fwd, step, opt, data, device)
            for p in PHASES:
                n, gpu, top = kern[p]
                tops = sorted(top.items(), key=lambda kv: -kv[1])[:a.top]
                sys.stdout.write(f"{name:10s} {variant:9s} {p:9s} wall {walls[p]:7.3f} ms  kernels {n:4d}  "
                                 f"gpu {gpu:7.3f} ms  top: " + ", ".join(f"{k} {v:.3f}" for k, v in tops) + "\n")
            sys.stdout.flush()
            if a.cprofile:
                cprofile_phase(a.cprofile, fwd, step, opt, data, device)


if __name__ == "__main__":
    main()
