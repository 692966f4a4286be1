"""The Hugging Face zoo (tests/compiler/frontend/hf_zoo.py) with a batch size that changes from
call to call, as a server calls a model: does the dynamic graph stay dynamic and right?

    python scripts/dynamic_batch_zoo.py                       # every model, the GPU's rewrites on
    python scripts/dynamic_batch_zoo.py --only gpt2,bert --sizes 2,3,5,7,3

Each model is compiled with compiler.compile in inference (no_grad) and called at each batch
size in turn (the example rows repeated, then cut), every output compared with eager's at the
same size. The rewrites that only run on the GPU run here too (backend.pad_gemm "always",
backend.conv_layout "channels_last"): session 26's bucket failure was pad_gemm guarding the
batch, which the CPU never ran. Per model: frames compiled, the worst error, and the events
that mean a dynamic graph was lost or a size was guarded (`backend_guarded`,
`compiled_graph_skipped`, `graph_runs_eagerly`, `aot_runs_eagerly`). A model whose first size
already breaks Dynamo-style capture still counts: each graph is checked the same way.
"""
import argparse
import logging
import sys
import traceback
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "compiler" / "frontend"))
from scripts import harness  # noqa: E402
from scripts.cudagraph_buckets import _at_batch  # noqa: E402

GPU_REWRITES = {"backend.pad_gemm": "always", "backend.conv_layout": "channels_last", "backend.cache_enabled": False}
LOST = ("backend_guarded", "compiled_graph_skipped", "graph_runs_eagerly", "aot_runs_eagerly",
        "backend_compile_failed")
#: beyond this relative error a size's result is wrong, not float32 rounding
WRONG = 1e-3


def check(name, sizes) -> dict:
    from hf_zoo import ZOO, main_output
    from tracetorch import compiler, logs
    from tracetorch.compiler import config
    entry = ZOO[name]
    model, inputs = entry.model(), entry.inputs()
    counter = harness.EventCounter()
    sink = logs.add_sink(counter, level=logging.DEBUG)
    row = {"model": name, "errors": []}
    try:
        compiler.reset()
        with config.patch(GPU_REWRITES), torch.no_grad():
            opt = compiler.compile(model)
            worst = 0.0
            for n in sizes:
                x = _at_batch(inputs, n)
                got = main_output(opt(**x)).float()
                want = main_output(model(**x)).float()
                if got.shape != want.shape:
                    row["errors"].append(f"batch {n}: shape {tuple(got.shape)}, eager {tuple(want.shape)}")
                    continue
                worst = max(worst, float((got - want).abs().max() / want.abs().max().clamp_min(1e-6)))
            row["max_rel_err"] = worst
    except Exception as e:
        row["errors"].append(f"{type(e).__name__}: {e}"[:300])
        traceback.print_exc(limit=-4)
    finally:
        logs.remove_sink(sink)
    row["frames"] = counter.get("frame_compiled")
    row["recompiles"] = counter.get("recompile")
    row.update({k: counter.get(k) for k in LOST})
    row["ok"] = not row["errors"] and row.get("max_rel_err", 1.0) <= WRONG and not any(row[k] for k in LOST)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="comma list of zoo names (default: all)")
    p.add_argument("--sizes", default="2,3,5,7,3")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    from hf_zoo import ZOO
    names = [n for n in args.only.split(",") if n] or list(ZOO)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    print(f"| model | frames | recompiles | max rel err | {' | '.join(LOST)} | ok |")
    print("|---|---|---|---|" + "---|" * len(LOST) + "---|")
    for name in names:
        r = check(name, sizes)
        rows.append(r)
        err = f"{r['max_rel_err']:.1e}" if "max_rel_err" in r else "-"
        verdict = "ok" if r["ok"] else "FAIL " + "; ".join(r["errors"])[:200]
        print(f"| {name} | {r['frames']} | {r['recompiles']} | {err} | "
              + " | ".join(str(r[k]) for k in LOST) + f" | {verdict} |", flush=True)
    bad = [r["model"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)}/{len(rows)} ok" + (f"; failed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
