"""Where does a cold first call (compile) go? cProfile of the first call of one real model of
bench_real_models.py through compiler.compile, with our compiled-code cache off (Triton's own
on-disk cache of kernel binaries is as found: a fresh machine's is empty), printed by cumulative
and by own time. A diagnostic, not a benchmark.

    python scripts/profile_cold.py gpt2 --device cuda --dtype bfloat16 [--rows 40]
"""
import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import bench_real_models, harness  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(bench_real_models.MODELS))
    harness.add_device_dtype_args(p, dtype="bfloat16")
    p.add_argument("--rows", type=int, default=40)
    args = p.parse_args(argv)
    from tracetorch import compiler
    model, inputs = bench_real_models.build_real(args.model, args.device, getattr(torch, args.dtype))
    from tracetorch.compiler import config
    fn = compiler.compile(model)
    prof = cProfile.Profile()
    with torch.no_grad(), config.patch({"backend.cache_enabled": False}):
        t0 = time.perf_counter()
        prof.enable()
        bench_real_models._call(fn, inputs)
        harness.sync(args.device)
        prof.disable()
    print(f"profile_cold: {args.model} first call {time.perf_counter() - t0:.2f} s (under cProfile)")
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.rows)
        print(out.getvalue())


if __name__ == "__main__":
    main()
