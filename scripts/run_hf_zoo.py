"""Run the Hugging Face zoo (tests/compiler/frontend/hf_zoo.py) and print a table.

    python scripts/run_hf_zoo.py                                  # every model
    python scripts/run_hf_zoo.py --only gpt2,llama --backend default
    python scripts/run_hf_zoo.py --out scripts/results/hf_zoo_cpu

Per model, each in its own subprocess (a crash costs one row): graphs and graph breaks, ours
(compiler.explain) and Dynamo's (torch._dynamo.explain) on the same keyword call in eval mode;
the largest output error of a positional and a keyword call against eager; a training step with
labels: the loss error and the largest parameter-gradient error (relative to the gradient's
largest magnitude); the time of the first compiled call. Writes <out>.json and <out>.md.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "compiler" / "frontend"))


def _one(name, backend, train_backend, out_file):
    warnings.filterwarnings("ignore")
    import logging
    logging.disable(logging.WARNING)
    from hf_zoo import check
    try:
        res = check(name, backend=backend, train_backend=train_backend, train_counts=True)
    except Exception as e:                      # noqa: BLE001 - a row says what went wrong
        res = {"name": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}
    Path(out_file).write_text(json.dumps(res))


def _fmt(r):
    if "error" in r:
        return f"| {r['name']} | ERROR: {r['error'][:120]} |"
    ok = (r["graphs"] <= r["dynamo_graphs"] and r["breaks"] <= r["dynamo_breaks"]
          and r["train_breaks"] <= r["dynamo_train_breaks"]
          and r["out_err"] < 1e-4 and r["loss_err"] < 1e-4 and r["grad_err"] < 1e-3
          and not r["grad_mismatch"] and r["same_type"] and r["same_keys"])
    return (f"| {r['name']} | {r['family']} | {r['graphs']}/{r['dynamo_graphs']} | "
            f"{r['breaks']}/{r['dynamo_breaks']} | {r['train_breaks']}/{r['dynamo_train_breaks']} | "
            f"{r['out_err']:.1e} | {r['loss_err']:.1e} | "
            f"{r['grad_err']:.1e} | {r['compile_s']:.2f} | {'ok' if ok else 'FAIL'} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="comma-separated zoo names (default: all)")
    p.add_argument("--backend", default="eager", help="backend for the eval calls")
    p.add_argument("--train-backend", default="aot_eager", help="backend for the training step")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--out", default=None, help="output path without extension")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result-file", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _one(args.worker, args.backend, args.train_backend, args.result_file)
    from hf_zoo import ZOO
    names = [n for n in args.only.split(",") if n] or list(ZOO)
    rows = []
    header = ("| model | family | graphs ours/Dynamo | breaks ours/Dynamo | train breaks "
              "ours/Dynamo | max out err | loss err | max grad err | compile s | |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    for name in names:
        result_file = f"/tmp/hf_zoo_{os.getpid()}_{name}.json"
        start = time.perf_counter()
        try:
            subprocess.run([sys.executable, __file__, "--worker", name, "--backend", args.backend,
                            "--train-backend", args.train_backend, "--result-file", result_file],
                           timeout=args.timeout, capture_output=True, cwd=ROOT)
            r = json.loads(Path(result_file).read_text())
        except subprocess.TimeoutExpired:
            r = {"name": name, "error": f"timeout after {args.timeout}s"}
        except (OSError, json.JSONDecodeError) as e:
            r = {"name": name, "error": f"worker died: {e}"}
        r["wall_s"] = time.perf_counter() - start
        rows.append(r)
        print(_fmt(r), flush=True)
    good = sum(1 for r in rows if _fmt(r).endswith("| ok |"))
    summary = f"{good}/{len(rows)} ok (backend={args.backend}, train_backend={args.train_backend})"
    print(summary)
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(rows, indent=1))
        Path(args.out + ".md").write_text(header + "\n" + "\n".join(_fmt(r) for r in rows)
                                          + "\n\n" + summary + "\n")


if __name__ == "__main__":
    main()
