"""CUDA graphs under a stream of batch sizes, as a server sees them: ours (mode="reduce-overhead",
whose dynamic graphs replay their size's bucket) beside inductor's (mode="reduce-overhead", a
recording per size) and eager, on a real model of scripts/bench_real_models.py.

    python scripts/cudagraph_buckets.py bert --device cuda --dtype bfloat16 --sizes 1-24 --passes 3

Every variant runs the same shuffled stream of batch sizes `--passes` times. The first pass holds
every compile, warm-up and recording; the last is the steady state. Printed per variant: each
pass's wall seconds, the last pass's median ms per call, our compiler's CUDA graph events
(recordings, bucketed calls, refusals), peak memory, and the largest error against eager's
result at the same size. A diagnostic of the bucket mechanism, not a benchmark of the models.
"""
import argparse
import json
import random
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import bench_real_models as bench  # noqa: E402
from scripts import harness  # noqa: E402


def _at_batch(inputs, n):
    """The model's inputs with n rows: its example rows repeated, then cut."""
    def one(x):
        if not isinstance(x, torch.Tensor):
            return x
        reps = -(-n // x.shape[0])
        return x.repeat(reps, *([1] * (x.dim() - 1)))[:n].contiguous()
    return {k: one(v) for k, v in inputs.items()} if isinstance(inputs, dict) else tuple(one(x) for x in inputs)


def _sizes(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def run_variant(variant, model, stream, batches, reference, device, passes):
    counter = bench._fresh_variant(device)
    from tracetorch import compiler
    if variant == "inductor_ro":
        fn = torch.compile(model, mode="reduce-overhead")
    elif variant == "ours_ro":
        fn = compiler.compile(model, mode="reduce-overhead")
    elif variant == "ours":
        fn = compiler.compile(model)
    else:
        fn = model
    walls, last = [], []
    err = 0.0
    with torch.no_grad():
        for p in range(passes):
            harness.sync(device)
            t0 = time.perf_counter()
            for n in stream:
                t1 = time.perf_counter()
                out = bench._main_tensor(bench._call(fn, batches[n]))
                if p == passes - 1:
                    harness.sync(device)
                    last.append((time.perf_counter() - t1) * 1e3)
                    want = reference[n]
                    err = max(err, float((out.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)))
            harness.sync(device)
            walls.append(round(time.perf_counter() - t0, 3))
    row = {"pass_s": walls, "last_pass_median_ms": round(statistics.median(last), 3), "max_rel_err": err,
           "events": {k: counter.counts.get(k, 0) for k in ("cudagraph_record", "cudagraph_bucket",
                                                             "cudagraph_buckets_refused", "cudagraph_disabled",
                                                             "frame_compiled")}}
    if device == "cuda":
        row["peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    if counter.reasons:
        row["reasons"] = counter.reasons
    counter.close()
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(bench.MODELS))
    harness.add_device_dtype_args(p, device="cuda")
    p.add_argument("--sizes", default="1-24", help="batch sizes in the stream, lo-hi")
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--variants", default="eager,inductor_ro,ours_ro")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    model, inputs = bench.build_real(args.model, args.device, dtype)
    sizes = _sizes(args.sizes)
    stream = sizes * 2
    random.Random(args.seed).shuffle(stream)
    batches = {n: _at_batch(inputs, n) for n in sizes}
    with torch.no_grad():
        reference = {n: bench._main_tensor(bench._call(model, batches[n])).float() for n in sizes}
    print(f"{args.model} {args.device} {args.dtype}: {len(stream)} calls per pass, batch sizes "
          f"{sizes[0]}..{sizes[-1]}, {args.passes} passes"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""), flush=True)
    for variant in [v for v in args.variants.split(",") if v]:
        try:
            row = run_variant(variant, model, stream, batches, reference, args.device, args.passes)
        except Exception as e:
            traceback.print_exc(limit=-10)      # where it failed: the next run on a GPU needs it
            row = {"error": f"{type(e).__name__}: {e}"[:300]}
        print(f"  {variant:<12} {json.dumps(row)}", flush=True)


if __name__ == "__main__":
    main()
