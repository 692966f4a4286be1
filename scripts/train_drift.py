"""Where does a compiled training run leave eager's? Per step of one real model
(scripts/bench_real_models.py's), the loss of eager and of each variant from the same weights and
batch, and the step whose loss first differs from eager's by more than --tol (relative).

Each variant runs in its own process with empty compile and autotune caches, so that first-call
work (compiling, autotuning sweeps) happens in it as it does for a user's first run. A variant is
`<frontend>[:<part>][+<ENV>=<value>...]`: frontend as in bench_real_models.py --train, part
`both` (default), `model` (optimizer step eager) or `optimizer` (model eager), then environment
settings for that process (`TRACE_TRITON_AUTOTUNE=0`).

    python scripts/train_drift.py vit_s16 --steps 8 \
        --variants ours,ours+TRACE_TRITON_AUTOTUNE=0,ours:model,ours:optimizer

A diagnostic, not a benchmark: it prints each variant's losses and the first drifting step.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import bench_real_models as bench  # noqa: E402


FRONTENDS = ("eager", "ours", "ours_ro", "ours_backend", "inductor", "inductor_ro")
PARTS = ("both", "model", "optimizer")


def parse_variant(text: str) -> tuple[str, str, dict]:
    """(frontend, part, environment settings) of `<frontend>[:<part>][+<ENV>=<value>...]`;
    ValueError saying what is wrong and what is valid."""
    head, *env = text.split("+")
    frontend, _, part = head.partition(":")
    part = part or "both"
    if frontend not in FRONTENDS:
        raise ValueError(f"variant {text!r}: unknown frontend {frontend!r}; valid: {', '.join(FRONTENDS)}")
    if part not in PARTS:
        raise ValueError(f"variant {text!r}: unknown part {part!r}; valid: {', '.join(PARTS)}")
    bad = [item for item in env if "=" not in item]
    if bad:
        raise ValueError(f"variant {text!r}: {bad[0]!r} is not an environment setting <NAME>=<value>")
    return frontend, part, dict(item.split("=", 1) for item in env)


def losses(name: str, variant: str, steps: int, device: str) -> list[float]:
    frontend, part, _ = parse_variant(variant)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    build, make_inputs = bench.MODELS[name]
    model = build().to(device).train()
    inputs = make_inputs(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run = bench._train_step_fn(frontend, name, model, opt, part=part)
    return [float(run(inputs).detach()) for _ in range(steps)]


def _child(name, variant, steps, device) -> list[float] | str:
    env = dict(os.environ)
    env.update(parse_variant(variant)[2])
    with tempfile.TemporaryDirectory() as tmp:
        env.setdefault("TRACE_BACKEND_CACHE_DIR", os.path.join(tmp, "cache"))
        env.setdefault("TRACE_TRITON_KERNEL_DIR", os.path.join(tmp, "kernels"))
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tmp, "inductor"))
        proc = subprocess.run([sys.executable, __file__, name, "--child", variant, "--steps", str(steps),
                               "--device", device], env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("LOSSES ")]
    if proc.returncode or not lines:
        return f"rc {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    return json.loads(lines[-1][len("LOSSES "):])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(bench.MODELS))
    p.add_argument("--variants", default="ours")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print("LOSSES " + json.dumps(losses(args.model, args.child, args.steps, args.device)), flush=True)
        return
    variants = [v for v in args.variants.split(",") if v]
    try:
        for v in variants:
            parse_variant(v)
    except ValueError as e:
        p.error(str(e))
    ref = _child(args.model, "eager", args.steps, args.device)
    if isinstance(ref, str):
        raise SystemExit(f"train_drift: eager run failed: {ref}")
    print(f"eager      {' '.join(f'{v:.6f}' for v in ref)}")
    for variant in variants:
        got = _child(args.model, variant, args.steps, args.device)
        if isinstance(got, str):
            print(f"{variant}: FAILED {got}")
            continue
        errs = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, ref)]
        first = next((i for i, e in enumerate(errs) if e > args.tol), None)
        print(f"{variant}: first step over tol: {first}; rel errs {' '.join(f'{e:.1e}' for e in errs)}",
              flush=True)


if __name__ == "__main__":
    main()
