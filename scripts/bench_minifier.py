"""Benchmark: our minifier against PyTorch's, on the same 500+ node model, per injected relu bug.

For each bug kind (compile_error, runtime_error, accuracy):
  ours:    run the model under compiler.compile with TRACE_REPRO_AFTER=backend and
           TRACE_TESTING_INJECT_RELU_BUG=<kind> (level 4 for accuracy), then time
           `python repro.py --minify`;
  PyTorch: run the model under torch.compile (inductor, CPU) with TORCHDYNAMO_REPRO_AFTER=aot and
           torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY=<kind> (level 4 for accuracy,
           3 for runtime_error: its injected C++ `throw` kills the process, so only an
           always-written launcher survives), then time `python minifier_launcher.py minify`,
           capped (--pytorch-timeout, default 8 minutes; a timeout is reported as such).
Only the minification step is timed (not the run that produced the repro). Both sides run one
after the other on this machine's CPU; the load average is printed with the table because a
shared machine changes the absolute numbers.

    python scripts/bench_minifier.py [--kinds compile_error,accuracy] [--blocks 72]
        [--pytorch-timeout 480] [--ours-only | --pytorch-only] [--workdir DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("compile_error", "runtime_error", "accuracy")

# The debug tests' model (7 * blocks + 2 graph nodes, one relu in block relu_at): one copy for the
# tests and this benchmark. The trigger scripts run with PYTHONPATH=REPO (see _env).
MODEL = '''
import torch

from tests.debug.models import ReluDeep
'''

OURS_TRIGGER = MODEL + '''
from tracetorch import compiler
torch.manual_seed(0)
opt = compiler.compile(ReluDeep({blocks}, {relu_at}))
try:
    with torch.no_grad():
        opt(torch.randn(8, 8))
except Exception as e:
    print("raised", type(e).__name__)
'''

PYTORCH_TRIGGER = MODEL + '''
import torch._inductor.config as inductor_config
inductor_config.cpp.inject_relu_bug_TESTING_ONLY = {kind!r}
torch.manual_seed(0)
opt = torch.compile(ReluDeep({blocks}, {relu_at}), backend="inductor")
try:
    with torch.no_grad():
        opt(torch.randn(8, 8))
except Exception as e:
    print("raised", type(e).__name__)
'''


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE_", "TORCHDYNAMO_", "TORCH_COMPILE"))}
    env["PYTHONPATH"] = REPO
    env.update(extra)
    return env


def _count_nodes_in_code(path: str) -> int | None:
    """Compute nodes of the forward of a repro file (ours or PyTorch's): assignment lines."""
    try:
        text = open(path).read()
    except OSError:
        return None
    m = re.search(r"def forward\(self[^)]*\):\n(.*?)(?:\n\S|\n    def |\Z)", text, re.S)
    if not m:
        return None
    body = [line for line in m.group(1).splitlines()
            if re.match(r"\s+\w+(?:, \w+)* = ", line) and "= None" not in line.split(";")[0]]
    return len(body)


def run_ours(kind: str, blocks: int, relu_at: int, workdir: str, jobs: int | None) -> dict:
    d = os.path.join(workdir, f"ours_{kind}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "trigger.py"), "w") as f:
        f.write(OURS_TRIGGER.format(blocks=blocks, relu_at=relu_at))
    env = _env(TRACE_REPRO_AFTER="backend", TRACE_REPRO_LEVEL="4" if kind == "accuracy" else "2",
               TRACE_TESTING_INJECT_RELU_BUG=kind, TRACE_COMPILE_DEBUG_DIR=os.path.join(d, "dbg"))
    t = subprocess.run([sys.executable, "trigger.py"], cwd=d, env=env, capture_output=True, text=True, timeout=900)
    with open(os.path.join(d, "trigger.log"), "w") as f:
        f.write(t.stdout + t.stderr)
    repro = glob.glob(os.path.join(d, "dbg", "run_*", "repro", "repro.py"))
    if not repro:
        return {"side": "ours", "kind": kind, "status": "no repro written"}
    repro = repro[0]
    args = [sys.executable, repro, "--minify"] + (["--jobs", str(jobs)] if jobs else [])
    t0 = time.monotonic()
    r = subprocess.run(args, cwd=d, env=_env(), capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - t0
    with open(os.path.join(d, "minify.log"), "w") as f:
        f.write(r.stderr)
    m = re.search(r"done: (\d+) -> (\d+) nodes in [\d.]+s, (\d+) candidate runs", r.stderr)
    out = {"side": "ours", "kind": kind, "seconds": round(seconds, 1), "rc": r.returncode,
           "status": "minified" if r.returncode == 0 else f"failed (rc {r.returncode})"}
    if m:
        out.update(initial_nodes=int(m.group(1)), final_nodes=int(m.group(2)), candidates=int(m.group(3)))
    else:
        out["tail"] = r.stderr[-1500:]
    return out


def run_pytorch(kind: str, blocks: int, relu_at: int, workdir: str, timeout: float) -> dict:
    d = os.path.join(workdir, f"pytorch_{kind}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "trigger.py"), "w") as f:
        f.write(PYTORCH_TRIGGER.format(kind=kind, blocks=blocks, relu_at=relu_at))
    level = {"accuracy": "4", "runtime_error": "3"}.get(kind, "2")
    env = _env(TORCHDYNAMO_REPRO_AFTER="aot", TORCHDYNAMO_REPRO_LEVEL=level,
               TORCH_COMPILE_DEBUG_DIR=os.path.join(d, "dbg"), TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
    t = subprocess.run([sys.executable, "trigger.py"], cwd=d, env=env, capture_output=True, text=True, timeout=1800)
    with open(os.path.join(d, "trigger.log"), "w") as f:
        f.write(t.stdout + t.stderr)
    launchers = glob.glob(os.path.join(d, "dbg", "**", "minifier_launcher.py"), recursive=True)
    if not launchers:
        return {"side": "pytorch", "kind": kind, "status": "no minifier_launcher.py written"}
    launcher = launchers[0]
    initial = _count_nodes_in_code(launcher)
    mdir = os.path.join(d, "minify_cwd")
    os.makedirs(mdir, exist_ok=True)
    t0 = time.monotonic()
    # Own process group, so a timeout also ends the candidate subprocesses it started.
    proc = subprocess.Popen([sys.executable, launcher, "minify"], cwd=mdir,
                            env=_env(TORCHINDUCTOR_FORCE_DISABLE_CACHES="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        output, _ = proc.communicate()
        timed_out = True
    seconds = time.monotonic() - t0
    with open(os.path.join(d, "minify.log"), "w") as f:
        f.write(output)
    queries = re.findall(r"Made (\d+) queries", output)
    # Each candidate is a script written to <cwd>/isolate/ and run in a fresh interpreter.
    started = len(glob.glob(os.path.join(mdir, "isolate", "*.py")))
    final_path = os.path.join(mdir, "repro.py")
    checkpoints = sorted(glob.glob(os.path.join(d, "dbg", "**", "checkpoints", "*.py"), recursive=True),
                         key=os.path.getmtime)
    out = {"side": "pytorch", "kind": kind, "seconds": round(seconds, 1), "initial_nodes": initial,
           "status": "timeout" if timed_out else
           ("minified" if proc.returncode == 0 else f"failed (rc {proc.returncode})")}
    if queries:
        out["candidates"] = int(queries[-1])
    else:
        out["candidates_at_least"] = started  # no final count printed (timeout): candidates started
    # In-memory progress (its counts include placeholders and the output node), even when the
    # timeout came before the next checkpoint was written.
    reached = re.findall(r"SUCCESS: Went from \d+ to (\d+) nodes", output)
    if reached:
        out["reached_nodes_incl_io"] = int(reached[-1])
    if os.path.exists(final_path):
        out["final_nodes"] = _count_nodes_in_code(final_path)
    elif checkpoints:
        out["best_checkpoint_nodes"] = _count_nodes_in_code(checkpoints[-1])
    if not timed_out and proc.returncode != 0:
        out["tail"] = output[-1500:]
    return out


def _table(rows: list[dict]) -> str:
    lines = ["| bug kind | minifier | status | nodes before -> after | candidate runs | time (s) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        after = r.get("final_nodes", r.get("best_checkpoint_nodes", "?"))
        if "best_checkpoint_nodes" in r:
            after = f"{after} (best checkpoint)"
        if r.get("status") == "timeout" and "reached_nodes_incl_io" in r:
            after = f"{after} written; {r['reached_nodes_incl_io']} reached in memory (incl. inputs/output)"
        cands = r.get("candidates", f">= {r['candidates_at_least']}" if "candidates_at_least" in r else "?")
        lines.append(f"| {r['kind']} | {r['side']} | {r['status']} | {r.get('initial_nodes', '?')} -> {after} "
                     f"| {cands} | {r.get('seconds', '-')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", default=",".join(KINDS), help="comma list of " + ", ".join(KINDS))
    p.add_argument("--blocks", type=int, default=72, help="model blocks (7 nodes each; 72 -> 506 nodes)")
    p.add_argument("--relu-at", type=int, default=None,
                   help="block holding the relu (default 2/3 of the way). The model contracts: with "
                        "72 blocks an x+1 at block 48 (PyTorch's accuracy bug) changes the output by "
                        "only 4e-4, under its tolerance; block 70 changes it by ~1")
    p.add_argument("--pytorch-timeout", type=float, default=480.0, help="cap on PyTorch's minify, seconds")
    p.add_argument("--jobs", type=int, default=None, help="our minifier's parallel candidates")
    side = p.add_mutually_exclusive_group()
    side.add_argument("--ours-only", action="store_true")
    side.add_argument("--pytorch-only", action="store_true")
    p.add_argument("--workdir", default=None, help="where to put the runs (default: a temp folder)")
    p.add_argument("--json", default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        p.error(f"unknown bug kind(s) {bad}; choose from {', '.join(KINDS)}")
    if args.blocks < 2:
        p.error("--blocks must be at least 2")
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_minifier_")
    relu_at = (2 * args.blocks) // 3 if args.relu_at is None else args.relu_at
    if not 0 <= relu_at < args.blocks:
        p.error(f"--relu-at must be in [0, {args.blocks})")
    rows = []
    print(f"model: {args.blocks} blocks, relu in block {relu_at}; workdir {workdir}; "
          f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for kind in kinds:
        if not args.pytorch_only:
            rows.append(run_ours(kind, args.blocks, relu_at, workdir, args.jobs))
            print(json.dumps(rows[-1]), flush=True)
        if not args.ours_only:
            rows.append(run_pytorch(kind, args.blocks, relu_at, workdir, args.pytorch_timeout))
            print(json.dumps(rows[-1]), flush=True)
    print()
    print(_table(rows))
    print(f"\nload average at end {os.getloadavg()[0]:.1f} (shared machine: absolute times vary with it)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
