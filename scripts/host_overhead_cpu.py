"""Per-call host overhead of compiled Hugging Face models, measured where it dominates: on the CPU
with tiny widths (the kernels cost little, so what differs between variants is the Python around
them: guards, input checks, the wrapper's calls, the optimizer's bookkeeping).

    python scripts/host_overhead_cpu.py --models resnet,bert,gpt2 --mode inference
    python scripts/host_overhead_cpu.py --models resnet --mode training
    python scripts/host_overhead_cpu.py --models llama --mode inference --variants eager,ours,ours_backend

A proxy for the GPU machine's host, not a speed figure of the GPU: the models keep their real depth
(ResNet-50's 16 blocks, 12 transformer layers) with widths of 8-16, so a call has as many
kernels, guards and parameters as the real model. Variants run in turns (`--rounds` rounds of
`--calls` calls), medians per call; inference under torch.no_grad, training as forward /
backward / AdamW step phases.
"""
import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build(name):
    import torch
    import transformers as T
    torch.manual_seed(0)
    if name == "resnet":
        model = T.ResNetForImageClassification(T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 8, 8, 8],
                                                              num_labels=10))
        return model, {"pixel_values": torch.randn(2, 3, 16, 16), "labels": torch.tensor([1, 2])}
    if name == "bert":
        model = T.BertForSequenceClassification(T.BertConfig(
            hidden_size=16, num_hidden_layers=12, num_attention_heads=2, intermediate_size=32, vocab_size=64,
            max_position_embeddings=32, num_labels=2))
        return model, {"input_ids": torch.randint(0, 64, (2, 8)), "labels": torch.tensor([0, 1])}
    if name == "gpt2":
        model = T.GPT2LMHeadModel(T.GPT2Config(n_embd=16, n_layer=12, n_head=2, vocab_size=64, n_positions=32))
        ids = torch.randint(0, 64, (2, 16))
        return model, {"input_ids": ids, "labels": ids}
    if name == "llama":        # a forward behind a decorator's wrapper (transformers' deprecate_kwarg)
        model = T.LlamaForCausalLM(T.LlamaConfig(hidden_size=16, num_hidden_layers=8, num_attention_heads=2,
                                                 num_key_value_heads=2, intermediate_size=32, vocab_size=64))
        ids = torch.randint(0, 64, (2, 16))
        return model, {"input_ids": ids, "labels": ids}
    if name == "vit":
        model = T.ViTForImageClassification(T.ViTConfig(hidden_size=16, num_hidden_layers=12, num_attention_heads=2,
                                                         intermediate_size=32, image_size=32, patch_size=8,
                                                         num_labels=10))
        return model, {"pixel_values": torch.randn(2, 3, 32, 32), "labels": torch.tensor([1, 2])}
    raise SystemExit(f"unknown model {name!r}: choose from resnet, bert, gpt2, llama, vit")


def variant(name, model, training):
    import torch
    from tracetorch import compiler
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if training else None
    if name == "eager":
        return model, opt.step if opt else None
    if name == "ours":
        return compiler.compile(model), compiler.compile(opt.step) if opt else None
    if name == "ours_backend":
        return torch.compile(model, backend=compiler.backend), None if not opt else compiler.compile(opt.step)
    if name == "inductor":
        return torch.compile(model), torch.compile(opt.step) if opt else None
    raise SystemExit(f"unknown variant {name!r}: choose from eager, ours, ours_backend, inductor")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet,bert,gpt2")
    p.add_argument("--variants", default="eager,ours,ours_backend,inductor")
    p.add_argument("--mode", choices=["inference", "training"], default="inference")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=30)
    args = p.parse_args(argv)
    import torch
    training = args.mode == "training"
    for name in args.models.split(","):
        base, inputs = build(name)
        runs = {}
        for v in args.variants.split(","):
            model = copy.deepcopy(base).train(training)
            runs[v] = (model,) + variant(v, model, training)

        def call(v):
            model, fn, step = runs[v]
            if not training:
                with torch.no_grad():
                    fn(**inputs)
                return (0.0, 0.0, 0.0)
            t0 = time.perf_counter()
            out = fn(**inputs)
            t1 = time.perf_counter()
            out.loss.backward()
            t2 = time.perf_counter()
            step()
            t3 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            return (t1 - t0, t2 - t1, t3 - t2)

        for v in runs:
            for _ in range(3):
                call(v)
        times = {v: [] for v in runs}
        for _ in range(args.rounds):
            for v in runs:
                t0 = time.perf_counter()
                phases = [call(v) for _ in range(args.calls)]
                wall = (time.perf_counter() - t0) / args.calls
                times[v].append((wall,) + tuple(statistics.median(ph[i] for ph in phases) for i in range(3)))
        for v, rows in times.items():
            wall, fw, bw, op = (statistics.median(r[i] for r in rows) * 1e3 for i in range(4))
            extra = f"  forward {fw:6.2f}  backward {bw:6.2f}  optimizer {op:6.2f}" if training else ""
            print(f"{name:7s} {args.mode:9s} {v:13s} {wall:7.3f} ms per call{extra}", flush=True)


if __name__ == "__main__":
    main()
