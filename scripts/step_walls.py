"""Is a training step host-bound? Per step of one real model (scripts/bench_real_models.py's), for
each variant: the wall time (CUDA events around the step, synchronised) and the host time (until
the step returns, before the end event is recorded). When host time is about the wall time, the
GPU waited for the host: launches, not kernels, set the step's speed.

    python scripts/step_walls.py vit_s16 --variants eager,inductor,ours,ours_ro --steps 30
    python scripts/step_walls.py gpt2 --variants inductor,ours --steps 5 --rounds 8   # in turns

Prints every step's times and the medians; the compiler's events counted during the timed steps
(recompiles, CUDA graph recordings) show what else ran. `--cprofile N` then profiles N more steps
of each variant with cProfile (where a host-bound step's time goes: launches per step are the
launcher's call count over N). `--sync-check` then runs one more step with CUDA's synchronisation
debug mode on and prints where the host waited for the device (a wall time well above the host
time with the GPU time below both means such a wait). Also printed: the caching allocator's
allocations and driver calls per timed step. A diagnostic, not a benchmark.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import bench_real_models as bench  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(bench.MODELS))
    p.add_argument("--variants", default="eager,inductor,ours")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--cprofile", type=int, default=0, metavar="N",
                   help="then profile N steps of each variant with cProfile (top functions by own time)")
    p.add_argument("--rounds", type=int, default=1,
                   help="above 1: every variant trains its own copy of the model, and the variants take "
                        "turns, --steps steps each per round (a host whose speed drifts hits them alike)")
    p.add_argument("--autocast", default=None, choices=("bfloat16", "float16"),
                   help="mixed precision: torch.autocast around the forward and loss (as bench_real_models --train)")
    p.add_argument("--sync-check", action="store_true",
                   help="then run one step with torch.cuda.set_sync_debug_mode and list the synchronisations")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("step_walls: needs a CUDA device (host and wall times of GPU training steps)")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    build, make_inputs = bench.MODELS[args.model]
    model = build().to("cuda").train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    inputs = make_inputs("cuda")
    if args.rounds > 1:
        return _interleaved(args, build, state, inputs)
    for variant in [v for v in args.variants.split(",") if v]:
        model.load_state_dict(state)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        counter = bench._fresh_variant("cuda")
        step = bench._train_step_fn(variant, args.model, model, opt, args.autocast)
        for _ in range(3):                     # compile, record, warm up
            step(inputs)
        print(f"{variant}: native checks {bench.harness.native_checks_ready()}", flush=True)
        torch.cuda.synchronize()
        before = dict(counter.counts)
        alloc_before = _allocator_counts()
        walls, hosts = _timed_steps(step, inputs, args.steps)
        events = {k: n - before.get(k, 0) for k, n in counter.counts.items() if n != before.get(k, 0)}
        allocator = {k: round((n - alloc_before[k]) / args.steps, 1) for k, n in _allocator_counts().items()}
        counter.close()
        print(f"{variant} wall ms {[round(x, 1) for x in walls]}")
        print(f"{variant} host ms {[round(x, 1) for x in hosts]}")
        print(f"{variant}: median wall {statistics.median(walls):.2f} ms, host {statistics.median(hosts):.2f} ms; "
              f"events during the timed steps {events}", flush=True)
        print(f"{variant}: caching allocator per step {allocator}", flush=True)
        if args.cprofile > 0:
            _profile(variant, step, inputs, args.cprofile)
        if args.sync_check:
            _sync_check(variant, step, inputs)


def _timed_steps(step, inputs, n) -> tuple[list, list]:
    """(wall ms, host ms) of each of n steps, each started on an idle device."""
    walls, hosts = [], []
    for _ in range(n):
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
    return walls, hosts


def _interleaved(args, build, state, inputs) -> None:
    """--rounds: each variant gets its own model (same initial weights) and optimizer, is compiled
    and warmed up, then the variants take turns. Prints each variant's median over all rounds,
    its per-round medians, and inductor's median over each other variant's."""
    variants = [v for v in args.variants.split(",") if v]
    steps = {}
    for variant in variants:
        torch.manual_seed(0)
        model = build().to("cuda").train()
        model.load_state_dict(state)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        steps[variant] = bench._train_step_fn(variant, args.model, model, opt, args.autocast)
        for _ in range(3):                     # compile, record, warm up
            steps[variant](inputs)
    print(f"native checks {bench.harness.native_checks_ready()}", flush=True)
    walls = {v: [] for v in variants}
    hosts = {v: [] for v in variants}
    rounds = {v: [] for v in variants}
    for _ in range(args.rounds):
        for variant in variants:
            w, h = _timed_steps(steps[variant], inputs, args.steps)
            walls[variant] += w
            hosts[variant] += h
            rounds[variant].append(round(statistics.median(w), 2))
    print(f"{args.model}{' autocast ' + args.autocast if args.autocast else ''}: "
          f"{args.rounds} rounds x {args.steps} steps per variant, in turns "
          f"({torch.cuda.get_device_name()})")
    for variant in variants:
        wall = statistics.median(walls[variant])
        line = (f"  {variant:<10} median wall {wall:.2f} ms, host {statistics.median(hosts[variant]):.2f} ms; "
                f"per round {rounds[variant]}")
        if "inductor" in walls and variant != "inductor":
            line += f"; inductor/this {statistics.median(walls['inductor']) / wall:.2f}"
        print(line, flush=True)


#: the caching allocator's counters that cost host time: tensor allocations served, and calls into
#: the driver (cudaMalloc/cudaFree; a free synchronises the device) with the retries that free
#: cached blocks after a failed allocation
_ALLOCATOR_KEYS = ("allocation.all.allocated", "num_device_alloc", "num_device_free", "num_alloc_retries",
                   "num_sync_all_streams")


def _allocator_counts() -> dict:
    stats = torch.cuda.memory_stats()
    return {k: stats.get(k, 0) for k in _ALLOCATOR_KEYS}


def _profile(variant, step, inputs, n):
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        step(inputs)
    torch.cuda.synchronize()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(25)     # which part of the step (forward, backward, optimizer)
    print(f"--- {variant}: cProfile of {n} steps ---\n{out.getvalue()}", flush=True)


def _sync_check(variant, step, inputs):
    """One step with CUDA's sync debug mode: each synchronising call warns, and the warning names
    the Python line that made the call."""
    import warnings
    torch.cuda.synchronize()
    places = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step(inputs)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    for w in caught:
        text = str(w.message)
        if "synchroniz" not in text.lower() or "prototype" in text:   # (the mode's own notice)
            continue
        places.append(f"{w.filename}:{w.lineno}: {text[:100]}")
    print(f"--- {variant}: synchronisations in one step: {len(places) or 'none'}", flush=True)
    for line in places[:20]:
        print("   ", line, flush=True)


if __name__ == "__main__":
    main()
