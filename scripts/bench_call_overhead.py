"""Per-call overhead over eager of compiled suite models: tracetorch vs TorchDynamo, side by side.

    PYTHONPATH=. python scripts/bench_call_overhead.py [gpt2 mobilenet_v2 resnet18] [--calls 200]
        [--rounds 5] [--device cpu|cuda] [--no-default] [--layers]

Each model gets tiny inputs (batch 1, short sequence), so the kernels cost little and what is left
is the per-call CPU work of the frontend: guards, the transformed code, the aot wrapper, the output
code. Variants, all under torch.no_grad(), measured in interleaved rounds (so machine load hits
them alike) and reported as medians:
  eager            the module itself
  ours[eager]      compiler.compile(backend="eager"): pure frontend + guard cost
  dynamo[eager]    torch.compile(backend="eager")
  ours[default]    compiler.compile() with the default backend (aot + C++/Triton output code)
Overhead = median(variant) - median(eager). `--layers` also times our layers on their own: the
guard function of the cache entry, and the cache entry's transformed code (run) without guards.
Calls torch.compile on purpose (comparison only). Writes a markdown table to stdout.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import harness  # noqa: E402

from tracetorch import compiler  # noqa: E402
from tracetorch import logs  # noqa: E402

log = logs.get_logger("scripts.bench_call_overhead")

DEFAULT_MODELS = ("gpt2", "mobilenet_v2", "resnet18")


def tiny_inputs(spec, device):
    """The suite's CPU inputs cut to batch 1 (and 8 tokens for sequence models)."""
    out = []
    for x in spec.inputs(device, torch.float32, "cpu"):
        x = x[:1]
        if not x.is_floating_point() and x.dim() == 2:
            x = x[:, :8]
        out.append(x.contiguous())
    return tuple(out)


def timed_us(fn, args, calls: int, device: str) -> float:
    """Median wall time of one call in µs (synchronized only on CUDA, once per call)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    clock = time.perf_counter_ns
    times = []
    for _ in range(calls):
        sync()
        t0 = clock()
        fn(*args)
        sync()
        times.append(clock() - t0)
    return statistics.median(times) / 1000


def _cache_of(compiled_module):
    fwd = compiled_module._compiled_forward
    return getattr(fwd, "__func__", fwd)._tracetorch_cache


def variants(model, use_default: bool):
    import torch._dynamo
    torch._dynamo.reset()
    compiler.reset()
    out = {"eager": model,
           "ours[eager]": compiler.compile(model, backend="eager"),
           "dynamo[eager]": torch.compile(model, backend="eager")}
    if use_default:
        out["ours[default]"] = compiler.compile(model)
    return out


def layer_fns(compiled, model, args):
    """Our layers alone: the newest cache entry's guard function and its transformed code."""
    cache = _cache_of(compiled)
    check, run = cache.fast[0]
    full = (model,) + tuple(args)
    return {"guards": (check, full), "transformed code": (run, full)}


def bench_model(name, device, calls, rounds, use_default, layers):
    from models import SUITE
    spec = SUITE[name]
    model = spec.build().to(device).eval()
    args = tiny_inputs(spec, device)
    with torch.no_grad():
        fns = variants(model, use_default)
        expected = model(*args)
        for label, fn in fns.items():           # compile + warm up; every result equals eager's
            for _ in range(3):
                out = fn(*args)
            torch.testing.assert_close(out, expected, rtol=1e-3, atol=1e-3)
        extra = {}
        if layers:
            for label in [k for k in fns if k.startswith("ours")]:
                for lname, (fn, a) in layer_fns(fns[label], model, args).items():
                    extra[f"{label} {lname}"] = (fn, a)
        samples = {k: [] for k in list(fns) + list(extra)}
        for _ in range(rounds):
            for label, fn in fns.items():
                samples[label].append(timed_us(fn, args, calls, device))
            for label, (fn, a) in extra.items():
                samples[label].append(timed_us(fn, a, calls, device))
    return {k: statistics.median(v) for k, v in samples.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=list(DEFAULT_MODELS))
    harness.add_device_dtype_args(ap, device="cpu", dtype=None)
    ap.add_argument("--calls", type=int, default=200, help="calls per round and variant")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-default", action="store_true", help="skip ours with the default backend")
    ap.add_argument("--layers", action="store_true", help="also time our guard function and transformed code alone")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for name in a.models:
        r = bench_model(name, a.device, a.calls, a.rounds, not a.no_default, a.layers)
        log.info("call_overhead", model=name, device=a.device, **{k: round(v, 1) for k, v in r.items()})
        rows.append((name, r))
    cols = ["ours[eager]", "dynamo[eager]"] + ([] if a.no_default else ["ours[default]"])
    w = sys.stdout.write
    w(f"\ntorch {torch.__version__}, device {a.device}, {a.rounds} rounds x {a.calls} calls, "
      f"load average {load:.1f}; µs per call (median), overhead = variant - eager\n\n")
    w("| model | eager | " + " | ".join(f"{c} | {c} overhead" for c in cols) + " |\n")
    w("|---|---|" + "---|---|" * len(cols) + "\n")
    for name, r in rows:
        e = r["eager"]
        w(f"| {name} | {e:.0f} | " + " | ".join(f"{r[c]:.0f} | {r[c] - e:+.0f}" for c in cols) + " |\n")
    if a.layers:
        w("\nOur layers alone (µs per call, median):\n\n| model | layer | µs |\n|---|---|---|\n")
        for name, r in rows:
            for k, v in r.items():
                if k not in cols and k != "eager":
                    w(f"| {name} | {k} | {v:.0f} |\n")


if __name__ == "__main__":
    main()
