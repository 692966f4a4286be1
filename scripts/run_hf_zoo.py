"""Run the Hugging Face zoo (tests/compiler/frontend/hf_zoo.py) and print a table.

    python scripts/run_hf_zoo.py                                  # every model
    python scripts/run_hf_zoo.py --only gpt2,llama --backend default
    python scripts/run_hf_zoo.py --out scripts/results/hf_zoo_cpu

Models run in worker subprocesses, a few per worker (imports are paid once per worker; a crash
costs the rest of that worker's rows, reported as errors), --jobs workers at a time. Per model: graphs and graph
breaks, ours (compiler.explain) and Dynamo's (torch._dynamo.explain) on the same keyword call in eval mode;
the largest output error of a positional and a keyword call against eager; a training step with
labels: the loss error and the largest parameter-gradient error (relative to the gradient's
largest magnitude); the time of the first compiled call. Writes <out>.json and <out>.md.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "compiler" / "frontend"))
from hf_zoo import EXCEPTIONS  # noqa: E402  (imports no torch/transformers)


def _worker(names, backend, train_backend, out_dir, with_dynamo=True):
    warnings.filterwarnings("ignore")
    import logging  # noqa: F811
    logging.disable(logging.WARNING)
    from hf_zoo import check
    for name in names:
        start = time.perf_counter()
        try:
            res = check(name, backend=backend, train_backend=train_backend, train_counts=True,
                        with_dynamo=with_dynamo)
        except Exception as e:                      # noqa: BLE001 - a row says what went wrong
            res = {"name": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        res["wall_s"] = time.perf_counter() - start
        Path(out_dir, name + ".json").write_text(json.dumps(res))


def _fmt(r):
    if "error" in r:
        return f"| {r['name']} | ERROR: {r['error'][:120]} |"
    r = {"dynamo_graphs": "-", "dynamo_breaks": "-", "dynamo_train_breaks": "-", **r}
    if "-" in (r["dynamo_graphs"], r["dynamo_train_breaks"]):      # --no-dynamo: correctness only
        ok = (r["out_err"] < 1e-4 and r["loss_err"] < 1e-4 and r["grad_err"] < 1e-3
              and not r["grad_mismatch"] and r["same_type"] and r["same_keys"])
        return (f"| {r['name']} | {r['family']} | {r['graphs']}/- | {r['breaks']}/- | "
                f"{r['train_breaks']}/- | {r['out_err']:.1e} | {r['loss_err']:.1e} | "
                f"{r['grad_err']:.1e} | {r['compile_s']:.2f} | {'ok' if ok else 'FAIL'} |")
    ok = (r["graphs"] <= r["dynamo_graphs"] and r["breaks"] <= r["dynamo_breaks"]
          and r["train_breaks"] <= r["dynamo_train_breaks"]
          and r["out_err"] < 1e-4 and r["loss_err"] < 1e-4 and r["grad_err"] < 1e-3
          and not r["grad_mismatch"] and r["same_type"] and r["same_keys"])
    if not ok and r["name"] in EXCEPTIONS and r["out_err"] < 1e-4 and r["loss_err"] < 1e-4 \
            and r["grad_err"] < 1e-3 and not r["grad_mismatch"]:
        ok = "exception"      # more graphs/breaks than Dynamo, documented in hf_zoo.EXCEPTIONS
    return (f"| {r['name']} | {r['family']} | {r['graphs']}/{r['dynamo_graphs']} | "
            f"{r['breaks']}/{r['dynamo_breaks']} | {r['train_breaks']}/{r['dynamo_train_breaks']} | "
            f"{r['out_err']:.1e} | {r['loss_err']:.1e} | "
            f"{r['grad_err']:.1e} | {r['compile_s']:.2f} | "
            f"{ok if isinstance(ok, str) else ('ok' if ok else 'FAIL')} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="comma-separated zoo names (default: all)")
    p.add_argument("--backend", default="eager", help="backend for the eval calls")
    p.add_argument("--train-backend", default="aot_eager", help="backend for the training step")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per worker")
    p.add_argument("--jobs", type=int, default=1, help="workers at a time")
    p.add_argument("--no-dynamo", action="store_true",
                   help="skip torch._dynamo's counts (backend runs: correctness only)")
    p.add_argument("--per-worker", type=int, default=6, help="models per worker process")
    p.add_argument("--out", default=None, help="output path without extension")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args.worker.split(","), args.backend, args.train_backend, args.result_dir,
                       with_dynamo=not args.no_dynamo)
    from hf_zoo import ZOO
    names = [n for n in args.only.split(",") if n] or list(ZOO)
    header = ("| model | family | graphs ours/Dynamo | breaks ours/Dynamo | train breaks "
              "ours/Dynamo | max out err | loss err | max grad err | compile s | |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    out_dir = tempfile.mkdtemp(prefix="hf_zoo_")
    chunks = [names[i:i + args.per_worker] for i in range(0, len(names), args.per_worker)]

    def run_chunk(chunk):
        try:
            subprocess.run([sys.executable, __file__, "--worker", ",".join(chunk), "--backend",
                            args.backend, "--train-backend", args.train_backend,
                            "--result-dir", out_dir] + (["--no-dynamo"] if args.no_dynamo else []),
                           timeout=args.timeout,
                           capture_output=True, cwd=ROOT)
        except subprocess.TimeoutExpired:
            pass
        done = []
        for name in chunk:
            f = Path(out_dir, name + ".json")
            r = json.loads(f.read_text()) if f.exists() else \
                {"name": name, "error": "worker died or timed out before this model"}
            print(_fmt(r), flush=True)
            done.append(r)
        return done

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = {r["name"]: r for rows_ in pool.map(run_chunk, chunks) for r in rows_}
    rows = [results[n] for n in names]
    print("\nin zoo order:\n" + header + "\n" + "\n".join(_fmt(r) for r in rows))
    good = sum(1 for r in rows if _fmt(r).endswith("| ok |"))
    excused = [r["name"] for r in rows if _fmt(r).endswith("| exception |")]
    summary = (f"{good}/{len(rows)} ok, {len(excused)} documented exceptions "
               f"(backend={args.backend}, train_backend={args.train_backend})")
    summary += "".join(f"\n- {n}: {EXCEPTIONS[n]}" for n in excused)
    print(summary)
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(rows, indent=1))
        Path(args.out + ".md").write_text(header + "\n" + "\n".join(_fmt(r) for r in rows)
                                          + "\n\n" + summary + "\n")


if __name__ == "__main__":
    main()
