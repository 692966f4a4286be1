"""Real models at realistic sizes (Hugging Face `transformers` and `timm`, random weights, no
downloads), measured side by side in one process: eager, torch.compile/inductor, ours through
compiler.compile (default and mode="reduce-overhead", i.e. CUDA graphs) and ours as a
torch.compile backend. Per model and variant: first call (cold compile) time, median call time,
peak memory, max relative error against eager, and how many graphs ran eagerly as a whole (a
fallback is a loud row, never a silent one).

    python scripts/bench_real_models.py --device cuda --dtype bfloat16 \
        --out scripts/results/real_models_h100_bf16
    python scripts/bench_real_models.py --only gpt2,bert --variants eager,ours,ours_ro

Timings are medians of --repeat synchronised calls after warm-up, with CUDA events on the GPU.
Each variant compiles into empty on-disk caches of its own (Triton's, inductor's, ours), so its
first call is a cold compile; --warm-caches keeps the usual folders.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import harness  # noqa: E402


# -- the models ---------------------------------------------------------------------------------
def _hf(config_name, model_name, batch, seq, vocab, seq2seq=False, **cfg):
    def build():
        import transformers
        config = getattr(transformers, config_name)(**cfg)
        config.use_cache = False
        return getattr(transformers, model_name)(config)

    def inputs(device):
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        # encoder-decoders are called with keywords, as training loops and generate() call them
        return {"input_ids": ids, "decoder_input_ids": ids} if seq2seq else (ids,)
    return build, inputs


def _call(fn, inputs):
    return fn(**inputs) if isinstance(inputs, dict) else fn(*inputs)


def _timm(name, batch, size=224):
    def build():
        import timm
        return timm.create_model(name, pretrained=False)

    def inputs(device, dtype=None):
        return (torch.randn(batch, 3, size, size, device=device),)
    return build, inputs


MODELS = {
    "gpt2": _hf("GPT2Config", "GPT2LMHeadModel", 4, 512, 50257),
    "bert": _hf("BertConfig", "BertModel", 8, 384, 30522),
    "llama8": _hf("LlamaConfig", "LlamaForCausalLM", 4, 512, 32000, hidden_size=1024,
                  intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                  num_key_value_heads=8, max_position_embeddings=1024),
    "resnet50": _timm("resnet50", 32),
    "vit_b16": _timm("vit_base_patch16_224", 32),
    "convnext_t": _timm("convnext_tiny", 32),
    "t5_small": _hf("T5Config", "T5ForConditionalGeneration", 8, 256, 32128, seq2seq=True),
}
VARIANTS = ("eager", "inductor", "inductor_ro", "ours", "ours_ro", "ours_backend", "ours_cl", "ours_ro_cl",
            "ours_combo")
#: variants that are another variant under a config change (the config holds for the whole
#: variant: compiling happens at its first call)
VARIANT_CONFIG = {"ours_cl": ("ours", {"backend.conv_layout": "auto"}),
                  "ours_ro_cl": ("ours_ro", {"backend.conv_layout": "auto"}),
                  "ours_combo": ("ours", {"backend.combo_kernels": True})}
DEFAULT_VARIANTS = ("eager", "inductor", "ours", "ours_ro", "ours_backend")


#: a relative error against eager above this is a wrong result, not bf16 rounding (a row that
#: fails loudly): bf16 models land near 1e-2
WRONG_REL_ERR = 0.1


def _main_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state"):
        if hasattr(out, key):
            return getattr(out, key)
    return out[0]


class VariantEvents(harness.EventCounter):
    """harness.EventCounter registered as a logs sink for one variant (close() removes it)."""

    #: events whose reason goes into the row (why CUDA graphs were not used, why a graph ran eagerly)
    REASONS = ("cudagraph_skipped", "cudagraph_disabled", "cudagraph_buckets_refused", "graph_runs_eagerly",
               "aot_runs_eagerly", "backward_recompiled")

    #: events whose timing fields are summed per variant (where a first call's seconds go):
    #: our backend per graph, Triton compiles in the worker pool (wall from submission to the
    #: last result, and the workers' own seconds), kernels the main process compiled itself
    TIMED = {"graph_compiled": ("seconds",), "aot_traced": ("seconds",),
             "triton_precompile_done": ("wall_s", "worker_compile_s", "compiled_in_main")}

    def __init__(self):
        super().__init__()
        self.reasons: list[str] = []
        self.timings: dict[str, float] = {}
        from tracetorch import logs
        self._logs = logs
        self._sink = logs.add_sink(self, level=logging.INFO)

    def __call__(self, event):
        super().__call__(event)
        for field in self.TIMED.get(event.name, ()):
            key = f"{event.name}.{field}"
            self.timings[key] = round(self.timings.get(key, 0) + float(event.fields.get(field) or 0), 3)
        if event.name in self.REASONS and len(self.reasons) < 4:
            self.reasons.append(f"{event.name}: {event.fields.get('reason', '')}"[:200])

    def close(self):
        self._logs.remove_sink(self._sink)


def _variant(variant) -> tuple[str, dict]:
    """(the variant it runs as, the config it runs under) for a name of VARIANTS."""
    return VARIANT_CONFIG.get(variant, (variant, {}))


def _compiled(variant, model):
    variant = _variant(variant)[0]
    if variant == "eager":
        return model
    if variant == "inductor":
        return torch.compile(model)
    if variant == "inductor_ro":
        return torch.compile(model, mode="reduce-overhead")
    from tracetorch import compiler
    if variant == "ours":
        return compiler.compile(model)
    if variant == "ours_ro":
        return compiler.compile(model, mode="reduce-overhead")
    if variant == "ours_backend":
        return torch.compile(model, backend=compiler.backend)
    raise ValueError(variant)


_sync = harness.sync


def _time(fn, device, repeat):
    times = []
    for _ in range(repeat):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _profile(name, variant, fn, inputs, args):
    """torch.profiler over 5 calls: launches per call, device time, and the top ops/kernels."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(5):
            _call(fn, inputs)
        _sync(args.device)
    sort = "self_cuda_time_total" if args.device == "cuda" else "self_cpu_time_total"
    print(f"--- profile {name} {variant} (5 calls) ---")
    print(prof.key_averages().table(sort_by=sort, row_limit=args.profile_rows, max_name_column_width=60))


@contextlib.contextmanager
def _first_call_profile(args, name, variant):
    """With --cprofile-first N: cProfile around one of our variants' first call (the cold
    compile), printing its N costliest functions by cumulative and by own time."""
    if not (args.cprofile_first and variant.startswith("ours")):
        yield
        return
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        for order in ("cumulative", "tottime"):
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats(order).print_stats(args.cprofile_first)
            print(f"--- cProfile {name} {variant} first call, by {order} ---")
            print("\n".join(line[:200] for line in text.getvalue().splitlines()[4:]), flush=True)


def _caches(args):
    """Each variant's own empty on-disk caches (harness.cold_caches), unless --warm-caches: its
    first call is a cold compile, whatever ran before it on this machine or in this run."""
    return contextlib.nullcontext() if args.warm_caches else harness.cold_caches()


def _fresh_variant(device) -> "VariantEvents":
    """Before each variant: both compilers' caches emptied, memory freed and the peak counter
    reset; returns the counter of our compiler's events for this variant."""
    torch._dynamo.reset()
    from tracetorch import compiler
    compiler.reset()
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return VariantEvents()


def _compile_stats() -> dict:
    """Counters of what our first calls spend: Triton kernels compiled by the main process itself
    vs by the worker pool, seconds waited for the pool, autotuning sweeps and their seconds."""
    from tracetorch.compiler.backend import autotune
    from tracetorch.compiler.backend.runtime import triton_compile
    return {**{k: triton_compile.STATS[k] for k in ("in_process", "precompiled", "cancelled", "waited_s",
                                                     "key_mismatch", "not_submitted")},
            **{"autotune_" + k: v for k, v in autotune.STATS.items()}}


def _since(before: dict) -> dict:
    """The counters' growth since `before`, with what differed in the latest worker binaries that
    were not this process's (key_mismatch: the setting to send the workers)."""
    from tracetorch.compiler.backend.runtime import triton_compile
    out = {k: round(v - before[k], 2) for k, v in _compile_stats().items()}
    if out["key_mismatch"]:
        out["key_mismatch_examples"] = list(triton_compile.MISMATCHES)[-3:]
    return out


def _measure(row, name, variant, model, inputs, reference, counter, args) -> None:
    """Fill `row` for one inference variant: first call, Triton compiles, error against eager,
    median time, peak memory and the compiler's events (a partial row survives an exception)."""
    fn = _compiled(variant, model)
    before = _compile_stats()
    with torch.no_grad():
        with _first_call_profile(args, name, variant):
            t0 = time.perf_counter()
            out = _call(fn, inputs)
            _sync(args.device)
            row["first_call_s"] = round(time.perf_counter() - t0, 3)
        row["triton_compiles"] = _since(before)
        row["first_call_timings"] = dict(counter.timings)
        for _ in range(3):                       # warm-up (CUDA graphs record on the 2nd)
            out = _call(fn, inputs)
        if variant.startswith("ours"):        # (our compiled calls' checks; inductor has its own)
            row["native_checks"] = harness.native_checks_ready()
        got = _main_tensor(out).float()
        row["rel_err"] = float((got - reference).norm() / reference.norm().clamp_min(1e-12))
        row["ms"] = round(_time(lambda: _call(fn, inputs), args.device, args.repeat), 3)
        if args.profile:
            _profile(name, variant, fn, inputs, args)
    if args.device == "cuda":
        row["peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    row["graphs_run_eagerly"] = counter.get("graph_runs_eagerly", "aot_runs_eagerly")
    row["graphs"] = counter.get("graph_compiled") + row["graphs_run_eagerly"]
    row["cudagraph_records"] = counter.get("cudagraph_record")
    if counter.reasons:
        row["reasons"] = counter.reasons
    if row.get("rel_err", 0) > WRONG_REL_ERR:
        row["error"] = f"wrong result: relative error {row['rel_err']:.3g} against eager"


def build_real(name, device, dtype):
    """(model `name` in eval mode on `device` in `dtype`, its inputs with float tensors in `dtype`),
    from seed 0: what every script measuring a real model runs."""
    build, make_inputs = MODELS[name]
    torch.manual_seed(0)
    model = build().to(device).eval()
    if dtype != torch.float32:
        model = model.to(dtype)
    inputs = make_inputs(device)
    if not isinstance(inputs, dict):
        inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    return model, inputs


def run_model(name, args):
    model, inputs = build_real(name, args.device, getattr(torch, args.dtype))
    with torch.no_grad():
        reference = _main_tensor(_call(model, inputs)).float()
    rows = {}
    from tracetorch.compiler import config
    for variant in args.variants:
        counter = _fresh_variant(args.device)
        row = {}
        try:
            with _caches(args), config.patch(_variant(variant)[1]):
                _measure(row, name, variant, model, inputs, reference, counter, args)
        except Exception as e:       # one variant failing is a row, not the end of the run
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        finally:
            counter.close()
        rows[variant] = row
        print(f"  {name:<11} {variant:<13} {json.dumps(row)}", flush=True)
    del model
    return rows


# -- training ----------------------------------------------------------------------------------
TRAIN_MODELS = ("gpt2", "vit_s16", "resnet50")
MODELS.setdefault("vit_s16", _timm("vit_small_patch16_224", 32))


def _loss(name, model, inputs):
    """A scalar training loss: the LM loss with labels for decoders, cross-entropy on random
    classes for classifiers (fixed by the seed, the same for every variant)."""
    if name in ("gpt2", "llama8"):
        return model(input_ids=inputs[0], labels=inputs[0]).loss
    out = _main_tensor(model(*inputs))
    target = torch.randint(0, out.shape[-1], (out.shape[0],), device=out.device,
                           generator=torch.Generator(out.device).manual_seed(0))
    return torch.nn.functional.cross_entropy(out.float(), target)


def _autocast(dtype_name, inputs):
    """torch.autocast around the forward and loss (mixed precision training), or nothing."""
    import contextlib
    if not dtype_name:
        return contextlib.nullcontext()
    first = inputs[0] if isinstance(inputs, tuple) else next(iter(inputs.values()))
    return torch.autocast(first.device.type, dtype=getattr(torch, dtype_name))


def _train_step_fn(variant, name, model, opt, autocast=None, part="both"):
    """One training step (forward, backward, optimizer step) for a variant; the optimizer step is
    compiled by the same compiler as the model. `autocast`: a dtype name for torch.autocast
    around the forward and loss (weights and optimizer stay float32). `part`: what is compiled,
    "both", "model" (the optimizer step stays eager) or "optimizer" (the model stays eager)."""
    fwd, step = model, opt.step
    model_too, step_too = part != "optimizer", part != "model"
    if variant in ("inductor", "inductor_ro"):
        # reduce-overhead: CUDA graphs for the model's forward and backward (cudagraph trees)
        # and for the optimizer step
        if model_too:
            fwd = torch.compile(model, mode="reduce-overhead" if variant == "inductor_ro" else None)
        if step_too:   # (reduce-overhead: the optimizer's update graph is recorded too)
            step = torch.compile(opt.step, mode="reduce-overhead" if variant == "inductor_ro" else None)
    elif variant in ("ours", "ours_ro", "ours_backend"):
        from tracetorch import compiler
        if model_too:
            fwd = torch.compile(model, backend=compiler.backend) if variant == "ours_backend" else \
                compiler.compile(model, mode="reduce-overhead" if variant == "ours_ro" else None)
        if step_too:
            step = compiler.compile(opt.step, mode="reduce-overhead" if variant == "ours_ro" else None)
    elif variant != "eager":
        raise ValueError(f"variant {variant} has no training mode")

    def run(inputs):
        with _autocast(autocast, inputs):
            loss = _loss(name, fwd, inputs)
        loss.backward()
        step()
        opt.zero_grad(set_to_none=True)
        return loss
    run.phases = (fwd, step, autocast)      # for --phases
    return run


def _phase_ms(name, run, opt, inputs, device, steps=10) -> dict:
    """Median wall ms of each phase of a training step (forward with the loss, backward,
    optimizer step with zero_grad), each synchronised: where a variant's step time goes."""
    fwd, step, autocast = run.phases

    def forward(_):
        with _autocast(autocast, inputs):
            return _loss(name, fwd, inputs)

    def optimizer():
        step()
        opt.zero_grad(set_to_none=True)
    walls = harness.phase_walls_ms(forward, optimizer, device, steps)
    return {k: round(v, 3) for k, v in walls.items()}


def run_training(name, args):
    """fp32 weights, TF32 matmuls, AdamW; each variant from the same initial weights."""
    build, make_inputs = MODELS[name]
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    base = build().to(args.device).train()
    state = {k: v.clone() for k, v in base.state_dict().items()}
    inputs = make_inputs(args.device)
    rows, ref_loss, ref_last = {}, None, None
    for variant in [v for v in args.variants if v in ("eager", "inductor", "inductor_ro", "ours", "ours_ro",
                                                      "ours_backend")]:
        base.load_state_dict(state)
        opt = torch.optim.AdamW(base.parameters(), lr=1e-4)
        counter = _fresh_variant(args.device)
        row = {}
        with _caches(args):     # its own empty on-disk caches: the first step is a cold compile
            try:
                step = _train_step_fn(variant, name, base, opt, args.autocast)
                before = _compile_stats()
                # every variant draws its dropout masks from the same generator state: variants
                # with the same random ops (ours and ours_ro) take the very same steps
                torch.manual_seed(1)
                with _first_call_profile(args, name, variant):
                    t0 = time.perf_counter()
                    first = float(step(inputs))
                    _sync(args.device)
                    row["first_step_s"] = round(time.perf_counter() - t0, 3)
                row["triton_compiles"] = _since(before)
                row["first_step_timings"] = dict(counter.timings)
                ref_loss = first if variant == "eager" else ref_loss
                if ref_loss is not None:
                    row["first_loss_rel_err"] = abs(first - ref_loss) / max(abs(ref_loss), 1e-12)
                for _ in range(2):
                    step(inputs)
                if variant.startswith("ours"):
                    row["native_checks"] = harness.native_checks_ready()
                row["ms"] = round(_time(lambda: step(inputs), args.device, args.repeat), 3)
                if args.device == "cuda":
                    row["peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
                row["graphs_run_eagerly"] = counter.get("graph_runs_eagerly", "aot_runs_eagerly")
                if args.phases:
                    row["phase_ms"] = _phase_ms(name, step, opt, inputs, args.device)
                if args.profile:        # whole training steps: forward, backward and optimizer kernels
                    _profile(name, variant, lambda *_: step(inputs), (), args)
                if args.device == "cuda":   # CUDA graphs keep their memory in pools of their own
                    row["peak_reserved_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
                # every variant has taken the same steps on the same batch: the losses must agree
                # (steps that replayed CUDA graphs included, not just the first one)
                last = float(step(inputs).detach())
                row["last_loss"] = last
                ref_last = last if variant == "eager" else ref_last
                if ref_last is not None:
                    row["last_loss_rel_err"] = abs(last - ref_last) / max(abs(ref_last), 1e-12)
                if counter.reasons:         # every step's, as an inference row's (a recompiled backward, ...)
                    row["reasons"] = counter.reasons
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            finally:
                counter.close()
        rows[variant] = row
        print(f"  train {name:<9} {variant:<13} {json.dumps(row)}", flush=True)
    return rows


def _drifted(row) -> bool:
    """Training steps that start as eager's and end elsewhere: a state update went wrong (a model
    with dropout whose masks differ from eager's already differs at the first step)."""
    first, last = row.get("first_loss_rel_err"), row.get("last_loss_rel_err")
    return first is not None and last is not None and first < 1e-4 and last > 1e-3


def table(results, variants) -> str:
    """Times per variant, then inductor's time over each of our variants' (above 1: we are faster)."""
    ours = [v for v in variants if v.startswith("ours")]
    # like against like: CUDA graphs (reduce-overhead) against inductor's, when both were run
    pairs = [("inductor", v) for v in ours] + \
        [("inductor_ro", "ours_ro")] * ("inductor_ro" in variants and "ours_ro" in variants)
    head = ["model", *[f"{v} ms" for v in variants], *[f"{'ind' if i == 'inductor' else i}/{v}" for i, v in pairs]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def speed(r, i, v):
        ind, mine = r.get(i, {}), r.get(v, {})
        return f"{ind['ms'] / mine['ms']:.2f}" if "ms" in ind and "ms" in mine else "-"
    for name, r in results.items():
        cells = [name] + [str(r.get(v, {}).get("ms", r.get(v, {}).get("error", "-")))[:24] for v in variants]
        cells += [speed(r, i, v) for i, v in pairs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + cold_table(results, variants)


def cold_table(results, variants) -> str:
    """First call (training: first step) seconds per variant, and each of ours over inductor's
    (below 1: we compile faster; the goal is 0.5 or less)."""
    ours = [v for v in variants if v.startswith("ours")] if "inductor" in variants else []
    head = ["model", *[f"{v} first s" for v in variants], *[f"{v}/inductor" for v in ours]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def first(row):
        return row.get("first_call_s", row.get("first_step_s"))
    for name, r in results.items():
        cells = [name] + [str(first(r.get(v, {})) or "-") for v in variants]
        ind = first(r.get("inductor", {}))
        cells += [f"{first(r[v]) / ind:.2f}" if ind and first(r.get(v, {})) else "-" for v in ours]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    harness.add_device_dtype_args(p, dtype="bfloat16")
    p.add_argument("--only", default="", help=f"comma-separated models (default all: {', '.join(MODELS)})")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"comma-separated: {', '.join(VARIANTS)}")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--out", default=None, help="write <out>.json and <out>.md")
    p.add_argument("--profile", action="store_true",
                   help="print a torch.profiler table per variant (with --train: of whole training steps)")
    p.add_argument("--train", action="store_true",
                   help=f"time training steps instead (fp32/TF32, AdamW; default models {', '.join(TRAIN_MODELS)})")
    p.add_argument("--profile-rows", type=int, default=12)
    p.add_argument("--phases", action="store_true",
                   help="with --train: also each phase's median wall ms (forward, backward, optimizer)")
    p.add_argument("--autocast", default=None, choices=("bfloat16", "float16"),
                   help="with --train: mixed precision, torch.autocast to this dtype around the forward")
    p.add_argument("--cprofile-first", type=int, default=0, metavar="N",
                   help="cProfile our variants' first call (cold compile); print the N costliest functions")
    p.add_argument("--warm-caches", action="store_true",
                   help="keep the on-disk caches (Triton's, inductor's, ours); by default the run uses "
                        "empty ones of its own, so that first calls are cold compiles")
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(TRAIN_MODELS if args.train else
                                                          [m for m in MODELS if m != "vit_s16"])
    args.variants = [v for v in args.variants.split(",") if v]
    bad = [n for n in names if n not in MODELS] + [v for v in args.variants if v not in VARIANTS]
    if bad:
        p.error(f"unknown model or variant {bad}; models: {', '.join(MODELS)}; variants: {', '.join(VARIANTS)}")
    card = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    mixed = f", autocast {args.autocast}" if args.autocast else ""
    print(f"bench_real_models: {card}, torch {torch.__version__}, "
          f"{'training, float32 with TF32' + mixed if args.train else args.dtype}", flush=True)
    results = {}
    for name in names:
        try:
            results[name] = run_training(name, args) if args.train else run_model(name, args)
        except Exception as e:
            results[name] = {"error": {"error": f"{type(e).__name__}: {e}"[:300]}}
            print(f"  {name}: {results[name]}", flush=True)
    md = table(results, args.variants)
    print(md)
    loud = [f"{m} {v}: " + (r.get("error") or f"{r['graphs_run_eagerly']} graph(s) ran eagerly as a whole")
            for m, rows in results.items() for v, r in rows.items()
            if v.startswith("ours") and (r.get("error") or r.get("graphs_run_eagerly"))]
    loud += [f"{m} {v}: WRONG: the first step's loss matched eager's (rel err {r['first_loss_rel_err']:.1e}) "
             f"but the last one's is off by {r['last_loss_rel_err']:.1e}"
             for m, rows in results.items() for v, r in rows.items() if _drifted(r)]
    for line in loud:
        print(f"bench_real_models: FALLBACK OR ERROR: {line}", file=sys.stderr)
    if args.out:
        what = ("training steps, float32 weights with TF32"
                + (f", autocast {args.autocast}" if args.autocast else "")) if args.train else args.dtype
        # (training ignores --dtype: the weights are float32, so the record says what ran)
        Path(args.out + ".json").write_text(json.dumps({"card": card, "torch": torch.__version__,
                                                        "dtype": what, "results": results}, indent=1))
        Path(args.out + ".md").write_text(f"# real models, {card}, {what}\n\n{md}\n")
    return 1 if loud else 0


if __name__ == "__main__":
    sys.exit(main())
