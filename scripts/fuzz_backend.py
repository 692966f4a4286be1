"""Run the backend's differential fuzzer at scale and print a summary table.

    python scripts/fuzz_backend.py --programs 1000 --targets cpp,triton,frontend [--seed 100000]
        [--workers 2] [--timeout 120] [--reduce 10]

Each target runs in worker processes (this file with --worker) that read seeds on stdin and
answer one JSON line per program, so a segfault (the Triton interpreter) is a crash of that
program and a program that runs past --timeout is a hang; the worker is then restarted. Failing
programs (wrong, crash, hang) are delta-reduced (the first --reduce of each target) in a fresh
process. Results go to scripts/results/fuzz_<time>.json and .md (table, then reduced programs).
Generator, comparison rules and targets: tests/compiler/backend/fuzz/.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import selectors
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLUMNS = ["programs", "ok", "rounding", "stride", "upstream", "frontend", "wrong", "crash", "hang", "invalid",
           "eager_graph"]


def worker(target: str, max_lines: int):
    sys.path.insert(0, ROOT)
    from tests.compiler.backend.fuzz.generator import generate
    from tests.compiler.backend.fuzz.runner import run_program
    for line in sys.stdin:
        seed = int(line)
        t0 = time.time()
        try:
            res = run_program(generate(seed, max_lines=max_lines), target)
            out = {"seed": seed, "status": res.status, "detail": res.detail, "call": res.call,
                   "eager_graphs": res.eager_graphs[:3]}
        except Exception as e:      # a fuzzer bug, not the compiler's: reported as such
            out = {"seed": seed, "status": "invalid", "detail": f"fuzzer: {type(e).__name__}: {e}"[:300]}
        out["seconds"] = round(time.time() - t0, 2)
        print(json.dumps(out), flush=True)


def reduce_one(target: str, seed: int, max_lines: int):
    sys.path.insert(0, ROOT)
    from tests.compiler.backend.fuzz.generator import generate
    from tests.compiler.backend.fuzz.reducer import report
    print(report(generate(seed, max_lines=max_lines), target))


class Worker:
    def __init__(self, target, args):
        self.target = target
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", target, "--max-lines", str(args.max_lines)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, cwd=ROOT, bufsize=1)
        self.seed = None
        self.started = 0.0

    def submit(self, seed):
        self.seed, self.started = seed, time.time()
        self.proc.stdin.write(f"{seed}\n")
        self.proc.stdin.flush()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def run_target(target, seeds, args, results):
    pending = collections.deque(seeds)
    workers = []
    sel = selectors.DefaultSelector()

    def start():
        w = Worker(target, args)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        workers.append(w)
        if pending:
            w.submit(pending.popleft())

    def retire(w, record):
        sel.unregister(w.proc.stdout)
        w.kill()
        workers.remove(w)
        results.append(record)
        print(f"{target}: seed {record['seed']} {record['status']}: {record['detail'][:200]}",
              file=sys.stderr, flush=True)
        if pending:
            start()

    for _ in range(min(args.workers, len(pending))):
        start()
    while workers:
        for key, _ in sel.select(timeout=1.0):
            w = key.data
            line = w.proc.stdout.readline()
            if not line:       # the worker died: a segfault or abort in the compiled code
                retire(w, {"seed": w.seed, "status": "crash", "detail": f"worker died (exit {w.proc.poll()})"})
                continue
            rec = json.loads(line)
            results.append(rec)
            if rec["status"] in ("wrong", "crash", "hang"):   # named at once, not only in the summary
                print(f"{target}: seed {rec['seed']} {rec['status']}: {rec.get('detail', '')[:200]}",
                      file=sys.stderr, flush=True)
            if len(results) % 50 == 0:
                bad = sum(1 for r in results if r["status"] in ("wrong", "crash", "hang"))
                print(f"{target}: {len(results)} programs, {bad} wrong/crash/hang", file=sys.stderr, flush=True)
            if pending:
                w.submit(pending.popleft())
            else:
                sel.unregister(w.proc.stdout)
                w.proc.stdin.close()
                w.kill()
                workers.remove(w)
        for w in list(workers):
            if w.seed is not None and time.time() - w.started > args.timeout:
                retire(w, {"seed": w.seed, "status": "hang", "detail": f"over {args.timeout}s"})
    for r in results:
        r["target"] = target


def summarize(records, targets) -> list[dict]:
    rows = []
    for t in targets:
        rs = [r for r in records if r["target"] == t]
        c = collections.Counter(r["status"] for r in rs)
        row = {"target": t, "programs": len(rs), **{k: c.get(k, 0) for k in COLUMNS[1:-1]},
               "eager_graph": sum(1 for r in rs if r.get("eager_graphs"))}
        rows.append(row)
    return rows


def table(rows) -> str:
    head = "| target | " + " | ".join(COLUMNS) + " |"
    sep = "|---" * (len(COLUMNS) + 1) + "|"
    lines = [head, sep] + ["| " + r["target"] + " | " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--targets", default="cpp,triton,frontend")
    ap.add_argument("--seed", type=int, default=100000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--reduce", type=int, default=5, help="failing programs to reduce per target")
    ap.add_argument("--max-lines", type=int, default=25)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--reduce-one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.max_lines)
    if args.reduce_one:
        return reduce_one(args.reduce_one[0], int(args.reduce_one[1]), args.max_lines)
    targets = args.targets.split(",")
    seeds = list(range(args.seed, args.seed + args.programs))
    records = []
    t0 = time.time()
    for t in targets:
        mine = []
        run_target(t, seeds, args, mine)
        records += mine
    rows = summarize(records, targets)
    print(table(rows))
    reduced = []
    for t in targets:
        bad = [r for r in records if r["target"] == t and r["status"] in ("wrong", "crash", "hang")]
        for r in bad[:args.reduce]:
            try:
                out = subprocess.run([sys.executable, __file__, "--reduce-one", t, str(r["seed"]),
                                      "--max-lines", str(args.max_lines)], cwd=ROOT, capture_output=True,
                                     text=True, timeout=max(600.0, args.timeout * 5))
                reduced.append(out.stdout.strip() or f"# seed {r['seed']} {t}: reducer printed nothing")
            except subprocess.TimeoutExpired:
                reduced.append(f"# seed {r['seed']} {t}: {r['status']} ({r['detail']}); reduction timed out")
    stamp = time.strftime("%Y%m%d_%H%M%S")
    out_dir = os.path.join(ROOT, "scripts", "results")
    os.makedirs(out_dir, exist_ok=True)
    meta = {"programs": args.programs, "first_seed": args.seed, "targets": targets, "seconds": round(time.time() - t0)}
    with open(os.path.join(out_dir, f"fuzz_{stamp}.json"), "w") as f:
        json.dump({"meta": meta, "summary": rows, "records": records}, f, indent=1)
    with open(os.path.join(out_dir, f"fuzz_{stamp}.md"), "w") as f:
        f.write(f"# Backend fuzzer: {args.programs} programs per target, seeds {args.seed}.."
                f"{args.seed + args.programs - 1}, {meta['seconds']} s\n\n{table(rows)}\n\n")
        for r in records:
            if r["status"] in ("wrong", "crash", "hang"):
                f.write(f"- {r['target']} seed {r['seed']}: {r['status']}: {r.get('detail', '')}\n")
        f.write("\n## Reduced programs\n\n```python\n" + "\n\n".join(reduced) + "\n```\n")
    print(f"results: scripts/results/fuzz_{stamp}.json, .md")


if __name__ == "__main__":
    main()
