"""Run every frontend corpus program under TorchDynamo and report Dynamo's counts.

Not part of the pipeline (it calls torch.compile / torch._dynamo on purpose): it sets the
corpus expectations. For each program, with backend = a counting "eager" backend:
  graphs      graphs compiled during the first call (torch._dynamo.explain's graph_count)
  breaks      graph breaks during the first call (torch._dynamo.explain's graph_break_count, or
              counters["graph_break"] when larger: explain says -1 when Dynamo skips a frame)
  recompiles  "Recompiling function ..." records (the `recompiles` log) over all calls

    PYTHONPATH=. python scripts/check_corpus_vs_dynamo.py            # print a table
    PYTHONPATH=. python scripts/check_corpus_vs_dynamo.py --write    # also write dynamo_counts.json
    PYTHONPATH=. python scripts/check_corpus_vs_dynamo.py -k graph_breaks
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys

import torch
import torch._dynamo
from torch._dynamo.utils import counters

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests.compiler.frontend.corpus import all_programs, make_args  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "compiler", "frontend", "corpus",
                   "dynamo_counts.json")


class _Recompiles(logging.Handler):
    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        if record.getMessage().startswith("Recompiling function"):
            self.count += 1


RECOMPILES = _Recompiles()


def dynamo_counts(prog) -> dict:
    torch._dynamo.reset()
    counters.clear()
    RECOMPILES.count = 0
    compiles = []

    def backend(gm, example_inputs):
        from torch._guards import CompileContext
        cid = CompileContext.current_compile_id()
        compiles.append((cid.frame_id, cid.frame_compile_id) if cid else None)
        return gm.forward

    f = torch.compile(prog.fn, backend=backend)
    first = None
    with contextlib.redirect_stdout(io.StringIO()):
        for i, call in enumerate(prog.calls):
            torch.manual_seed(i)          # the same inputs as tests/compiler/frontend/test_corpus.py
            args, kwargs = make_args(call)
            if prog.before_call:
                prog.before_call(prog.fn, i)
            f(*args, **kwargs)
            if i == 0:
                first = (len(compiles), sum(counters["graph_break"].values()))
    recompiled = RECOMPILES.count
    # explain() on the first call's inputs, for the graph and graph-break counts
    torch._dynamo.reset()
    torch.manual_seed(0)
    args, kwargs = make_args(prog.calls[0])
    if prog.before_call:
        prog.before_call(prog.fn, 0)
    with contextlib.redirect_stdout(io.StringIO()):
        ex = torch._dynamo.explain(prog.fn)(*args, **kwargs)
    # explain() reports -1 breaks when Dynamo gave up on the whole frame (0 graphs); the
    # graph_break counter still saw the break: take the larger of the two.
    return {"graphs": ex.graph_count, "breaks": max(ex.graph_break_count, first[1]), "recompiles": recompiled,
            "backend_graphs": first[0], "break_reasons": [str(r.reason)[:100] for r in ex.break_reasons]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write dynamo_counts.json")
    ap.add_argument("-k", default="", help="only programs whose name contains this")
    a = ap.parse_args()
    from tests.compiler.frontend.corpus import functions
    functions._DYNAMO_MODE[0] = True       # the program's inner compiled function uses torch.compile
    torch._logging.set_logs(recompiles=True)
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    logger.addHandler(RECOMPILES)
    logger.propagate = False     # counted, not printed
    for h in list(logger.handlers):
        if h is not RECOMPILES:
            logger.removeHandler(h)
    results = {}
    for prog in all_programs():
        if a.k not in prog.name:
            continue
        try:
            results[prog.name] = dynamo_counts(prog)
        except Exception as e:  # report, keep going
            results[prog.name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        r = results[prog.name]
        print(f"{prog.name:55s} " + (f"graphs={r['graphs']} breaks={r['breaks']} "
                                     f"recompiles={r['recompiles']} (backend graphs={r['backend_graphs']}) {r['break_reasons'][:2]}" if "error" not in r else r["error"]),
              flush=True)
    if a.write:
        old = {}
        if a.k and os.path.exists(OUT):
            old = json.load(open(OUT))
        old.update({k: {kk: v[kk] for kk in ("graphs", "breaks", "recompiles")} for k, v in results.items()
                    if "error" not in v})
        with open(OUT, "w") as fh:
            json.dump(dict(sorted(old.items())), fh, indent=1)
        print(f"wrote {len(old)} entries to {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
