"""Run every frontend corpus program under TorchDynamo and report Dynamo's counts.

Not part of the pipeline (it calls torch.compile / torch._dynamo on purpose): it sets the
corpus expectations. For each program, with backend = a counting "eager" backend:
  graphs      graphs compiled during the first call (torch._dynamo.explain's graph_count)
  breaks      distinct graph-break SITES during the first call, as Dynamo's own
              TORCH_LOGS=graph_breaks log reports them: every record of a `graph_breaks` artifact
              logger (torch._dynamo.symbolic_convert.__graph_breaks, ...convert_frame.__graph_breaks)
              names the user file:line of the break ("Graph break in user code at FILE:LINE", the
              duplicate-suppressed variant, or the "cannot properly resume ... skip" record's
              innermost user frame); the count is the number of distinct FILE:LINE. This is the
              honest measure: explain()/counters undercount when Dynamo gives up on a whole frame
              (e.g. a break inside a loop: 0 graphs, explain says 0 breaks, but the log has it).
  explain_breaks  the old number, kept for reference: max(explain's graph_break_count,
              counters["graph_break"])
  recompiles  "Recompiling function ..." records (the `recompiles` log) over all calls

    PYTHONPATH=. python scripts/check_corpus_vs_dynamo.py            # print a table
    PYTHONPATH=. python scripts/check_corpus_vs_dynamo.py --write    # also write dynamo_counts.json
    PYTHONPATH=. python scripts/check_corpus_vs_dynamo.py -k graph_breaks
    PYTHONPATH=. python scripts/check_corpus_vs_dynamo.py --pysem     # the Python-semantics
        corpus (tests/compiler/frontend/pysem): Dynamo's and our counts side by side in this
        process, plus both compilers' correctness against eager; writes
        scripts/results/pysem_vs_dynamo.json and prints the programs where ours is worse
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import re
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

# "Graph break in user code at F:L" and "Graph break (user stack suppressed ...) in user code at F:L"
_AT = re.compile(r"in user code at (.+):(\d+)")
# the frame-skip record carries a formatted user stack: its last `File "F", line L` is the break
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


class _BreakSites(logging.Handler):
    """Distinct user file:line of the records of Dynamo's graph_breaks artifact loggers."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.sites: set = set()

    def emit(self, record):
        msg = record.getMessage()
        if not msg.startswith("Graph break"):
            return
        m = _AT.search(msg)
        if m is None:
            frames = _FRAME.findall(msg)
            m_site = frames[-1] if frames else None
        else:
            m_site = m.groups()
        if m_site is not None:
            self.sites.add((os.path.realpath(m_site[0]), int(m_site[1])))


BREAKS = _BreakSites()
GRAPH_BREAK_LOGGERS = ("torch._dynamo.symbolic_convert.__graph_breaks",
                       "torch._dynamo.convert_frame.__graph_breaks",
                       "torch._dynamo.exc.__graph_breaks")


def dynamo_counts(prog) -> dict:
    torch._dynamo.reset()
    counters.clear()
    RECOMPILES.count = 0
    BREAKS.sites = set()
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
                first = (len(compiles), sum(counters["graph_break"].values()), len(BREAKS.sites))
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
    # graph_break counter still saw the break: the old number is the larger of the two.
    return {"graphs": ex.graph_count, "breaks": first[2], "recompiles": recompiled,
            "explain_breaks": max(ex.graph_break_count, first[1]),
            "backend_graphs": first[0], "break_reasons": [str(r.reason)[:100] for r in ex.break_reasons]}


# ---- the Python-semantics corpus: Dynamo and ours side by side ------------------------------
def _run_counted(case_, compile_fn, first_done):
    """Run a pysem case through compile_fn; returns the pysem Outcome (vs eager)."""
    from tests.compiler.frontend.pysem import run_case

    calls = {"n": 0}

    def wrapped(fn):
        compiled = compile_fn(fn)

        def call(*args):
            try:
                return compiled(*args)
            finally:
                calls["n"] += 1
                if calls["n"] == 1:
                    first_done()
        return call
    return run_case(case_, wrapped)


def pysem_dynamo(case_) -> dict:
    torch._dynamo.reset()
    RECOMPILES.count = 0
    BREAKS.sites = set()
    graphs = []
    first = {}

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    with contextlib.redirect_stdout(io.StringIO()):
        out = _run_counted(case_, lambda fn: torch.compile(fn, backend=backend),
                           lambda: first.update(graphs=len(graphs), breaks=len(BREAKS.sites)))
    return {"graphs": first.get("graphs", 0), "breaks": first.get("breaks", 0),
            "recompiles": RECOMPILES.count, "wrong": out.wrong, "crashed": out.crashed,
            "diffs": out.diffs[:2]}


def pysem_ours(case_) -> dict:
    from tracetorch import compiler, logs
    from tests.compiler.frontend.corpus import break_sites
    compiler.reset()
    events, graphs, first = [], [], {}

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    sink = logs.add_sink(events.append, artifacts={"recompile", "graph_break"})
    try:
        out = _run_counted(case_, lambda fn: compiler.compile(fn, backend=backend),
                           lambda: first.update(graphs=len(graphs), breaks=break_sites(events)))
    finally:
        logs.remove_sink(sink)
    reasons = sorted({str(e.payload.get("reason", ""))[:90] for e in events
                      if e.name == "graph_break" and isinstance(e.payload, dict)})
    return {"graphs": first.get("graphs", 0), "breaks": first.get("breaks", 0),
            "recompiles": sum(1 for e in events if e.name == "recompile"),
            "wrong": out.wrong, "crashed": out.crashed, "diffs": out.diffs[:2],
            "break_reasons": reasons[:3]}


def pysem_main(a):
    from tests.compiler.frontend.pysem import all_cases
    rows = {}
    for case_ in all_cases():
        name = f"{case_.feature}.{case_.name}"
        if a.k not in name:
            continue
        row = {}
        for label, fn in (("dynamo", pysem_dynamo), ("ours", pysem_ours)):
            try:
                row[label] = fn(case_)
            except Exception as e:  # report, keep going
                row[label] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        rows[name] = row
        d, o = row["dynamo"], row["ours"]
        fmt = lambda r: ("ERR " + r["error"][:60]) if "error" in r else (
            f"g={r['graphs']} b={r['breaks']} r={r['recompiles']}"
            + (" WRONG" if r["wrong"] else "") + (" CRASH" if r["crashed"] else ""))
        print(f"{name:58s} dynamo[{fmt(d)}]  ours[{fmt(o)}]", flush=True)
    worse = {k: r for k, r in rows.items() if "error" not in r["ours"] and "error" not in r["dynamo"]
             and any(r["ours"][m] > r["dynamo"][m] for m in ("graphs", "breaks", "recompiles"))}
    summary = {
        "programs": len(rows),
        "ours_wrong": sorted(k for k, r in rows.items() if r["ours"].get("wrong")),
        "ours_crashed": sorted(k for k, r in rows.items() if r["ours"].get("crashed") or "error" in r["ours"]),
        "dynamo_wrong_or_crashed": sorted(k for k, r in rows.items()
                                          if r["dynamo"].get("wrong") or r["dynamo"].get("crashed")),
        "ours_more_graphs": sorted(k for k, r in worse.items() if r["ours"]["graphs"] > r["dynamo"]["graphs"]),
        "ours_more_breaks": sorted(k for k, r in worse.items() if r["ours"]["breaks"] > r["dynamo"]["breaks"]),
        "ours_more_recompiles": sorted(k for k, r in worse.items()
                                       if r["ours"]["recompiles"] > r["dynamo"]["recompiles"]),
        "ours_fewer_graphs": sorted(k for k, r in rows.items() if "error" not in r["ours"]
                                    and "error" not in r["dynamo"]
                                    and r["ours"]["graphs"] < r["dynamo"]["graphs"]),
    }
    print(json.dumps({k: (v if isinstance(v, int) else f"{len(v)}: {v}") for k, v in summary.items()},
                     indent=1))
    out = os.path.join(os.path.dirname(__file__), "results", "pysem_vs_dynamo.json")
    if a.write or not a.k:
        with open(out, "w") as fh:
            json.dump({"summary": summary, "programs": rows}, fh, indent=1, default=str)
        print(f"wrote {os.path.relpath(out)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write dynamo_counts.json")
    ap.add_argument("-k", default="", help="only programs whose name contains this")
    ap.add_argument("--pysem", action="store_true",
                    help="the Python-semantics corpus, Dynamo and ours side by side")
    a = ap.parse_args()
    from tests.compiler.frontend.corpus import functions
    functions._DYNAMO_MODE[0] = True       # the program's inner compiled function uses torch.compile
    torch._logging.set_logs(recompiles=True, graph_breaks=True)    # before taking the handlers over
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    logger.addHandler(RECOMPILES)
    logger.propagate = False     # counted, not printed
    for h in list(logger.handlers):
        if h is not RECOMPILES:
            logger.removeHandler(h)
    for name in GRAPH_BREAK_LOGGERS:
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.addHandler(BREAKS)
        logger.propagate = False
    if a.pysem:
        return pysem_main(a)
    results = {}
    for prog in all_programs():
        if a.k not in prog.name:
            continue
        try:
            results[prog.name] = dynamo_counts(prog)
        except Exception as e:  # report, keep going
            results[prog.name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        r = results[prog.name]
        print(f"{prog.name:55s} " + (f"graphs={r['graphs']} breaks={r['breaks']} (explain {r['explain_breaks']}) "
                                     f"recompiles={r['recompiles']} (backend graphs={r['backend_graphs']}) "
                                     f"{r['break_reasons'][:2]}" if "error" not in r else r["error"]),
              flush=True)
    if a.write:
        old = {}
        if a.k and os.path.exists(OUT):
            old = json.load(open(OUT))
        old.update({k: {kk: v[kk] for kk in ("graphs", "breaks", "recompiles", "explain_breaks")}
                    for k, v in results.items()
                    if "error" not in v})
        with open(OUT, "w") as fh:
            json.dump(dict(sorted(old.items())), fh, indent=1)
        print(f"wrote {len(old)} entries to {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
