"""Cold compile time of a workload's Triton kernels: sequential (in this process) vs the worker pool.

Works without a GPU: Triton compiles CUDA binaries for an explicit target (default sm_90) on a CPU
machine. The kernels come from the workloads of scripts/workloads.py compiled for CPU tensors with
the Triton code generator (backend.cpu_codegen=triton, in a child process under the interpreter),
turned into their CUDA form (libdevice import, interpret=False); each kernel's specializations are
those the first call would compile (runtime/triton_compile.py: TritonLauncher.precompile_items).

    PYTHONPATH=. python scripts/bench_precompile.py --only transformer_block,layernorm --workers 2

Each mode gets its own empty TRITON_CACHE_DIR. "parallel" = submit every kernel to the pool, then
compile each in this process in launch order (a cache hit once its worker is done), as the first
call of a compiled graph does; the pool is started (and warmed) before the clock starts, as in
scripts/bench.py, whose warm-up compile starts it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

INTERP_LIBDEVICE = "from tracetorch.compiler.backend.runtime import triton_interp_libdevice as libdevice"
CUDA_LIBDEVICE = "from triton.language.extra import libdevice"


def generate(names: list[str], preset: str) -> list[str]:
    """(child process, TRITON_INTERPRET=1) the define code of every kernel of the workloads."""
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from tracetorch import compiler
    from tracetorch.compiler.backend.codegen import triton as tcg
    from tracetorch.compiler.backend.runtime import triton_launch
    from scripts import workloads as W
    defines = []
    orig = tcg.TritonCodegen._finish

    def finish(self, k, alt=None):
        g = orig(self, k, alt)
        defines.append(g.define_code)
        return g

    class Stop(Exception):
        pass

    def stop(self, *a):
        raise Stop()
    tcg.TritonCodegen._finish = finish
    triton_launch.TritonLauncher.__call__ = stop        # generate only: never run a kernel
    torch.set_grad_enabled(False)
    with compiler.config.patch({"backend.cpu_codegen": "triton", "backend.cache_enabled": False}):
        for name in names:
            fn, inputs = W.get(name).build("cpu", torch.float32, preset)
            compiler.reset()
            try:
                compiler.compile(fn)(*inputs)
            except Stop:
                pass
    return [d.replace("interpret=True", "interpret=False").replace(INTERP_LIBDEVICE, CUDA_LIBDEVICE)
            for d in defines]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="transformer_block")
    p.add_argument("--preset", default="quick")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--_generate", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = [s for s in args.only.split(",") if s]
    if args._generate:
        json.dump(generate(names, args.preset), sys.stdout)
        return 0
    env = dict(os.environ, PYTHONPATH=ROOT, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--_generate", "--only", args.only,
                          "--preset", args.preset], capture_output=True, text=True, env=env, check=True)
    defines = json.loads(out.stdout)

    base = tempfile.mkdtemp(prefix="tracetorch_precompile_")
    os.environ["TRACE_TRITON_KERNEL_DIR"] = os.path.join(base, "kernels")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    from tracetorch.compiler import config
    config.reload()
    from triton.backends.compiler import GPUTarget
    from tracetorch.compiler.backend.runtime import triton_compile as TC
    from tracetorch.compiler.backend.runtime.triton_launch import TritonLauncher
    target = GPUTarget("cuda", args.arch, 32)
    ns = {"TritonLauncher": TritonLauncher}
    for d in defines:
        exec(d, ns)
    launchers = [v for v in ns.values() if isinstance(v, TritonLauncher)]
    items = [it for l in launchers for it in l.precompile_items({})]

    def fresh_cache(mode):
        d = os.path.join(base, mode, "triton")
        os.environ["TRITON_CACHE_DIR"] = d
        return d

    # warm Triton's own one-time costs (backend import, libdevice) on an unrelated kernel
    fresh_cache("warmup")
    k0, s0 = items[0]
    TC.worker_mod.compile_spec(k0.fn, s0.types, s0.descs, s0.constexprs, dict(s0.options) | {"num_warps": 1},
                               target)
    res = {"kernels": len(launchers), "compiles": len(items), "workers": args.workers,
           "workloads": names, "target": f"cuda sm_{args.arch}"}

    fresh_cache("sequential")
    t0 = time.perf_counter()
    for k, s in items:
        TC.worker_mod.compile_spec(k.fn, s.types, s.descs, s.constexprs, dict(s.options), target)
    res["sequential_s"] = round(time.perf_counter() - t0, 2)

    pool = TC.CompilePool(args.workers, target=target)
    for f in [pool.submit({"op": "ping"}) for _ in range(args.workers)]:
        f.result()                     # started and warmed up (scripts/bench.py's warm-up does this)
    time.sleep(1.0)
    fresh_cache("parallel")
    from triton import knobs
    hits = []
    knobs.compilation.listener = lambda **kw: hits.append(bool(kw.get("cache_hit")))
    t0 = time.perf_counter()
    TC.precompile(items, target=target, pool=pool)
    futs = [TC._PENDING.get(TC._request_key(k.path, k.name, s, target)) for k, s in items]
    for k, s in items:
        TC.compile_kernel(k, s, target)
    res["worker_compile_s"] = [f.result().get("compile_s") for f in futs if f is not None and not f.cancelled()]
    res["parallel_s"] = round(time.perf_counter() - t0, 2)
    knobs.compilation.listener = None
    t0 = time.perf_counter()
    for k, s in items:                 # all in the cache now: what the main process's part costs
        TC.worker_mod.compile_spec(k.fn, s.types, s.descs, s.constexprs, dict(s.options), target)
    res["main_process_hits_only_s"] = round(time.perf_counter() - t0, 2)
    res["main_process_cache_hits"] = sum(hits)
    res["main_process_cache_misses"] = len(hits) - sum(hits)
    res["stats"] = dict(TC.STATS)
    pool.close()
    res["speedup"] = round(res["sequential_s"] / res["parallel_s"], 2)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
