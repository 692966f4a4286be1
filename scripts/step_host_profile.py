"""Is a training step host-bound or GPU-bound? Wall time against host time per step, per variant,
and where the host time goes.

    python scripts/step_host_profile.py resnet50 --variants inductor,ours
    python scripts/step_host_profile.py vit_s16 --variants ours --steps 30 --rows 40

For each variant (names and step functions of scripts/bench_real_models.py: the model and its
AdamW step compiled by the same compiler) the step runs once to compile, then `--steps` times
with the device idle at the start of each: host time is until the step's last launch returns,
wall time until the device has finished it (CUDA events). A step whose wall time is its host
time is host-bound: its launches, not its kernels, set the speed; a wall time above the host
time is GPU time the host did not hide. Then `--rows` functions by own time from cProfile over
10 more steps (our launcher's frames against inductor's, allocations, guards, the optimizer's
bookkeeping). Session 22 found ResNet-50's step GPU-bound this way (host 19.4 ms, wall 23.1 ms;
inductor 19.5 / 19.6 ms), where a single kernel took 4.7 ms.
"""
import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _measure(step, inputs, steps: int):
    import torch
    walls, hosts = [], []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()
        step(inputs)
        t1 = time.perf_counter()
        end.record()
        end.synchronize()
        walls.append(start.elapsed_time(end))
        hosts.append((t1 - t0) * 1e3)
    return statistics.median(walls), statistics.median(hosts)


def main(argv=None):
    from scripts import bench_real_models as bench
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(bench.MODELS))
    p.add_argument("--variants", default="inductor,ours",
                   help="comma-separated training variants of bench_real_models (eager, inductor, ours, ours_ro, ...)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rows", type=int, default=30, help="cProfile rows per variant (0: none)")
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        p.error("needs a CUDA device: host and wall time only differ where a device runs the kernels")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    build, make_inputs = bench.MODELS[args.model]
    base = build().to("cuda").train()
    state = {k: v.clone() for k, v in base.state_dict().items()}
    inputs = make_inputs("cuda")
    for variant in [v for v in args.variants.split(",") if v]:
        base.load_state_dict(state)
        opt = torch.optim.AdamW(base.parameters(), lr=1e-4)
        bench._fresh_variant("cuda").close()
        step = bench._train_step_fn(variant, args.model, base, opt)
        float(step(inputs))
        torch.cuda.synchronize()
        wall, host = _measure(step, inputs, args.steps)
        print(f"{args.model} {variant:10s} median wall {wall:7.2f} ms  host {host:7.2f} ms  "
              f"({'GPU-bound' if wall > host * 1.05 else 'host-bound'})", flush=True)
        if args.rows:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(10):
                step(inputs)
            torch.cuda.synchronize()
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.rows)
            print("\n".join(line[:200] for line in text.getvalue().splitlines()), flush=True)


if __name__ == "__main__":
    main()
