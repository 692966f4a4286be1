"""Which attention kernel does each compiled scaled_dot_product_attention call run, and why?

    python scripts/sdpa_choices.py t5_small --device cuda --dtype bfloat16

Compiles a real model of scripts/bench_real_models.py with compiler.compile, then records, for
every attention call the output code makes, the inputs' sizes, strides and dtypes and ATen's
backend choice on those real tensors (torch._fused_sdp_choice: 0 math, 1 flash, 2 efficient,
3 cuDNN, ...), beside the compile-time decisions logged by compiler/aot/decompose.py
(sdpa_math_path_traced, sdpa_choice_not_probed). Also times one attention of the model's first
call's shapes with a boolean mask and with the same mask made additive. A diagnostic.
"""
import argparse
import collections
import gc
import logging
import sys
import time
import types
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def _describe(t):
    if t is None:
        return "None"
    return f"{tuple(t.shape)}{tuple(t.stride())}:{str(t.dtype).removeprefix('torch.')}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    args = p.parse_args(argv)

    import torch
    from bench_real_models import build_real
    from tracetorch import compiler, logs
    torch.manual_seed(0)
    model, inputs = build_real(args.model, args.device, getattr(torch, args.dtype))
    call = (lambda f: f(**inputs)) if isinstance(inputs, dict) else (lambda f: f(*inputs))
    compiled = compiler.compile(model)
    names = {"sdpa_math_path_traced", "sdpa_choice_not_probed", "sdpa_choice"}
    with logs.testing.capture(names=names, level=logging.DEBUG, artifacts=None) as decisions, torch.no_grad():
        call(compiled)
    seen = collections.Counter()
    first = []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
        choice = int(torch._fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale=scale))
        seen[(choice, _describe(q), _describe(k), _describe(mask), is_causal)] += 1
        if not first:
            first.append((q, k, v, mask, dropout_p, is_causal, scale))
        return real_sdpa(q, k, v, mask, dropout_p, is_causal, scale=scale, **kw)

    # the output code calls the name it imported: swap it in its namespaces only, for this run
    # (the namespaces of the output code's `call` functions)
    with warnings.catch_warnings():     # gc's objects include deprecated module attributes
        warnings.simplefilter("ignore")
        patched = [f for f in gc.get_objects() if isinstance(f, types.FunctionType)]
    patched = {id(f.__globals__): f.__globals__ for f in patched
               if f.__name__ == "call"
               and f.__globals__.get("scaled_dot_product_attention") is real_sdpa
               and "tracetorch output code" in (f.__globals__.get("__doc__") or "")}.values()
    for ns in patched:
        ns["scaled_dot_product_attention"] = recording
    try:
        with torch.no_grad():
            call(compiled)
    finally:
        for ns in patched:
            ns["scaled_dot_product_attention"] = real_sdpa
    out = [f"{args.model}: {len(patched)} output modules, compile-time decisions: "
           f"{collections.Counter(ev.name for ev in decisions)}"]
    probes = collections.Counter(f"{ev.name} {ev.fields.get('choice', '')} {ev.fields.get('reason', '')} "
                                 f"{ev.fields.get('inputs', '')}" for ev in decisions)
    out += [f"  compile time x{n:3d} {what}" for what, n in probes.items()]
    for (choice, q, k, mask, causal), n in sorted(seen.items(), key=lambda kv: -kv[1]):
        out.append(f"  x{n:3d} choice {choice}  q {q}  k {k}  mask {mask}  causal {causal}")
    if first and first[0][3] is not None and first[0][3].dtype == torch.bool:
        q, k, v, mask, dp, causal, scale = first[0]
        additive = torch.zeros(mask.shape, dtype=q.dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
        for name, m in (("bool mask", mask), ("additive mask", additive)):
            for _ in range(3):
                real_sdpa(q, k, v, m, dp, causal, scale=scale)
            if args.device == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(50):
                real_sdpa(q, k, v, m, dp, causal, scale=scale)
            if args.device == "cuda":
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t) / 50 * 1e3
            choice = int(torch._fused_sdp_choice(q, k, v, m, dp, causal, scale=scale))
            out.append(f"  one attention, {name}: {ms:.4f} ms per call, choice {choice}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
