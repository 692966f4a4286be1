"""Kernels and the memory plan's peak of each graph our compiler makes for a real model's training
step (or inference call, --mode inference), on any device: what a scheduling change does to the
kernel count and to the memory held, checked on the CPU before a GPU measures its time.

    python scripts/graph_census.py --models gpt2,vit_s16,resnet50 --batch 4
    python scripts/graph_census.py --models gpt2 --batch 2 --seq 256 --config backend.pad_gemm=always

The models are scripts/bench_real_models.py's (Hugging Face and timm, random weights, seed 0) with
the batch (and sequence length) cut to what the CPU runs in seconds; the spatial sizes and widths
stay real, so every reduction has its real length. One training step runs through
compiler.compile (forward, loss, backward), and the backend's `scheduled` events give per graph:
kernels generated, steps (kernels and ATen calls), and `planned_peak_bytes`, the bytes the memory
plan keeps alive at its fullest step (scheduler/memory.planned_peak: inputs, kernel outputs, ATen
results; an estimate). Run it before and after a change, on the same arguments.

`--config key=value` sets compiler options for the run, e.g. backend.conv_layout=channels_last
and backend.pad_gemm=always to get on the CPU the layouts and padded products a CUDA training
graph gets (the defaults apply them on CUDA only).
"""
import argparse
import logging
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def _inputs(name, model_inputs, batch, seq):
    """The bench's inputs cut to `batch` rows (and `seq` tokens)."""
    if isinstance(model_inputs, dict):
        return {k: v[:batch, :seq] for k, v in model_inputs.items()}
    out = []
    for x in model_inputs:
        x = x[:batch]
        if x.dim() == 2 and not x.is_floating_point():
            x = x[:, :seq]
        out.append(x.contiguous())
    return tuple(out)


def _loss(name, model, inputs):
    """The training bench's loss (LM loss, or cross-entropy of a classifier's logits); for an
    encoder whose output is not [batch, classes] (BERT, T5), the mean square of that output."""
    from bench_real_models import TRAIN_MODELS, _call, _loss as bench_loss, _main_tensor
    if name in TRAIN_MODELS or name == "llama8":
        return bench_loss(name, model, inputs)
    out = _main_tensor(_call(model, inputs)).float()
    if out.dim() == 2:
        return torch.nn.functional.cross_entropy(out, torch.zeros(out.shape[0], dtype=torch.long, device=out.device))
    return out.pow(2).mean()


def census(name, args) -> list[dict]:
    from bench_real_models import build_real
    from tracetorch import compiler, logs
    from tracetorch.logs.testing import capture
    model, inputs = build_real(name, args.device, torch.float32)
    inputs = _inputs(name, inputs, args.batch, args.seq)
    compiler.reset()
    with capture(names={"scheduled"}, level=logging.INFO) as events:
        if args.mode == "inference":
            from bench_real_models import _call
            with torch.no_grad():
                _call(compiler.compile(model.eval()), inputs)
        else:
            loss = _loss(name, compiler.compile(model.train()), inputs)
            loss.backward()
    rows = []
    for k, e in enumerate(events):
        f = e.fields
        peak = f.get("planned_peak_bytes")
        rows.append({"model": name, "graph": k, "kernels": f["kernels"], "steps": f["steps"],
                     "planned_peak_mb": None if peak is None else round(peak / 1e6, 2)})
    logs.get_logger("scripts.graph_census").info("census_done", model=name, graphs=len(rows))
    return rows


def _config(pairs):
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep:
            raise SystemExit(f"--config takes key=value, got {p!r}")
        out[key] = value
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="gpt2,vit_s16,resnet50")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=512, help="tokens per row for language models")
    p.add_argument("--device", default="cpu")
    p.add_argument("--mode", choices=("training", "inference"), default="training",
                   help="a training step (forward and backward graphs) or one call under no_grad")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    from bench_real_models import MODELS
    from tracetorch.compiler import config
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}: choose from {', '.join(MODELS)}")
    try:
        # compiled afresh: a cache hit would skip the scheduling whose events this reads
        options = config.patch({"backend.cache_enabled": False, **_config(args.config)})
    except config.ConfigError as e:      # an unknown option or a bad value: say which, no traceback
        raise SystemExit(f"--config: {e}")
    torch.backends.cuda.matmul.allow_tf32 = True       # as the training bench sets it
    print("| model | graph | kernels | steps | planned peak MB |\n|---|---|---|---|---|")
    with options:
        for name in args.models.split(","):
            for r in census(name, args):
                print(f"| {r['model']} | {r['graph']} | {r['kernels']} | {r['steps']} | {r['planned_peak_mb']} |",
                      flush=True)


if __name__ == "__main__":
    main()
