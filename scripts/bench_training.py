"""Training-step benchmark (issue 5): forward + backward + optimizer step, in ONE process.

Variants (each on a fresh copy of the model and a fresh optimizer, same data):
  eager      model(x); loss.backward(); opt.step()                   (foreach optimizer on CUDA)
  ours       compiler.compile(model) + compiler.compile(opt.step)    (our frontend, aot training
             path, partitioner, backend; compiled optimizer step)
  inductor   torch.compile(model) + torch.compile(opt.step)          (PyTorch's, for comparison)

Reported per model: median step time, speedup over eager, peak memory of the timed steps
(torch.cuda.max_memory_allocated; CPU: not measured), first-step (compile) time, and the
largest relative difference of the loss curve against eager (a correctness check: the models
have no dropout so every variant must follow eager's curve). Summary: geomean speedups and the
issue's goals (ours >= 0.9x inductor's geomean speedup; ours' peak memory <= eager's).

    PYTHONPATH=. python scripts/bench_training.py --device cuda --json train.json
    PYTHONPATH=. python scripts/bench_training.py --device cuda --suite --json train_suite.json
    PYTHONPATH=. python scripts/bench_training.py --device cpu --quick
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scripts import harness  # noqa: E402

VARIANTS = ["eager", "ours", "inductor"]


# ---------------------------------------------------------------- models
class MLP(nn.Module):
    def __init__(self, d=1024, depth=4, classes=10):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d)]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.body(x))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=512, d=256, heads=4, layers=2, seq=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        return self.head(self.ln(self.blocks(x))).flatten(0, 1)


class CNN(nn.Module):
    def __init__(self, c=32, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                                   nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c))
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        x = self.stem(x)
        x = F.relu(x + self.block(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def make_models(device, quick):
    """name -> (model factory, batch factory(generator) -> (input, target), optimizer factory)"""
    s = 4 if quick else 1
    seq = 64 if quick else 128
    vocab = 512

    def gpt_batch(g):
        idx = torch.randint(0, vocab, (16 // min(s, 4) if not quick else 4, seq), generator=g)
        return idx.to(device), torch.randint(0, vocab, (idx.numel(),), generator=g).to(device)

    return {
        "mlp_adamw": (lambda: MLP(d=1024 // s, depth=4),
                      lambda g: (torch.randn(256 // s, 1024 // s, generator=g).to(device),
                                 torch.randint(0, 10, (256 // s,), generator=g).to(device)),
                      lambda p: torch.optim.AdamW(p, lr=1e-3)),
        "gpt_adam": (lambda: GPT(vocab=vocab, d=256 // (2 if quick else 1), heads=4, layers=2, seq=seq),
                     gpt_batch,
                     lambda p: torch.optim.Adam(p, lr=1e-3)),
        "cnn_sgd": (lambda: CNN(c=32 // (2 if quick else 1)),
                    lambda g: (torch.randn(32 // s, 3, 32, 32, generator=g).to(device),
                               torch.randint(0, 10, (32 // s,), generator=g).to(device)),
                    lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)),
    }


def suite_models(device, quick, names=None):
    """The model suite's trainable models (scripts/models), trained with AdamW on a generic loss
    (mean square of every float output). Models with dropout draw different masks under
    inductor (its own RNG), so their loss curves differ there by design."""
    from scripts.models import SUITE
    scale = "cpu" if quick or device.type == "cpu" else "gpu"
    out = {}
    for name, spec in SUITE.items():
        if not spec.trainable or (names and name not in names):
            continue

        def factory(spec=spec):
            return spec.build().train()

        def batch(g, spec=spec):
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (), generator=g)))
            return spec.inputs(str(device), torch.float32, scale), None

        out["suite_" + name] = (factory, batch, lambda p: torch.optim.AdamW(p, lr=1e-4))
    return out


def generic_loss(out, target):
    if target is not None:
        return F.cross_entropy(out.float(), target)
    leaves = [o for o in torch.utils._pytree.tree_leaves(out)
              if isinstance(o, torch.Tensor) and o.is_floating_point()]
    return sum((o.float() ** 2).mean() for o in leaves)


# ---------------------------------------------------------------- variants
def make_variant(variant, model, opt):
    if variant == "eager":
        return model, opt.step
    if variant == "ours":
        from tracetorch import compiler
        return compiler.compile(model), compiler.compile(opt.step)
    if variant == "inductor":
        return torch.compile(model), torch.compile(opt.step)
    raise ValueError(variant)


from scripts.harness import geomean, sync  # noqa: E402


def setup_variant(variant, factory, batch, make_opt, device, dtype, foreach=None):
    """(model, optimizer, forward, compiled step, data): one variant on a fresh model copy.
    foreach=True: the optimizer's foreach implementation also on CPU (CUDA's default), so that
    a CPU memory report sees the step eager runs on a GPU."""
    torch.manual_seed(0)
    model = factory().to(device=device, dtype=dtype)
    opt = make_opt(model.parameters())
    if foreach is not None:
        for group in opt.param_groups:
            group["foreach"] = foreach
    fwd, step = make_variant(variant, model, opt)
    g = torch.Generator().manual_seed(0)
    data = [batch(g) for _ in range(4)]

    def cast(x):
        return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    data = [(tuple(cast(a) for a in x) if isinstance(x, tuple) else (cast(x),), y) for x, y in data]
    return model, opt, fwd, step, data


def run_variant(variant, factory, batch, make_opt, device, steps, warmup, dtype):
    """First step (compile) time, loss curve, peak memory and a median over `steps` timed steps.
    Returns (result, timed_step): timed_step(i) times one more step, for the interleaved rounds.
    Peak memory counts only what this variant allocates (other variants' models stay alive for
    the interleaved timing)."""
    base = torch.cuda.memory_allocated() if device.type == "cuda" else 0
    model, opt, fwd, step, data = setup_variant(variant, factory, batch, make_opt, device, dtype)

    def train_step(i):
        x, y = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = generic_loss(fwd(*x), y)
        loss.backward()
        step()
        return loss

    def timed_step(i):
        sync(device)
        t0 = time.perf_counter()
        loss = train_step(i)
        sync(device)
        return time.perf_counter() - t0, loss

    losses, times = [], []
    t0 = time.perf_counter()
    losses.append(train_step(0).item())
    sync(device)
    first = time.perf_counter() - t0
    for i in range(1, warmup):
        losses.append(train_step(i).item())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for i in range(warmup, warmup + steps):
        dt, loss = timed_step(i)
        times.append(dt)
        losses.append(loss.item())
    peak = torch.cuda.max_memory_allocated() - base if device.type == "cuda" else None
    return {"median_ms": 1e3 * statistics.median(times), "first_step_s": first,
            "peak_mb": None if peak is None else peak / 2**20, "losses": losses}, timed_step


def interleaved_medians(timers: dict, rounds: int, steps: int) -> dict:
    """Median step time per variant over `rounds` rounds in which every variant runs `steps`
    steps in turn: the host-bound steps of small models drift with the machine's state over
    a run, and interleaving exposes every variant to the same drift."""
    times = {v: [] for v in timers}
    for r in range(rounds):
        for v, timed_step in timers.items():
            for i in range(steps):
                times[v].append(timed_step(1000 + r * steps + i)[0])
    return {v: 1e3 * statistics.median(t) for v, t in times.items()}


# ---------------------------------------------------------------- memory report (any device)
def live_storage_bytes(exclude=()) -> int:
    """Bytes of the distinct storages of every tensor the garbage collector can reach (what
    Python holds: parameters, optimizer state, data, caches). Storages listed in `exclude`
    (data_ptrs) are left out."""
    import gc
    import warnings
    seen, total = set(exclude), 0
    with warnings.catch_warnings():       # isinstance() on some lazy module attributes warns
        warnings.simplefilter("ignore")
        objects = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
    for obj in objects:
        if not obj.is_meta and obj.layout == torch.strided:
            try:
                st = obj.untyped_storage()
            except Exception:        # fake/functional wrappers have no real storage
                continue
            if st.device.type == "meta" or st.data_ptr() in seen:
                continue
            seen.add(st.data_ptr())
            total += st.nbytes()
    return total


class SavedBytes:
    """saved_tensors_hooks that record what autograd saves for backward (eager's nodes and our
    autograd.Function's ctx alike): distinct storages, parameters and buffers left out (they
    are alive anyway). The hooks return the tensor itself, so memory behaves as without them."""

    def __init__(self, module_storages: set):
        self.module_storages = module_storages
        self.storages: dict = {}

    def pack(self, t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in self.module_storages and ptr != 0:
            self.storages[ptr] = max(self.storages.get(ptr, 0), st.nbytes())
        return t

    @staticmethod
    def unpack(t):
        return t

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())


def _allocation_timeline(prof):
    """(time ns, +-bytes) of every allocation and free the profiler saw, in time order, and the
    [start, end] of each record_function phase."""
    events = prof.profiler.kineto_results.events()
    mem = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    phases = {e.name()[len("phase:"):]: (e.start_ns(), e.end_ns()) for e in events
              if e.name().startswith("phase:")}
    return mem, phases


def memory_step(variant, factory, batch, make_opt, device, dtype, warmup):
    """One training step after `warmup` steps, under the profiler's allocation tracking:
    bytes saved for backward, and live bytes (Python-reachable storages at the step's start,
    plus the allocations/frees the profiler records) at their peak per phase.

    The profiler does not see the free of a block allocated before it started (e.g. optimizer
    state that a step replaces), so it runs over two steps and only the second is measured:
    everything that step frees was allocated under the profiler, or by then is live memory
    that the census at the step's start counted."""
    import gc
    from torch.profiler import ProfilerActivity, profile, record_function
    model, opt, fwd, step, data = setup_variant(variant, factory, batch, make_opt, device, dtype,
                                                foreach=True)

    def phase(name, measured):
        return record_function("phase:" + name) if measured else contextlib.nullcontext()

    def train_step(i, saved=None, measured=False):
        x, y = data[i % len(data)]
        with phase("forward", measured):
            if saved is None:
                loss = generic_loss(fwd(*x), y)
            else:
                with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
                    loss = generic_loss(fwd(*x), y)
        with phase("backward", measured):
            loss.backward()
        with phase("optimizer", measured):
            step()
        return loss.item()

    for i in range(warmup):
        opt.zero_grad(set_to_none=True)
        train_step(i)
    module_storages = {t.untyped_storage().data_ptr()
                       for t in list(model.parameters()) + list(model.buffers())}
    saved = SavedBytes(module_storages)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, profile_memory=True) as prof:
        opt.zero_grad(set_to_none=True)
        train_step(warmup)
        opt.zero_grad(set_to_none=True)
        gc.collect()            # garbage cycles of earlier steps must not count as live
        base = live_storage_bytes()
        with record_function("phase:step"):
            train_step(warmup + 1, saved, measured=True)
    mem, phases = _allocation_timeline(prof)
    start = phases.pop("step")[0]
    out = {"saved_bytes": saved.nbytes, "base_bytes": base}
    live, peak = base, {name: base for name in phases}
    after_forward = None
    for t, nbytes in mem:
        if t < start:
            continue
        if after_forward is None and t > phases["forward"][1]:
            after_forward = live
        live += nbytes
        for name, (a, b) in phases.items():
            if a <= t <= b:
                peak[name] = max(peak[name], live)
    out["after_forward_bytes"] = after_forward if after_forward is not None else live
    out.update({f"peak_{k}_bytes": v for k, v in peak.items()})
    out["peak_bytes"] = max(peak.values(), default=base)
    return out


def memory_report(models, variants, device, dtype, warmup) -> dict:
    results = {}
    for name, (factory, batch, make_opt) in models.items():
        results[name] = {}
        for variant in variants:
            reset_all()
            try:
                r = memory_step(variant, factory, batch, make_opt, device, dtype, warmup)
            except Exception as exc:
                r = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            results[name][variant] = r
    mib = lambda b: f"{b / 2**20:9.2f}"  # noqa: E731
    cols = ["saved", "base", "after_forward", "peak_forward", "peak_backward", "peak_optimizer",
            "peak"]
    sys.stdout.write(f"\nmemory of one training step (MiB), device={device}, dtype={dtype}\n"
                     "  saved: bytes autograd saves for backward (params/buffers excluded); base: "
                     "live at step start;\n  after_forward: live between forward and backward; "
                     "peak_*: highest live bytes in each phase;\n  optimizers use their foreach "
                     "implementation (CUDA's default) on every device\n")
    sys.stdout.write(f"{'model':18s}{'variant':9s}" + "".join(f"{c:>15s}" for c in cols) + "\n")
    for name, row in results.items():
        for variant, r in row.items():
            if "error" in r:
                sys.stdout.write(f"{name:18s}{variant:9s}  {r['error']}\n")
                continue
            sys.stdout.write(f"{name:18s}{variant:9s}" + "".join(
                f"{mib(r.get(c + '_bytes', 0)):>15s}" for c in cols) + "\n")
        if "eager" in row and "ours" in row and "error" not in row["eager"] and "error" not in row["ours"]:
            e, o = row["eager"], row["ours"]
            sys.stdout.write(f"{'':18s}{'ours/eager':9s}" + "".join(
                f"{(o.get(c + '_bytes', 0) / e[c + '_bytes'] if e.get(c + '_bytes') else float('nan')):15.2f}"
                for c in cols) + "\n")
    return results


def reset_all():
    from tracetorch import compiler
    compiler.reset()
    torch._dynamo.reset()


# ---------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_device_dtype_args(ap, dtypes=("float32", "bfloat16"))
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 30, quick 5)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps incl. compile (default 5, quick 2)")
    ap.add_argument("--only", default="", help="comma list of model names")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--quick", action="store_true", help="small sizes, few steps (CPU smoke run)")
    ap.add_argument("--suite", nargs="?", const="all", default="",
                    help="also the model suite's trainable models (scripts/models): 'all' or a comma list")
    ap.add_argument("--rounds", type=int, default=5,
                    help="after each variant's own run, time all variants again in this many "
                         "interleaved rounds and report those medians (0: sequential medians only)")
    ap.add_argument("--json", default="")
    ap.add_argument("--memory-report", action="store_true",
                    help="instead of timing: bytes saved for backward and peak live bytes of one "
                         "step per phase, eager vs ours (profiler allocation tracking; any device)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    steps = args.steps or (5 if args.quick else 30)
    warmup = args.warmup or (2 if args.quick else 5)
    variants = [v for v in args.variants.split(",") if v]
    models = make_models(device, args.quick)
    if args.only:
        models = {k: v for k, v in models.items() if k in args.only.split(",")}
    if args.suite:
        models.update(suite_models(device, args.quick,
                                   None if args.suite == "all" else args.suite.split(",")))
    if args.memory_report:
        results = memory_report(models, [v for v in variants if v != "inductor"] or ["eager", "ours"],
                                device, dtype, warmup)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": str(device), "dtype": args.dtype, "memory": results}, f, indent=1)
        return results
    results = {}
    for name, (factory, batch, make_opt) in models.items():
        results[name] = {}
        timers = {}
        # one throwaway eager step first: cuBLAS/cuDNN workspaces and other lazily created
        # library state then exist before any variant's peak memory is measured, instead of
        # counting against whichever variant runs first
        run_variant("eager", factory, batch, make_opt, device, 1, 1, dtype)
        for variant in variants:
            reset_all()
            try:
                r, timers[variant] = run_variant(variant, factory, batch, make_opt, device, steps, warmup, dtype)
            except Exception as exc:    # one broken variant must not hide the others' numbers
                r = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            results[name][variant] = r
            print(f"  {name:16s} {variant:9s} " + (r["error"] if "error" in r else
                  f"{r['median_ms']:9.3f} ms  first step {r['first_step_s']:7.2f} s"), flush=True)
        if args.rounds and len(timers) > 1:
            for variant, ms in interleaved_medians(timers, args.rounds, max(1, steps // args.rounds)).items():
                r = results[name][variant]
                r["sequential_median_ms"], r["median_ms"] = r["median_ms"], ms
            print(f"  {name:16s} interleaved ({args.rounds} rounds): " + ", ".join(
                f"{v} {results[name][v]['median_ms']:.3f} ms" for v in timers), flush=True)
        del timers
        eager = results[name].get("eager", {})
        for variant, r in results[name].items():
            if "error" in r or "error" in eager or not eager:
                continue
            r["speedup"] = eager["median_ms"] / r["median_ms"]
            n = min(len(r["losses"]), len(eager["losses"]))
            tol_scale = [max(abs(e), 1e-6) for e in eager["losses"][:n]]
            r["loss_max_rel_diff"] = max(abs(a - b) / s for a, b, s in
                                         zip(r["losses"][:n], eager["losses"][:n], tol_scale))
    print_table(results, variants, device)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(device), "dtype": args.dtype, "steps": steps,
                       "torch": torch.__version__, "results": results}, f, indent=1)
    return results


def print_table(results, variants, device):
    print(f"\ntraining step (forward+backward+optimizer), device={device}")
    head = f"{'model':18s}" + "".join(f"{v + ' ms':>14s}{'x':>7s}{'peakMB':>9s}{'loss Δ':>9s}" for v in variants)
    print(head)
    for name, row in results.items():
        line = f"{name:18s}"
        for v in variants:
            r = row.get(v, {})
            if "error" in r or not r:
                line += f"{'error':>14s}{'':>7s}{'':>9s}{'':>9s}"
                continue
            peak = "n/a" if r["peak_mb"] is None else f"{r['peak_mb']:.0f}"
            line += (f"{r['median_ms']:14.3f}{r.get('speedup', float('nan')):7.2f}{peak:>9s}"
                     f"{r.get('loss_max_rel_diff', float('nan')):9.1e}")
        print(line)
    summary = {v: geomean([row[v].get("speedup") for row in results.values()
                           if v in row and "error" not in row[v]]) for v in variants}
    print("geomean speedup over eager: " + ", ".join(f"{v} {s:.2f}x" for v, s in summary.items()))
    if "ours" in summary and "inductor" in summary:
        print(f"ours / inductor geomean speedup: {summary['ours'] / summary['inductor']:.2f} (goal >= 0.9)")
        # the same ratio from each variant's own (sequential) timed steps, for comparison
        seq = {}
        for v in ("ours", "inductor"):
            ratios = [row["eager"]["sequential_median_ms"] / row[v]["sequential_median_ms"]
                      for row in results.values() if "error" not in row.get(v, {"error": 1})
                      and "sequential_median_ms" in row.get(v, {}) and "sequential_median_ms" in row.get("eager", {})]
            seq[v] = geomean(ratios) if ratios else None
        if seq["ours"] and seq["inductor"]:
            print(f"(sequential medians instead of interleaved: ours {seq['ours']:.2f}x, inductor "
                  f"{seq['inductor']:.2f}x, ratio {seq['ours'] / seq['inductor']:.2f})")
    if device.type == "cuda" and "ours" in variants:
        worse = [n for n, row in results.items() if "error" not in row.get("ours", {"error": 1})
                 and "error" not in row.get("eager", {"error": 1})
                 and row["ours"]["peak_mb"] > row["eager"]["peak_mb"]]
        print("peak memory above eager's: " + (", ".join(worse) if worse else "none"))


if __name__ == "__main__":
    main()
