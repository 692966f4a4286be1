"""Triton launches per training step of a bench model, counted on the CPU.

A host-bound GPU step costs about its launch count times the host cost of one launch, so the
count is the number to move when the GPU is not at hand. The model runs at the bench's real sizes
(scripts/bench_real_models.py) through compiler.compile with the Triton code generator on CPU
tensors as for CUDA (harness.AS_ON_CUDA: channels-last convolutions, biases in our kernels), but no
kernel is run: each launch is counted instead (structure only; the outputs are garbage). ATen
calls (matmuls, convolutions) still run on the CPU, so a step takes seconds to minutes.

    python scripts/launch_counts.py resnet50
    python scripts/launch_counts.py gpt2 --config backend.renest_fusion=on --top 10

Prints the forward's and the backward's launches and the most launched kernel kinds (a kernel's
name without its number). Needs timm for the vision models, transformers for the others.
"""
import argparse
import collections
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import bench_real_models as bench, harness  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(bench.MODELS))
    p.add_argument("--config", action="append", default=[], metavar="SECTION.OPTION=VALUE",
                   help="a compiler config setting for the run (repeatable)")
    p.add_argument("--top", type=int, default=8, help="kernel kinds listed per graph")
    args = p.parse_args(argv)
    import torch
    from tracetorch import compiler

    from tracetorch.compiler import config
    opts = {}
    for kv in args.config:
        key, sep, value = kv.partition("=")
        section, _, name = key.partition(".")
        if not sep or name not in config.SECTIONS.get(section, {}):
            p.error(f"--config {kv!r}: expected SECTION.OPTION=VALUE with an option of compiler/config.py")
        try:   # typed as the environment variable's text is (TRACE_<SECTION>_<OPTION>)
            opts[key] = config.parse_text(section, name, value, f"--config {key}")
        except config.ConfigError as e:
            p.error(str(e))
    torch.manual_seed(0)
    build, make_inputs = bench.MODELS[args.model]
    model = build().train()
    inputs = make_inputs("cpu")
    counts = collections.Counter()
    with harness.kernels_not_run(lambda launcher: counts.update([launcher.name]), **opts):
        out = bench._main_tensor(bench._call(compiler.compile(model), inputs))
        forward = dict(counts)
        counts.clear()
        out.float().sum().backward()
        backward = dict(counts)
    for name, launched in (("forward", forward), ("backward", backward)):
        kinds = collections.Counter()
        for kernel, n in launched.items():
            kinds[re.sub(r"^(combo_)?kernel\d+_?", r"\1", kernel) or kernel] += n
        top = ", ".join(f"{k} {n}" for k, n in kinds.most_common(args.top))
        print(f"{args.model} {name}: {sum(launched.values())} launches ({top})", flush=True)


if __name__ == "__main__":
    main()
