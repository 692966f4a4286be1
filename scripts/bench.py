"""Side-by-side benchmark of the workload suite (scripts/workloads.py), issue 4.

For every workload and dtype, in ONE process so the numbers are comparable:
  eager          the program as written
  ours_backend   torch.compile(fn, backend=compiler.backend)   (PyTorch's Dynamo, our backend)
  ours_compile   compiler.compile(fn)                          (our frontend and backend)
  inductor       torch.compile(fn)                             (PyTorch's own, for comparison)

Measured: median time (triton.testing.do_bench on CUDA, a median of perf_counter runs on CPU),
achieved GB/s for memory-bound workloads (fewest bytes moved / time) and its fraction of the
measured device copy bandwidth, device kernels launched per call (CUDA: counted with
torch.profiler, the same way for every variant), cold compile time (first call in this process,
empty disk caches) and warm compile time (first call in a second process that shares the disk
caches), and a check of every compiled result against eager.

    PYTHONPATH=. python scripts/bench.py --device cuda --dtype float32,bfloat16 --json out.json
    PYTHONPATH=. python scripts/bench.py --device cpu --quick --only softmax
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scripts import harness  # noqa: E402
from scripts import workloads as W  # noqa: E402

VARIANTS = ["eager", "ours_backend", "ours_compile", "inductor"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Relative-norm error ||out - eager|| / ||eager|| allowed per dtype (compiled code may reorder sums).
REL_TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 5e-3}


# ---------------------------------------------------------------- variants and timing

def reset_all():
    torch._dynamo.reset()
    try:
        from tracetorch import compiler
        from tracetorch.compiler.backend import autotune
        from tracetorch.compiler.backend.runtime import cpp_build
        compiler.reset()
        autotune.clear_memory_cache()
        cpp_build.forget_loaded()
    except Exception:
        pass


CACHE_ENV = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton",
             "TRACE_BACKEND_CACHE_DIR": "tracetorch", "TRACE_TRITON_KERNEL_DIR": "tracetorch_triton"}


def use_variant_caches(base: str, variant: str) -> None:
    """Point every disk cache at `base/<variant>/...`: each variant's first call is cold. The two
    ours_* variants compile the same graphs, so with shared caches the second one only read the
    first one's results (its 'cold' compile was a disk-cache hit). The warm process of a variant
    inherits these variables and so finds exactly that variant's caches."""
    for var, sub in CACHE_ENV.items():
        os.environ[var] = os.path.join(base, variant, sub)
    try:
        from tracetorch import compiler
        compiler.config.reload()      # TRACE_BACKEND_CACHE_DIR / TRACE_TRITON_KERNEL_DIR
    except Exception:
        pass


def make_variant(variant, fn):
    if variant == "eager":
        return fn
    if variant == "ours_backend":
        from tracetorch import compiler
        return torch.compile(fn, backend=compiler.backend)
    if variant == "ours_compile":
        from tracetorch import compiler
        return compiler.compile(fn)
    if variant == "inductor":
        return torch.compile(fn, backend="inductor")
    raise ValueError(variant)


def warm_up_variants(variants, device, dtype):
    """Compile one unrelated tiny function with every variant before any measurement, so one-time
    imports and initialisation (Dynamo, Inductor's worker pool, our lowering tables, Triton's
    import) are not counted in the cold compile time of whichever workload and variant run first.
    Its kernel differs from every workload's, so the disk caches stay cold for them."""
    def tiny(x):
        return (x * 0.3183 - 2.5).abs().sum(-1)
    x = torch.randn(8, 8, device=device, dtype=dtype)
    for variant in variants:
        if variant == "eager":
            continue
        reset_all()
        make_variant(variant, tiny)(x)
        sync(device)
    reset_all()


sync = harness.sync


def median_ms(call, device, quick):
    return harness.median_ms(call, device, warmup_ms=25 if quick else 100, rep_ms=50 if quick else 300,
                             budget_s=0.2 if quick else 1.0)


def copy_bandwidth_gbps(device, quick):
    """Measured device copy bandwidth, counting bytes read plus bytes written."""
    n = (1 << 26) if device == "cuda" and not quick else (1 << 22)
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, quick)
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def count_cuda_kernels(call):
    """Device kernels launched by one call (memcpy/memset excluded)."""
    from torch.profiler import ProfilerActivity, profile
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    n = 0
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and \
                not e.name.lower().startswith(("memcpy", "memset")):
            n += 1
    return n


def count_our_kernels(fn, autotune_log=None):
    """Kernels our backend generated while `fn` ran (the `kernel` events logs emits); the
    `autotuning` decisions taken meanwhile are appended to autotune_log."""
    try:
        from tracetorch import logs
    except ImportError:
        fn()
        return "n/a: no logs"
    counts = {"kernel": 0, "kernel_code": 0}

    def sink(event):
        if event.name in counts:
            counts[event.name] += 1
        elif event.name == "autotuning" and autotune_log is not None:
            autotune_log.append(event.payload)
    logs.add_sink(sink, artifacts={"kernel", "kernel_code", "autotuning"})
    try:
        fn()
    finally:
        logs.remove_sink(sink)
    return counts["kernel"] or counts["kernel_code"]     # one of each is logged per kernel


def rel_error(out, ref):
    outs, refs = torch.utils._pytree.tree_leaves(out), torch.utils._pytree.tree_leaves(ref)
    if len(outs) != len(refs):
        return float("inf")
    worst = 0.0
    for o, r in zip(outs, refs):
        if not isinstance(r, torch.Tensor):
            continue
        if o.shape != r.shape or o.dtype != r.dtype:
            return float("inf")
        o64, r64 = o.double(), r.double()
        if not torch.isfinite(o64).eq(torch.isfinite(r64)).all():
            return float("inf")
        denom = r64.nan_to_num().norm().item() or 1.0
        worst = max(worst, (o64 - r64).nan_to_num().norm().item() / denom)
    return worst


def fmt_err(e: Exception) -> str:
    return f"n/a: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"


# ---------------------------------------------------------------- one workload

def run_workload(wl, dtype, args, copy_bw):
    torch.manual_seed(0)
    fn, inputs = wl.build(args.device, dtype, args.preset)
    ref = fn(*inputs)
    sync(args.device)
    nbytes = wl.min_bytes(inputs, ref)
    rows = []
    for variant in args.variants:
        row = {"workload": wl.name, "dtype": str(dtype).replace("torch.", ""), "variant": variant}
        rows.append(row)
        use_variant_caches(args.cache_base, variant)
        reset_all()
        try:
            compiled = make_variant(variant, fn)
            t0 = time.perf_counter()
            box = []
            if variant.startswith("ours"):
                row["autotuning"] = []
                row["kernels_generated"] = count_our_kernels(lambda: box.append(compiled(*inputs)),
                                                             row["autotuning"])
            else:
                box.append(compiled(*inputs))
            out = box[0]
            sync(args.device)
            if variant != "eager":
                row["cold_compile_s"] = time.perf_counter() - t0
            err = rel_error(out, ref)
            row["rel_error"] = err
            row["check"] = "ok" if err <= REL_TOL[dtype] else "MISMATCH"
            row["ms"] = median_ms(lambda: compiled(*inputs), args.device, args.quick)
            if wl.memory_bound:
                row["gbps"] = nbytes / (row["ms"] * 1e-3) / 1e9
                row["pct_copy_bw"] = 100.0 * row["gbps"] / copy_bw
            if args.device == "cuda":
                row["kernels"] = count_cuda_kernels(lambda: compiled(*inputs))
        except Exception as e:  # a failing variant is reported, never hidden
            row["error"] = fmt_err(e)
    eager_ms = rows[0].get("ms") if rows and rows[0]["variant"] == "eager" else None
    for row in rows:
        if eager_ms and row.get("ms"):
            row["speedup"] = eager_ms / row["ms"]
    return rows


# ---------------------------------------------------------------- warm compile (second process)

def _child_times(args, dtype_name, flag: str, variant: str) -> dict:
    """Run this script as `--_warm` / `--_cold` child for one variant; its {workload: seconds}."""
    kind = flag.strip("-_")
    cmd = [sys.executable, os.path.abspath(__file__), "--device", args.device, "--dtype", dtype_name,
           "--preset", args.preset, flag, variant, "--only", ",".join(args.only)]
    tag = f"{kind.upper()}_JSON "
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.warm_timeout,
                           env=os.environ.copy())
    except subprocess.TimeoutExpired:
        return {"_error": f"n/a: {kind} process exceeded {args.warm_timeout}s"}
    line = [ln for ln in p.stdout.splitlines() if ln.startswith(tag)]
    if not line:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:120]
        return {"_error": f"n/a: {kind} process failed: {tail}"}
    return json.loads(line[-1][len(tag):])


def warm_compile_times(args, dtype_name):
    """Re-run only the compiles in fresh processes that share this process's disk caches."""
    out = {}
    for variant in [v for v in args.variants if v != "eager"]:
        use_variant_caches(args.cache_base, variant)     # the caches this variant's cold run filled
        out[variant] = _child_times(args, dtype_name, "--_warm", variant)
    return out


def isolated_cold_times(args, dtype_name):
    """Each compiled variant's cold compiles measured in a process of its own (empty disk caches,
    CUDA context and one tiny warm-up compile first, each workload's eager call before its compiled
    first call). In the main process the variants run one after another, so lazy one-time work
    (FakeTensor's dispatch caches, meta kernels, CUDA modules loaded on first use, e.g. an attention
    kernel) falls on whichever variant runs first, and the later ones look faster than they are."""
    return {variant: _child_times(args, dtype_name, "--_cold", variant)
            for variant in args.variants if variant != "eager"}


def cold_main(args):
    variant, dtype = args._cold, DTYPES[args.dtype.split(",")[0]]
    base = tempfile.mkdtemp(prefix="tracetorch_bench_cold_")
    use_variant_caches(base, "warmup")
    if args.device == "cuda":
        torch.ones(1, device="cuda").add_(1)
    warm_up_variants([variant], args.device, dtype)
    use_variant_caches(base, variant)
    print("COLD_JSON " + json.dumps(_first_calls(args, variant, dtype, eager_first=True)))


def warm_main(args):
    variant, dtype = args._warm, DTYPES[args.dtype.split(",")[0]]
    print("WARM_JSON " + json.dumps(_first_calls(args, variant, dtype, eager_first=False)))


def _first_calls(args, variant, dtype, eager_first: bool) -> dict:
    """{workload: seconds of its first compiled call} (or the error) for the child processes."""
    res = {}
    for name in args.only:
        try:
            torch.manual_seed(0)
            fn, inputs = W.get(name).build(args.device, dtype, args.preset)
            if eager_first:             # as in the main process
                fn(*inputs)
                sync(args.device)
            reset_all()
            compiled = make_variant(variant, fn)
            t0 = time.perf_counter()
            compiled(*inputs)
            sync(args.device)
            res[name] = time.perf_counter() - t0
        except Exception as e:
            res[name] = fmt_err(e)
    return res


# ---------------------------------------------------------------- report

def _f(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def _gen(r):
    g = r.get("kernels_generated")
    return f" ({g})" if isinstance(g, int) else ""


def markdown(rows):
    head = ("| workload | dtype | variant | median ms | speedup vs eager | GB/s | % copy BW "
            "| kernels (gen) | cold compile s | warm compile s | check |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['dtype']} | {r['variant']} | {r['error']} |"
                         + " |" * 7)
            continue
        check = r.get("check", "-") + (f" ({r['rel_error']:.1e})" if "rel_error" in r else "")
        lines.append(
            f"| {r['workload']} | {r['dtype']} | {r['variant']} | {_f(r.get('ms'), '.4f')} "
            f"| {_f(r.get('speedup'), '.2f')} | {_f(r.get('gbps'), '.0f')} "
            f"| {_f(r.get('pct_copy_bw'), '.0f')} | {r.get('kernels', '-')}{_gen(r)} "
            f"| {_f(r.get('cold_compile_s'), '.2f')} | {_warm(r.get('warm_compile_s'))} "
            f"| {check} |")
    return "\n".join(lines)


def summarize(rows, variants):
    """Per dtype and variant: geomean speedup over eager on the workloads it got right; against
    inductor, the ratio of geomeans over the workloads where BOTH are right (same set)."""
    summary = {}
    for dt in sorted({r["dtype"] for r in rows}):
        s = {}
        good = {v: {r["workload"]: r for r in rows if r["dtype"] == dt and r["variant"] == v
                    and r.get("check") == "ok" and r.get("speedup")} for v in variants}
        for v in variants:
            if v == "eager":
                continue
            sel = [r for r in rows if r["dtype"] == dt and r["variant"] == v]
            ok = list(good[v].values())
            s[v] = {"geomean_speedup": W.geomean([r["speedup"] for r in ok]),
                    "workloads_ok": len(ok), "workloads": len(sel),
                    "geomean_cold_compile_s": W.geomean([r.get("cold_compile_s") for r in ok])}
            if v != "inductor" and "inductor" in good:
                common = sorted(set(good[v]) & set(good["inductor"]))
                ours = W.geomean([good[v][w]["speedup"] for w in common])
                ind = W.geomean([good["inductor"][w]["speedup"] for w in common])
                s[v]["vs_inductor_on_common"] = {
                    "workloads": common, "speedup_ratio": ours / ind,
                    "cold_compile_ratio": W.geomean([good[v][w]["cold_compile_s"] for w in common])
                    / W.geomean([good["inductor"][w]["cold_compile_s"] for w in common])}
        summary[dt] = s
    return summary


def print_summary(summary):
    for dt, s in summary.items():
        for v, d in s.items():
            line = (f"{dt} {v}: geomean speedup over eager {d['geomean_speedup']:.2f}x on "
                    f"{d['workloads_ok']}/{d['workloads']} workloads; geomean cold compile "
                    f"{d['geomean_cold_compile_s']:.2f}s")
            c = d.get("vs_inductor_on_common")
            if c:
                line += (f"; vs inductor on the {len(c['workloads'])} workloads both ran right: "
                         f"speedup {c['speedup_ratio']:.2f}x of inductor's, cold compile "
                         f"{c['cold_compile_ratio']:.2f}x inductor's")
            print(line)


def resummarize(path):
    """Recompute the summary of a saved JSON (e.g. one fetched from the GPU machine)."""
    with open(path) as f:
        data = json.load(f)
    variants = list(dict.fromkeys(r["variant"] for r in data["results"]))
    data["summary"] = summarize(data["results"], variants)
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)
    print(markdown(data["results"]))
    print_summary(data["summary"])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_device_dtype_args(p, dtype=None)
    p.add_argument("--dtype", default="float32", help="comma list: float32,bfloat16,float16")
    p.add_argument("--only", default="", help="comma list of workload names (default: all)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--quick", action="store_true", help="small sizes, short timing")
    p.add_argument("--preset", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", default=None, help="write results here")
    p.add_argument("--no-warm", action="store_true", help="skip the second-process warm compiles")
    p.add_argument("--warm-timeout", type=int, default=900)
    p.add_argument("--_warm", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_cold", default=None, help=argparse.SUPPRESS)
    p.add_argument("--cold", choices=["isolated", "in-process"], default="isolated",
                   help="cold compile time: each variant in a process of its own (default), or the "
                        "main process's first calls (variants one after another)")
    p.add_argument("--resummarize", default=None, metavar="JSON",
                   help="recompute the summary of a saved results file and print its table")
    args = p.parse_args(argv)
    if args.resummarize:
        return resummarize(args.resummarize)
    args.only = [s for s in args.only.split(",") if s] or list(W.WORKLOADS)
    args.variants = [v for v in args.variants.split(",") if v]
    if args.preset is None:
        args.preset = "quick" if args.quick else args.device
    torch.set_grad_enabled(False)
    if args._warm:
        return warm_main(args)
    if args._cold:
        return cold_main(args)

    # Empty disk caches for the cold numbers, one set per variant (use_variant_caches); the warm
    # processes inherit the variables.
    args.cache_base = base = tempfile.mkdtemp(prefix="tracetorch_bench_")
    use_variant_caches(base, "warmup")
    if args.device == "cuda":
        torch.ones(1, device="cuda").add_(1)    # CUDA context outside every measurement
    copy_bw = copy_bandwidth_gbps(args.device, args.quick)
    meta = {"device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu",
            "torch": torch.__version__, "python": platform.python_version(),
            "copy_bw_gbps": copy_bw, "preset": args.preset, "argv": sys.argv[1:],
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "notes": "cold = first call with empty disk caches, by default in a process of the "
                     "variant's own (--cold isolated; CUDA context created before, the variant warmed "
                     "up once on an unrelated tiny function so one-time imports count against no "
                     "variant, the workload's eager call first; the main process's first call is kept "
                     "as first_call_in_process_s); warm = first call in a new process sharing the caches; "
                     "kernels on CUDA = device kernels per call counted by torch.profiler"}
    try:
        import triton
        meta["triton"] = triton.__version__
    except Exception:
        meta["triton"] = None
    try:   # worker processes compiling our Triton kernels ahead of their first launch (1 = none)
        from tracetorch.compiler.backend.runtime.triton_compile import pool_size
        meta["triton_compile_workers"] = pool_size()
    except Exception:
        meta["triton_compile_workers"] = None
    print(f"# device {meta['device']}; copy bandwidth {copy_bw:.0f} GB/s", flush=True)

    rows = []
    for dtype_name in args.dtype.split(","):
        dtype = DTYPES[dtype_name]
        warm_up_variants(args.variants, args.device, dtype)
        drows = []
        for name in args.only:
            try:
                drows += run_workload(W.get(name), dtype, args, copy_bw)
            except Exception as e:
                drows.append({"workload": name, "dtype": dtype_name, "variant": "eager",
                              "error": fmt_err(e)})
            print("\n".join(markdown([r for r in drows if r["workload"] == name]).splitlines()[2:]),
                  flush=True)
        if args.cold == "isolated":
            cold = isolated_cold_times(args, dtype_name)
            for r in drows:
                c = cold.get(r["variant"])
                if c is not None and "cold_compile_s" in r:
                    r["first_call_in_process_s"] = r["cold_compile_s"]
                    v = c.get(r["workload"], c.get("_error", "n/a"))
                    if isinstance(v, (int, float)):
                        r["cold_compile_s"] = v
                    else:
                        r["cold_compile_error"] = v
        if not args.no_warm:
            warm = warm_compile_times(args, dtype_name)
            for r in drows:
                w = warm.get(r["variant"])
                if w is not None:
                    r["warm_compile_s"] = w.get(r["workload"], w.get("_error", "n/a"))
        rows += drows
    summary = summarize(rows, args.variants)
    print()
    print(markdown(rows))
    print()
    print_summary(summary)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": rows, "summary": summary}, f, indent=1, default=str)
        print(f"wrote {args.json}")


def _warm(value) -> str:
    """The warm-compile cell: a note (str) as it is, else seconds."""
    return value if isinstance(value, str) else _f(value, '.2f')


if __name__ == "__main__":
    main()
