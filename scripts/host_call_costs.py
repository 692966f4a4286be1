"""Host (CPU) time of the calls our output code makes, against the alternatives it could make.

    python scripts/host_call_costs.py --device cuda

A diagnostic for the per-call overhead of compiled models: each line is the median over rounds
of microseconds per call, measured without synchronizing inside the loop on tensors small
enough that the device keeps up (so the host's work is what is timed). Compares:
  - an extern matmul through its OpOverload (aten.addmm.default) and through torch's generated
    Python binding (torch.addmm), which the output code uses (codegen/wrapper.RUNTIME_NAMES);
  - a view of a buffer through torch.as_strided and through the Tensor method the output code
    uses (codegen/wrapper.fmt_arg);
  - attention through F.scaled_dot_product_attention (torch chooses the kernel at each call, as
    our tracetorch::sdpa node does) and through the chosen ATen kernel directly.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def per_call_us(fn, device, calls=3000, rounds=5) -> float:
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    for _ in range(200):
        fn()
    sync()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
        sync()
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args(argv)
    import torch.nn.functional as F
    aten = torch.ops.aten
    dev, dt = args.device, getattr(torch, args.dtype)
    b = torch.randn(64, device=dev, dtype=dt)
    x = torch.randn(8, 64, device=dev, dtype=dt)
    w = torch.randn(64, 64, device=dev, dtype=dt)
    rows = [
        ("aten.addmm.default (OpOverload)", lambda: aten.addmm.default(b, x, w)),
        ("torch.addmm (Python binding)", lambda: torch.addmm(b, x, w)),
        ("torch.as_strided(w, ..., w.storage_offset())", lambda: torch.as_strided(w, (64, 64), (1, 64),
                                                                                  w.storage_offset())),
        ("w.as_strided(..., 0)", lambda: w.as_strided((64, 64), (1, 64), 0)),
        ("empty_strided", lambda: torch.empty_strided((8, 64), (64, 1), device=dev, dtype=dt)),
    ]
    q = torch.randn(1, 12, 197, 64, device=dev, dtype=dt)
    rows.append(("F.scaled_dot_product_attention 1x12x197x64", lambda: F.scaled_dot_product_attention(q, q, q)))
    if dev == "cuda":
        rows.append(("aten._scaled_dot_product_cudnn_attention",
                     lambda: aten._scaled_dot_product_cudnn_attention.default(q, q, q, None, False)))
        rows.append(("torch._fused_sdp_choice", lambda: torch._fused_sdp_choice(q, q, q)))
    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    print(f"| call ({name}, {args.dtype}) | host us per call |\n|---|---|")
    for label, fn in rows:
        print(f"| {label} | {per_call_us(fn, dev):.2f} |")


if __name__ == "__main__":
    main()
