"""Compile every model of the suite end to end and keep score.

    python scripts/run_suite.py                       # CPU, float32, every model, inference
    python scripts/run_suite.py --device cuda --dtype bfloat16 --out scripts/results/suite_gpu_bf16
    python scripts/run_suite.py --only gpt2,resnet18 --train

Each model runs in its own subprocess (a crash or hang costs one row, not the run) under
TRACE_COMPILE_DEBUG=1; its debug folder is kept only when the row failed. Per model we record:
accuracy against a float64 eager reference (the compiled error may be at most a small multiple of
eager's own error, as PyTorch's benchmark harness judges it), graphs, graph breaks, recompiles and
ATen fallbacks (from the compiler's own events), cold compile time, and median times of eager, ours
and torch.compile/inductor measured side by side in the same process. Writes <out>.json and <out>.md.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import harness  # scripts/ is on sys.path (python scripts/run_suite.py); torch-free

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    harness.add_device_dtype_args(p, device="cpu")     # no torch in this parent process
    p.add_argument("--only", default="", help="comma-separated model names (default: all)")
    p.add_argument("--backend", default="default", help="our backend name (default, eager, aot_eager)")
    p.add_argument("--train", action="store_true", help="also check a training step (loss.backward)")
    p.add_argument("--no-inductor", action="store_true", help="skip the torch.compile/inductor column")
    p.add_argument("--repeat", type=int, default=20, help="timed repetitions per model and column")
    p.add_argument("--timeout", type=int, default=600, help="seconds per model before it counts as a hang")
    p.add_argument("--out", default=None, help="output path without extension")
    p.add_argument("--jobs", type=int, default=1,
                   help="models compiled at once (each in its own process); timings never overlap: "
                        "a lock lets one model at a time run its eager/ours/inductor timings")
    p.add_argument("--lock-file", default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result-file", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        from suite_worker import run_worker  # imported late: the parent never imports torch
        return run_worker(args)
    sys.path.insert(0, str(ROOT / "scripts"))
    from models import SUITE

    names = [n for n in args.only.split(",") if n] or list(SUITE)
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        sys.exit(f"run_suite: unknown model(s) {unknown}; valid: {', '.join(SUITE)}")
    out = Path(args.out or ROOT / "scripts" / "results" / f"suite_{args.device}_{args.dtype}")
    out.parent.mkdir(parents=True, exist_ok=True)
    debug_root = out.parent / (out.name + "_debug")
    if args.jobs < 1:
        sys.exit(f"run_suite: --jobs must be at least 1, got {args.jobs}")
    args.lock_file = str(out.parent / (out.name + ".timing.lock")) if args.jobs > 1 else None
    rows, done = [], {}
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_one, name, args, debug_root / name): name for name in names}
        for future in as_completed(futures):
            row = future.result()
            done[futures[future]] = row
            print(format_progress(row), flush=True)
            # Written after every model, so a run cut short still leaves its scoreboard so far.
            rows = [done[n] for n in names if n in done]
            summary = summarize(rows)
            out.with_suffix(".json").write_text(json.dumps({"args": vars(args), "summary": summary,
                                                            "models": rows}, indent=2))
            out.with_suffix(".md").write_text(scoreboard(rows, summary, args))
    if args.lock_file:
        Path(args.lock_file).unlink(missing_ok=True)
    print(scoreboard(rows, summary, args))
    for r in rows:
        if r.get("graphs_run_eagerly"):
            print(f"run_suite: FALLBACK: {r['model']}: {r['graphs_run_eagerly']} graph(s) ran eagerly as a "
                  f"whole (see its perf_hints)", file=sys.stderr)
    loud = summary["wrong"] or summary["crashed"] or summary["graphs_run_eagerly"]
    return 1 if loud else 0


def run_one(name, args, debug_dir):
    shutil.rmtree(debug_dir, ignore_errors=True)
    debug_dir.mkdir(parents=True, exist_ok=True)
    result_file = Path(tempfile.mkstemp(prefix=f"suite_{name}_", suffix=".json")[1])
    env = dict(os.environ, TRACE_COMPILE_DEBUG="1", TRACE_COMPILE_DEBUG_DIR=str(debug_dir),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--result-file", str(result_file),
           "--device", args.device, "--dtype", args.dtype, "--backend", args.backend, "--repeat", str(args.repeat)]
    cmd += ["--train"] if args.train else []
    cmd += ["--no-inductor"] if args.no_inductor else []
    cmd += ["--lock-file", args.lock_file] if args.lock_file else []
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        status = None if proc.returncode == 0 else f"exit code {proc.returncode}"
        stderr = proc.stderr
    except subprocess.TimeoutExpired as e:
        status, stderr = f"timeout after {args.timeout}s", (e.stderr or b"").decode(errors="replace")
    try:
        row = json.loads(result_file.read_text())
    except (OSError, ValueError):
        row = {"model": name, "status": "crashed", "error": status or "no result written"}
    result_file.unlink(missing_ok=True)
    if status and row.get("status") == "ok":
        row["status"], row["error"] = "crashed", status
    if row.get("status") != "ok":
        row["stderr_tail"] = stderr[-2000:]
        (debug_dir / "worker_stderr.txt").write_text(stderr)
        (debug_dir / "traceback.txt").write_text(row.get("traceback", row.get("error", "")))
        row["debug_dir"] = str(debug_dir)
    else:
        shutil.rmtree(debug_dir, ignore_errors=True)
    row["wall_s"] = round(time.perf_counter() - start, 2)
    return row


def format_progress(row):
    if row.get("status") != "ok":
        return f"{row['model']:<24} {row.get('status')}: {str(row.get('error', ''))[:200]}"
    return (f"{row['model']:<24} ok  accurate={row['accurate']} graphs={row['graphs']} breaks={row['graph_breaks']} "
            f"recompiles={row['recompiles']} fallbacks={row['fallbacks']} speedup={row.get('speedup_vs_eager')}")


def geomean(values):
    """harness.geomean rounded for the report; None where no model has the value."""
    g = harness.geomean(values)
    return None if math.isnan(g) else round(g, 3)


def summarize(rows):
    ok = [r for r in rows if r.get("status") == "ok"]
    return {
        "models": len(rows),
        "ran": len(ok),
        "crashed": len(rows) - len(ok),
        "wrong": sum(1 for r in ok if not r["accurate"]),
        "single_graph": sum(1 for r in ok if r["graphs"] == 1 and r["graph_breaks"] == 0),
        "graphs_run_eagerly": sum(r.get("graphs_run_eagerly", 0) for r in ok),
        "geomean_speedup_ours": geomean([r.get("speedup_vs_eager") for r in ok]),
        "geomean_speedup_inductor": geomean([r.get("inductor_speedup_vs_eager") for r in ok]),
    }


def scoreboard(rows, summary, args):
    head = (f"## Model suite: {args.device}, {args.dtype}, backend={args.backend}\n\n"
            f"{summary['ran']}/{summary['models']} ran, {summary['wrong']} wrong, "
            f"{summary['single_graph']}/{summary['ran']} single graph; geomean speedup over eager: "
            f"ours {summary['geomean_speedup_ours']}x, inductor {summary['geomean_speedup_inductor']}x\n\n")
    table = ["| model | status | accurate | graphs | breaks | recompiles | fallbacks | graphs run eagerly | "
             "cold compile s | eager ms | ours ms | inductor ms | ours/eager | inductor/eager |",
             "|" + "---|" * 14]
    for r in rows:
        if r.get("status") != "ok":
            table.append(f"| {r['model']} | {r.get('status')}: {str(r.get('error', ''))[:80]} |" + " |" * 12)
            continue
        table.append("| {model} | ok | {accurate} | {graphs} | {graph_breaks} | {recompiles} | {fallbacks} | "
                     "{graphs_run_eagerly} | {compile_s} | {eager_ms} | {ours_ms} | {inductor_ms} | "
                     "{speedup_vs_eager} | "
                     "{inductor_speedup_vs_eager} |".format(**{k: r.get(k) for k in (
                         "model", "accurate", "graphs", "graph_breaks", "recompiles", "fallbacks",
                         "graphs_run_eagerly", "compile_s",
                         "eager_ms", "ours_ms", "inductor_ms", "speedup_vs_eager", "inductor_speedup_vs_eager")}))
    return head + "\n".join(table) + "\n"


if __name__ == "__main__":
    sys.exit(main())
