"""OpInfo sweep of our backend (issue 4): lowered, fell back, or wrong, per op of PyTorch's op_db.

For every op and each of its sample inputs (float32 by default): make an FX graph of the op call
with make_fx (every tensor in the sample becomes a graph input), hand it to the backend
(`compiler.backend(gm, example_inputs)`), run the compiled callable and compare with eager.

Per sample:
  lowered   result matches eager and no ATen fallback was logged while compiling
  fallback  result matches eager, but the backend logged an ATen fallback (the op's reason kept)
  wrong     result differs from eager (values, shape or dtype)   -- must never happen
  error     the backend raised (compiling or running)              -- must never happen either
  skipped   the sample says nothing about the backend: eager itself fails or is
            nondeterministic (random ops, uninitialized memory), or make_fx cannot trace it
Per op: the worst of its samples (wrong > error > fallback > lowered), `skipped` when all were.
The lowered fraction is lowered / (ops with at least one non-skipped sample).

    PYTHONPATH=. python scripts/opinfo_report.py                  # full sweep, compiler.backend
    PYTHONPATH=. python scripts/opinfo_report.py --only add,sum --samples 2
    PYTHONPATH=. python scripts/opinfo_report.py --backend eager  # check the harness itself
Writes scripts/results/opinfo_<dtype>.json and .md unless --out says otherwise.

The full sweep runs ops in a worker subprocess that is restarted if generated code crashes it
(the op that killed it is recorded as `error`), so one bad kernel cannot end the sweep.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import multiprocessing as mp
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Tolerances for float results: compiled code may reorder sums and use other math libraries.
TOL = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-7, 1e-7), torch.float16: (1e-2, 1e-2),
       torch.bfloat16: (2e-2, 2e-2)}
ORDER = ["wrong", "error", "fallback", "lowered", "skipped"]
# Ops whose output is uninitialized memory or random by definition: eager cannot be the reference.
NONDETERMINISTIC_NAMES = ("empty", "new_empty", "empty_like", "empty_strided", "empty_permuted",
                          "new_empty_strided", "bernoulli", "multinomial", "normal", "uniform",
                          "cauchy", "exponential", "geometric", "log_normal", "rand", "randn",
                          "randint", "randint_like", "rand_like", "randn_like", "dropout",
                          "nn.functional.dropout", "nn.functional.dropout2d",
                          "nn.functional.dropout3d", "nn.functional.alpha_dropout",
                          "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
                          "torch._C._nn._test_ambiguous_defaults")


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db
    return db


def op_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


# ------------------------------------------------------------------ fallback detection

class FallbackRecorder:
    """A logs sink that keeps every ATen-fallback event the backend emits while compiling.

    The backend logs a fallback as a `perf_hint` record (docs/CONTRACTS.md section 3) and/or a
    log event whose name mentions 'fallback'; either counts."""

    def __init__(self):
        self.reasons: list[str] = []

    def __call__(self, event):
        name = event.name or ""
        if name in ("perf_hint", "perf_hints") or "fallback" in name:
            f = dict(event.fields or {})
            if isinstance(event.payload, dict):      # perf_hint records carry {op, node, reason}
                f = {**event.payload, **f}
            what = f.get("op") or f.get("target") or f.get("kernel") or ""
            why = f.get("reason") or (event.payload if isinstance(event.payload, str) else None) or name
            self.reasons.append(f"{what}: {why}" if what else str(why))

    def __enter__(self):
        from tracetorch import logs
        logs.add_sink(self, level=logging.DEBUG, artifacts={"perf_hint", "perf_hints"})
        return self

    def __exit__(self, *exc):
        from tracetorch import logs
        logs.remove_sink(self)
        return False


# ------------------------------------------------------------------ one sample

@dataclasses.dataclass
class Outcome:
    status: str
    detail: str = ""
    fallbacks: list = dataclasses.field(default_factory=list)


def _clone_tree(tree):
    return torch.utils._pytree.tree_map(
        lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


def _compare(out, ref, dtype):
    outs, _ = torch.utils._pytree.tree_flatten(out)
    refs, _ = torch.utils._pytree.tree_flatten(ref)
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, eager has {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        if isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return f"output {k}: {type(o).__name__}, eager gives a tensor"
            if o.shape != r.shape or o.dtype != r.dtype:
                return f"output {k}: {o.dtype}{list(o.shape)} vs eager {r.dtype}{list(r.shape)}"
            rtol, atol = TOL.get(r.dtype, (0, 0))
            try:
                torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True,
                                           check_stride=False)
            except AssertionError as e:
                return f"output {k}: " + " ".join(str(e).split())[:300]
        elif o != r and not (isinstance(o, float) and isinstance(r, float) and o != o and r != r):
            return f"output {k}: {o!r} vs eager {r!r}"
    return None


def _draws_random_numbers(gm) -> bool:
    """Does the traced graph call a seeded random op (bernoulli, rand, randn, dropout, ...)?"""
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) \
                and torch.Tag.nondeterministic_seeded in n.target.tags:
            return True
    return False


def run_sample(backend, op, sample, dtype) -> Outcome:
    from torch.fx.experimental.proxy_tensor import make_fx
    leaves, spec = torch.utils._pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    tpos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    tensors = [leaves[i] for i in tpos]

    def call(*ts):
        vals = list(leaves)
        for i, t in zip(tpos, ts):
            vals[i] = t
        inp, args, kwargs = torch.utils._pytree.tree_unflatten(vals, spec)
        return op.op(inp, *args, **kwargs)

    # Eager, twice: a reference that changes between runs tells nothing about the backend.
    try:
        ref = call(*_clone_tree(tensors))
        ref2 = call(*_clone_tree(tensors))
    except Exception as e:
        return Outcome("skipped", f"eager fails: {type(e).__name__}")
    if _compare(ref2, ref, dtype) is not None:
        return Outcome("skipped", "eager is nondeterministic")
    try:
        gm = make_fx(call)(*_clone_tree(tensors))
    except Exception as e:
        return Outcome("skipped", f"make_fx fails: {type(e).__name__}: {str(e)[:100]}")
    if _draws_random_numbers(gm):
        # e.g. OpInfo wraps sdpa/MHA with dropout in wrapper_set_seed: eager reseeds on every
        # call (so it looks deterministic), the traced graph cannot, and a compiled RNG stream
        # is not eager's anyway. Equal values are not the right check for such an op.
        return Outcome("skipped", "draws random numbers (the compiled RNG stream differs from eager's)")
    rec = FallbackRecorder()
    try:
        with rec:
            compiled = backend(gm, _clone_tree(tensors))
            out = compiled(*_clone_tree(tensors))
    except Exception as e:
        return Outcome("error", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}",
                       rec.reasons)
    bad = _compare(out, ref, dtype)
    if bad:
        return Outcome("wrong", bad, rec.reasons)
    if rec.reasons:
        return Outcome("fallback", rec.reasons[0], rec.reasons)
    return Outcome("lowered")


def run_op(backend, op, dtype=torch.float32, device="cpu", max_samples=None) -> dict:
    """The op's record: status (worst over its samples), sample counts, first detail."""
    t0 = time.perf_counter()
    if dtype not in op.supported_dtypes(device):
        return {"op": op_name(op), "status": "skipped", "detail": f"{dtype} not supported",
                "counts": {}, "seconds": 0.0}
    try:
        samples = list(op.sample_inputs(device, dtype, requires_grad=False))
    except Exception as e:
        return {"op": op_name(op), "status": "skipped",
                "detail": f"no samples: {type(e).__name__}", "counts": {}, "seconds": 0.0}
    if max_samples:
        samples = samples[:max_samples]
    counts, details, fallbacks = {}, {}, set()
    if op.name in NONDETERMINISTIC_NAMES or op_name(op) in NONDETERMINISTIC_NAMES:
        outcomes = [Outcome("skipped", "random or uninitialized output")]
    else:
        outcomes = []
        for s in samples:
            torch.manual_seed(0)
            outcomes.append(run_sample(backend, op, s, dtype))
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
        details.setdefault(o.status, o.detail)
        fallbacks.update(o.fallbacks)
    status = next((s for s in ORDER if s in counts), "skipped")
    # A backend exception is caught by the backend and the graph run eagerly (never wrong), so it
    # counts as a fallback; it is flagged because it is a compiler bug, not a missing lowering.
    backend_error = any("after a backend error" in str(f) for f in fallbacks)
    return {"op": op_name(op), "status": status, "detail": details.get(status, ""),
            "counts": counts, "fallbacks": sorted(fallbacks)[:10], "backend_error": backend_error,
            "seconds": round(time.perf_counter() - t0, 3)}


def summarize(records) -> dict:
    by = {s: [r["op"] for r in records if r["status"] == s] for s in ORDER}
    considered = len(records) - len(by["skipped"])
    return {"ops": len(records), "considered": considered,
            **{s: len(v) for s, v in by.items()},
            "lowered_fraction": (len(by["lowered"]) / considered) if considered else 0.0,
            "wrong_ops": by["wrong"], "error_ops": by["error"],
            "backend_error_ops": [r["op"] for r in records if r.get("backend_error")]}


# ------------------------------------------------------------------ backends and the worker

def get_backend(name: str):
    if name == "eager":
        return lambda gm, example_inputs: gm
    if name == "ours":
        from tracetorch.compiler import backend
        return backend
    raise ValueError(f"unknown backend {name!r} (ours | eager)")


def _worker(conn, backend_name, dtype_name, max_samples, cpu_codegen):
    torch.set_num_threads(1)
    if cpu_codegen == "triton":
        os.environ.setdefault("TRITON_INTERPRET", "1")   # before anything imports triton
    if cpu_codegen:
        from tracetorch.compiler import config
        config.backend.cpu_codegen = cpu_codegen
    backend = get_backend(backend_name)
    by = {op_name(op): op for op in op_db()}
    conn.send("ready")
    while True:
        name = conn.recv()
        if name is None:
            return
        conn.send(run_op(backend, by[name], getattr(torch, dtype_name), "cpu", max_samples))


def sweep_subprocess(names, backend_name, dtype_name, max_samples, cpu_codegen, timeout, log):
    """Run ops one at a time in a worker; restart it when it dies or hangs."""
    ctx = mp.get_context("spawn")
    records, i, proc = [], 0, None
    while i < len(names):
        if proc is None:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, backend_name, dtype_name, max_samples,
                                                     cpu_codegen), daemon=True)
            proc.start()
            if not parent.poll(300) or parent.recv() != "ready":
                raise RuntimeError("opinfo worker did not start")
        parent.send(names[i])
        if parent.poll(timeout):
            try:
                rec = parent.recv()
            except EOFError:
                rec = None
        else:
            rec = {"op": names[i], "status": "error", "detail": f"timed out after {timeout}s",
                   "counts": {"error": 1}}
            proc.kill()
            proc = None
        if rec is None:
            rec = {"op": names[i], "status": "error",
                   "detail": f"worker crashed (exit code {proc.exitcode if proc else '?'})",
                   "counts": {"error": 1}}
            proc = None
        records.append(rec)
        log(rec)
        i += 1
    if proc is not None:
        parent.send(None)
        proc.join(5)
    return records


def markdown(records, summary, meta) -> str:
    lines = [f"# OpInfo sweep: {meta['backend']} backend, {meta['dtype']}, "
             f"{meta['max_samples'] or 'all'} samples per op", "",
             f"lowered {summary['lowered']} / {summary['considered']} ops with samples "
             f"(**{100 * summary['lowered_fraction']:.1f}%**); fell back {summary['fallback']}; "
             f"wrong {summary['wrong']}; error {summary['error']}; skipped {summary['skipped']} "
             f"(of {summary['ops']} op_db entries); fallbacks caused by a caught backend exception: "
             f"{len(summary['backend_error_ops'])}", "",
             "| op | status | samples | detail |", "|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (ORDER.index(r["status"]), r["op"])):
        counts = " ".join(f"{k}:{v}" for k, v in sorted(r.get("counts", {}).items()))
        detail = str(r.get("detail", "")).replace("|", "\\|")[:160]
        lines.append(f"| {r['op']} | {r['status']} | {counts} | {detail} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="ours", choices=["ours", "eager"])
    p.add_argument("--dtype", default="float32")
    p.add_argument("--only", default="", help="comma list of op names (op_db name[.variant])")
    p.add_argument("--samples", type=int, default=0, help="first N samples per op (0: all)")
    p.add_argument("--cpu-codegen", default=None, choices=["cpp", "triton"])
    p.add_argument("--timeout", type=int, default=300, help="seconds per op before it counts as hung")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or [op_name(op) for op in op_db()]
    t0 = time.time()

    def log(rec):
        print(f"{rec['op']:<45} {rec['status']:<9} {str(rec.get('detail', ''))[:90]}", flush=True)

    records = sweep_subprocess(names, args.backend, args.dtype, args.samples or None,
                               args.cpu_codegen, args.timeout, log)
    summary = summarize(records)
    meta = {"backend": args.backend, "dtype": args.dtype, "max_samples": args.samples or None,
            "cpu_codegen": args.cpu_codegen, "torch": torch.__version__,
            "seconds": round(time.time() - t0, 1),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    os.makedirs(args.out, exist_ok=True)
    suffix = f"_{args.cpu_codegen}" if args.cpu_codegen else ""
    stem = os.path.join(args.out, f"opinfo_{args.backend}{suffix}_{args.dtype}")
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "summary": summary, "ops": records}, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(markdown(records, summary, meta))
    print(markdown([], summary, meta).splitlines()[2])
    print(f"wrote {stem}.json and {stem}.md")
    return 1 if summary["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
