"""Cold first call, side by side: each (model, variant) of scripts/bench_real_models.py runs in a
process of its own whose compile caches are empty folders made for it (Triton's, inductor's and
ours, through TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, TRACE_BACKEND_CACHE_DIR,
TRACE_TRITON_KERNEL_DIR and TMPDIR: kernel files and autotuning results included), so no
variant inherits kernels, launcher builds or imports from another. Prints first-call seconds per
variant and ours over inductor's; the same process's eager call has already initialised the
device, cuDNN and cuBLAS before the first compiled call. With --train, the first training step
(forward, backward and the compiled optimizer step; fp32 with TF32) instead of the first call.

    python scripts/cold_compile.py --models gpt2,vit_b16,resnet50 --variants inductor,ours [--train]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def first_call(model: str, variant: str, device: str, dtype: str, train: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="cold_") as tmp:
        # TMPDIR too: our kernel files and autotuning results live under the temp folder
        env = dict(os.environ, TRITON_CACHE_DIR=f"{tmp}/triton", TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
                   TRACE_BACKEND_CACHE_DIR=f"{tmp}/tracetorch", TRACE_TRITON_KERNEL_DIR=f"{tmp}/kernels",
                   TMPDIR=tmp)
        out = f"{tmp}/row"
        cmd = [sys.executable, str(ROOT / "scripts" / "bench_real_models.py"), "--device", device,
               "--dtype", dtype, "--repeat", "3", "--variants", variant, "--only", model, "--out", out]
        if train:       # an eager step first initialises the device, cuDNN and cuBLAS
            cmd[cmd.index("--variants") + 1] = f"eager,{variant}"
            cmd.append("--train")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not Path(out + ".json").exists():
            return {"error": (proc.stderr or proc.stdout)[-400:]}
        rows = json.loads(Path(out + ".json").read_text())["results"]
        return rows[model][variant]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="gpt2,vit_b16,resnet50")
    p.add_argument("--variants", default="inductor,ours")
    p.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--train", action="store_true", help="time the first training step instead")
    args = p.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    for model in [m for m in args.models.split(",") if m]:
        got = {v: first_call(model, v, args.device, args.dtype, args.train) for v in variants}
        key = "first_step_s" if args.train else "first_call_s"
        line = "  ".join(f"{v} {r.get(key, float('nan')):.2f} s" if "error" not in r
                         else f"{v} error: {r['error']!r}" for v, r in got.items())
        ratio = ""
        if all(key in got.get(v, {}) for v in ("ours", "inductor")):
            ratio = f"  ours/inductor {got['ours'][key] / got['inductor'][key]:.2f}"
        print(f"{model:<10} {line}{ratio}", flush=True)
        for v, r in got.items():
            print(f"    {v}: {json.dumps({k: r.get(k) for k in (key, 'triton_compiles', 'ms', 'peak_mb')})}")


if __name__ == "__main__":
    main()
