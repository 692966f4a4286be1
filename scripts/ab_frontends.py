"""Variants of one real model timed in turns, in one process: eager, our frontend, Dynamo with
our backend, inductor, ...

    python scripts/ab_frontends.py bert --device cuda --dtype bfloat16 --rounds 5 --inductor
    python scripts/ab_frontends.py gpt2 --device cuda --variants eager,inductor,ours,ours_ro,ours_backend

A real model of scripts/bench_real_models.py is compiled once per variant (the bench's names:
ours = compiler.compile, ours_ro = with CUDA graphs, ours_backend = torch.compile(backend=
compiler.backend)); then the variants run in turns, `--rounds` rounds of `--calls` calls each,
so that a drift of the machine's speed during the run hits every variant alike (on the lent
H200 the same variant measured 30% apart in two runs a minute apart). Prints each variant's
median wall time per call and median host time to issue a call (the device idle at the start,
not waited for at the end), over all rounds, and inductor's time over each of ours. The bench
(scripts/bench_real_models.py) gives first calls, peak memory and errors against eager.
"""
import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import harness  # noqa: E402
from bench_real_models import _call  # noqa: E402


def _op_counts(fn, inputs, args, calls=3) -> str:
    """The `args.ops` most frequent host-side profiler events per call (launches, aten ops)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(calls):
            _call(fn, inputs)
        if args.device == "cuda":
            torch.cuda.synchronize()
    events = sorted(prof.key_averages(), key=lambda e: -e.count)[:args.ops]
    return "".join(f"  {e.count / calls:8.1f}  {e.self_cpu_time_total / calls:9.1f}  {e.key}\n" for e in events)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--inductor", action="store_true", help="also torch.compile(model) with inductor")
    p.add_argument("--variants", default="", help="comma-separated names of bench_real_models' VARIANTS "
                   "(default: eager, ours, ours_backend, and inductor with --inductor)")
    p.add_argument("--ops", type=int, default=0,
                   help="also print each variant's N most frequent host events per call (torch.profiler)")
    args = p.parse_args(argv)

    import torch
    from bench_real_models import MODELS, VARIANTS, _compiled, _variant, build_real
    from tracetorch import logs
    from tracetorch.compiler import config
    names = [v for v in args.variants.split(",") if v] or \
        ["eager", "ours", "ours_backend"] + (["inductor"] if args.inductor else [])
    bad = [v for v in names if v not in VARIANTS]
    if args.model not in MODELS or bad:
        sys.exit(f"ab_frontends: unknown model {args.model!r} or variants {bad}; models: {', '.join(MODELS)}; "
                 f"variants: {', '.join(VARIANTS)}")
    torch.manual_seed(0)
    model, inputs = build_real(args.model, args.device, getattr(torch, args.dtype))
    variants = {v: _compiled(v, model) for v in names}
    walls = {k: [] for k in variants}
    hosts = {k: [] for k in variants}
    with torch.no_grad():
        for name, fn in variants.items():      # compile and warm up (CUDA graphs record on the 2nd)
            with config.patch(_variant(name)[1]):
                for _ in range(3):
                    _call(fn, inputs)
        native = harness.native_checks_ready()
        for _ in range(args.rounds):
            for name, fn in variants.items():
                with config.patch(_variant(name)[1]):
                    w, h = harness.wall_and_host_ms(lambda: _call(fn, inputs), args.device, args.calls)
                walls[name] += w
                hosts[name] += h
        ops = {name: _op_counts(fn, inputs, args) for name, fn in variants.items()} if args.ops else {}
    rows = {k: (statistics.median(walls[k]), statistics.median(hosts[k])) for k in variants}
    logs.get_logger("scripts.ab_frontends").info("ab_frontends", model=args.model, device=args.device,
                                                 **{f"{k}_ms": round(v[0], 4) for k, v in rows.items()})
    sys.stdout.write(f"{args.model} {args.device} {args.dtype}: {args.rounds} rounds x {args.calls} calls "
                     f"(native checks {native})\n")
    for name, (w, h) in rows.items():
        ratio = f"   inductor/this {rows['inductor'][0] / w:5.2f}" if "inductor" in rows and name != "inductor" else ""
        sys.stdout.write(f"  {name:12s} wall {w:8.3f} ms   host {h:8.3f} ms{ratio}\n")
    for name, table in ops.items():
        sys.stdout.write(f"--- {name}: host events per call (count, self host us per call) ---\n{table}")


if __name__ == "__main__":
    main()
