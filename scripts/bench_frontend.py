"""Frontend benchmark: tracetorch's frontend side by side with TorchDynamo, backend="eager" for both.

  1. per-call overhead on a tiny function (median over many calls, minus eager's median)
  2. capture time of a transformer-block forward (first call, compile + run, fresh caches)
  3. graph breaks on the frontend corpus (ours on the first call vs Dynamo's recorded counts,
     tests/compiler/frontend/corpus/dynamo_counts.json from scripts/check_corpus_vs_dynamo.py).
     A program's break count is its number of distinct graph-break SITES (user file:line) in
     the first call, for both: ours from our `graph_break` events, Dynamo's from its own
     TORCH_LOGS=graph_breaks records (which include breaks in frames it then skips whole, where
     explain()/counters say 0). Dynamo's old explain()/counter number is an extra column.

    PYTHONPATH=. python scripts/bench_frontend.py [--calls 20000] [--repeats 5] [--no-corpus]

Prints a markdown table. Calls torch.compile on purpose (comparison only).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time

import torch
import torch._dynamo

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tracetorch import compiler  # noqa: E402
from tracetorch import logs  # noqa: E402


def tiny(x, y):
    return x + y


def per_call_us(fn, args, calls: int) -> float:
    for _ in range(50):
        fn(*args)
    times = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        fn(*args)
        times.append(clock() - t0)
    return statistics.median(times) / 1000


class Block(torch.nn.Module):
    """A GPT-style transformer block (pre-norm attention + MLP)."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.ones(t, t).tril().view(1, 1, t, t)
        att = att.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def capture_seconds(repeats: int) -> dict:
    """Median seconds of the first call (compile + run) minus a warm eager run, for ours and
    Dynamo, alternating the two on every repeat so machine load hits both alike."""
    block = Block().eval()
    x = torch.randn(2, 16, 64)
    for _ in range(3):
        block(x)                                  # warm up eager first
    runs = []
    for _ in range(10):
        t0 = time.perf_counter()
        block(x)
        runs.append(time.perf_counter() - t0)
    eager = statistics.median(runs)               # subtracted: the first call also runs it
    times = {"ours": [], "dynamo": []}
    graphs = {}
    for _ in range(repeats):
        for which in ("ours", "dynamo"):
            count = [0]

            def backend(gm, example_inputs):
                count[0] += 1
                return gm.forward

            if which == "dynamo":
                torch._dynamo.reset()
                f = torch.compile(block, backend=backend)
            else:
                compiler.reset()
                f = compiler.compile(block, backend=backend)
            t0 = time.perf_counter()
            out = f(x)
            times[which].append(time.perf_counter() - t0 - eager)
            torch.testing.assert_close(out, block(x))
            graphs[which] = count[0]
    return {k: (statistics.median(v), graphs[k]) for k, v in times.items()}


def corpus_breaks() -> dict:
    from tests.compiler.frontend.corpus import all_programs, make_args
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "compiler", "frontend", "corpus",
                        "dynamo_counts.json")
    dynamo = json.load(open(path))
    from tests.compiler.frontend.corpus import break_sites
    ours_total = dyn_total = dyn_explain = more = fewer = errors = n = 0
    worse = []
    for prog in all_programs():
        if prog.name not in dynamo:
            continue
        compiler.reset()
        events = []
        sink = logs.add_sink(events.append, artifacts={"graph_break"})
        try:
            torch.manual_seed(0)
            args, kwargs = make_args(prog.calls[0])
            if prog.before_call:
                prog.before_call(prog.fn, 0)
            with contextlib.redirect_stdout(io.StringIO()):
                compiler.compile(prog.fn, backend="eager")(*args, **kwargs)
        except Exception:
            errors += 1
            continue
        finally:
            logs.remove_sink(sink)
        ours = break_sites(events)
        theirs = dynamo[prog.name]["breaks"]
        n += 1
        ours_total += ours
        dyn_total += theirs
        dyn_explain += dynamo[prog.name].get("explain_breaks", theirs)
        if ours > theirs:
            more += 1
            worse.append(f"{prog.name} ({ours} vs {theirs})")
        elif ours < theirs:
            fewer += 1
    return {"programs": n, "ours": ours_total, "dynamo": dyn_total, "dynamo_explain": dyn_explain,
            "more": more, "fewer": fewer,
            "errors": errors, "worse": worse}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-corpus", action="store_true")
    a = ap.parse_args()

    x, y = torch.randn(8), torch.randn(8)
    eager = per_call_us(tiny, (x, y), a.calls)
    dyn = per_call_us(torch.compile(tiny, backend="eager"), (x, y), a.calls)
    ours = per_call_us(compiler.compile(tiny, backend="eager"), (x, y), a.calls)
    rows = [("per-call time, tiny `x + y` (median µs)", f"{ours:.2f}", f"{dyn:.2f}", f"eager {eager:.2f}"),
            ("per-call overhead over eager (µs)", f"{ours - eager:.2f}", f"{dyn - eager:.2f}",
             "goal: ours <= Dynamo")]
    cap = capture_seconds(a.repeats)
    (ours_c, ours_g), (dyn_c, dyn_g) = cap["ours"], cap["dynamo"]
    rows.append(("capture time, transformer block forward (ms)", f"{ours_c * 1e3:.1f}",
                 f"{dyn_c * 1e3:.1f}", f"ratio {ours_c / dyn_c:.2f} (goal <= 0.5); graphs {ours_g} vs {dyn_g}"))
    extra = None
    if not a.no_corpus:
        c = corpus_breaks()
        rows.append((f"graph-break sites on the corpus ({c['programs']} programs, first call)",
                     str(c["ours"]), str(c["dynamo"]),
                     f"programs with more breaks than Dynamo: {c['more']}, fewer: {c['fewer']}, "
                     f"ours raised: {c['errors']}; Dynamo's explain()/counter total: {c['dynamo_explain']}"))
        extra = c["worse"]
    print(f"\ntorch {torch.__version__}, Python {sys.version.split()[0]}, backend=\"eager\" for both\n")
    print("| measure | tracetorch | Dynamo | notes |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if not a.no_corpus:
        print("\nGraph breaks are counted as distinct break sites (user file:line) during the first call: "
              "ours from our graph_break events, Dynamo's from its TORCH_LOGS=graph_breaks records "
              "(scripts/check_corpus_vs_dynamo.py), which include breaks in frames Dynamo then skips "
              "whole, where its explain()/counters report 0.")
    if extra:
        print("\nPrograms with more breaks than Dynamo: " + ", ".join(extra))


if __name__ == "__main__":
    main()
