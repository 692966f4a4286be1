"""The compiled optimizer step alone: ours vs inductor vs eager, AdamW over a real model's
parameters (timm ResNet-50, Hugging Face GPT-2) with random gradients, on the GPU.

    python scripts/bench_optimizer_step.py [--models resnet50,gpt2] [--rounds 3] [--steps 30] [--cprofile]

Variants run in turns (`--rounds` rounds of `--steps` synchronised steps each) so a drift of the
machine's speed hits them alike; prints each variant's median ms per step, and with --cprofile
the 22 most expensive functions (own time) of 20 of our steps: where the host time goes."""
import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _model(name):
    import torch
    torch.manual_seed(0)
    if name == "resnet50":
        import timm
        m = timm.create_model("resnet50", num_classes=1000)
    elif name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        m = GPT2LMHeadModel(GPT2Config())
    else:
        raise SystemExit(f"bench_optimizer_step: unknown model {name!r}; models: resnet50, gpt2")
    m = m.cuda()
    for p in m.parameters():
        p.grad = torch.randn_like(p)
    return m


def _ms(fn, n):
    import torch
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e3)
    return statistics.median(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet50,gpt2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--cprofile", action="store_true")
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("bench_optimizer_step: needs a CUDA GPU")
    from tracetorch import compiler
    for name in args.models.split(","):
        steps = {}
        for variant in ("eager", "inductor", "ours"):
            opt = torch.optim.AdamW(_model(name).parameters(), lr=1e-4)
            steps[variant] = {"eager": opt.step, "inductor": torch.compile(opt.step),
                              "ours": compiler.compile(opt.step)}[variant]
            for _ in range(3):
                steps[variant]()
        times = {v: [] for v in steps}
        for _ in range(args.rounds):
            for v, step in steps.items():
                times[v].append(_ms(step, args.steps))
        print(f"{name} ({torch.cuda.get_device_name()}): " + ", ".join(
            f"{v} {statistics.median(t):.3f} ms" for v, t in times.items()), flush=True)
        if args.cprofile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20):
                steps["ours"]()
            torch.cuda.synchronize()
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
            print(s.getvalue())


if __name__ == "__main__":
    main()
