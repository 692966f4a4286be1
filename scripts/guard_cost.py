"""What do a compiled model's guards cost per call, and what are they?

Compiles a real model of scripts/bench_real_models.py with compiler.compile, calls it twice,
then times every cache entry's guard check on the same arguments (median of `--calls` checks)
and prints, per entry, the check's time, the number of guards by kind, how many the resolved
module references imply (skipped), and the compiled guard function's size. `--source` writes
the guard functions' source to a file. A diagnostic, not a benchmark.

    python scripts/guard_cost.py vit_b16 --device cuda --dtype bfloat16 --source /tmp/vit_guards.py
"""
import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import harness  # noqa: E402


def _median_us(fn, calls: int) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    harness.add_device_dtype_args(p, device="cpu")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--source", help="write the guard functions' source here")
    args = p.parse_args(argv)

    import torch
    from bench_real_models import build_real
    from tracetorch import compiler
    from tracetorch.compiler.frontend import cache as frame_cache
    torch.manual_seed(0)
    model, inputs = build_real(args.model, args.device, getattr(torch, args.dtype))
    compiled = compiler.compile(model)
    kwargs = inputs if isinstance(inputs, dict) else {}
    positional = () if isinstance(inputs, dict) else tuple(inputs)
    with torch.no_grad():
        for _ in range(2):
            compiled(*positional, **kwargs)
    sources = []
    # the model's forward is the frame whose code is the class's forward; nested frames (resume
    # functions, callees) are listed too, but only the forward's arguments are known here
    for fc in list(frame_cache._all_caches):
        for entry in fc.entries:
            gs = entry.guard_set
            kinds = collections.Counter(g.kind for g in gs.guards)
            line = (f"{fc.name} ({fc.location}): {len(gs.guards)} guards, {gs.implied} implied by the "
                    f"resolved modules, guard function {gs.source.count(chr(10))} lines; kinds "
                    + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
            if fc.code is type(model).forward.__code__:
                with torch.no_grad():
                    ok = gs.check(model, *positional, **kwargs)
                    us = _median_us(lambda: gs.check(model, *positional, **kwargs), args.calls)
                    fp = getattr(gs, "_fingerprint", None)
                    fp_us = _median_us(fp.unchanged, args.calls) if fp is not None else 0.0
                line += f"\n    check {us:.1f} us per call (passes: {ok}), module fingerprint {fp_us:.1f} us"
            print(line)
            sources.append(f"# {fc.name} ({fc.location})\n{gs.source}")
    if args.source:
        Path(args.source).write_text("\n\n".join(sources))
        print(f"guard functions written to {args.source}")


if __name__ == "__main__":
    main()
