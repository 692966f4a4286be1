"""One model of the suite, in its own process (run_suite.py launches this; see its docstring).

Writes one JSON row to --result-file. Accuracy follows PyTorch's benchmark harness: compare with a
float64 eager reference and accept the compiled result when its error is at most a small multiple of
eager's own error in the same dtype (plus a floor), so that a reordered sum is not called wrong.
"""

import contextlib
import copy
import json
import sys
import time
import traceback

import torch

import harness  # scripts/ is on sys.path in the worker

ERROR_MULTIPLIER = 3.0
ERROR_FLOOR = {torch.float32: 1e-5, torch.float64: 1e-9, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def flatten(value):
    """Tensors of an output in a fixed order (dicts by key, lists and tuples in order)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for k in sorted(value) for t in flatten(value[k])]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten(v)]
    if hasattr(value, "to_tuple"):  # transformers ModelOutput
        return flatten(value.to_tuple())
    return []


def to_double(value):
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(to_double(v) for v in value)
    return value


def rmse(a, b):
    return torch.sqrt(torch.mean((a.double() - b.double()) ** 2)).item()


def accuracy(result, eager, reference, dtype):
    """(accurate, worst detail) comparing result and eager against the float64 reference."""
    res, eag, ref = flatten(result), flatten(eager), flatten(reference)
    if not (len(res) == len(eag) == len(ref)):
        return False, f"output structure differs: {len(res)} vs {len(eag)} tensors"
    worst = ""
    for i, (r, e, f) in enumerate(zip(res, eag, ref)):
        if r.shape != e.shape:
            return False, f"output {i}: shape {tuple(r.shape)} vs eager {tuple(e.shape)}"
        if not r.is_floating_point():
            if not torch.equal(r, e):
                return False, f"output {i}: integer values differ"
            continue
        if not torch.isfinite(r).all() and torch.isfinite(e).all():
            return False, f"output {i}: non-finite values where eager has none"
        err, eager_err = rmse(r, f), rmse(e, f)
        limit = ERROR_MULTIPLIER * eager_err + ERROR_FLOOR.get(dtype, 1e-5)
        if err > limit:
            return False, f"output {i}: rmse vs fp64 {err:.3g} > limit {limit:.3g} (eager's {eager_err:.3g})"
        worst = max(worst, f"{err:.2g}")
    return True, worst


def median_ms(fn, device, repeat):
    """--repeat timed calls on the CPU (the model has already run: no warm-up call); on CUDA
    do_bench for max(20, 5 * repeat) ms."""
    return round(harness.median_ms(fn, device, warmup_ms=25, rep_ms=max(20, repeat * 5), min_calls=repeat,
                                   max_calls=repeat, budget_s=0, warmup_calls=0), 4)


@contextlib.contextmanager
def timing_lock(path):
    """An exclusive lock on `path` (none when path is None): one model is timed at a time."""
    if not path:
        yield
        return
    import fcntl
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_worker(args):
    row = {"model": args.worker, "status": "crashed"}
    try:
        row.update(measure(args))
        row["status"] = "ok"
    except Exception as e:  # the row records the failure; the debug folder keeps the details
        row["error"] = f"{type(e).__name__}: {e}"[:1000]
        row["traceback"] = traceback.format_exc()[-4000:]
    with open(args.result_file, "w") as f:
        json.dump(row, f)
    return 0


def measure(args):
    from tracetorch import compiler
    from tracetorch import logs
    from models import SUITE

    spec = SUITE[args.worker]
    dtype = getattr(torch, args.dtype)
    device = args.device
    torch.manual_seed(0)
    model = spec.build().to(device)
    reference_model = copy.deepcopy(model).double()
    model = model.to(dtype)
    made = spec.inputs(device, dtype, "cpu" if device == "cpu" else "gpu")
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in made)
    with torch.no_grad():
        eager = model(*inputs)
        reference = reference_model(*to_double(inputs))

    counter = harness.EventCounter()
    logs.add_sink(counter)
    compiled = compiler.compile(model, backend=args.backend)
    start = time.perf_counter()
    with torch.no_grad():
        result = compiled(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    compile_s = time.perf_counter() - start
    with torch.no_grad():
        again = compiled(*inputs)
    accurate, detail = accuracy(result, eager, reference, dtype)
    accurate_again, _ = accuracy(again, eager, reference, dtype)
    logs.remove_sink(counter)
    report = compiler.explain(model)(*inputs)
    row = {
        "accurate": accurate and accurate_again,
        "accuracy_detail": detail,
        "graphs": report.graph_count,
        "graph_breaks": report.graph_break_count,
        "break_reasons": [str(getattr(r, "reason", r))[:200] for r in report.break_reasons],
        "recompiles": counter.get("recompiles", "recompile"),
        "fallbacks": counter.get("perf_hints", "perf_hint"),
        # a whole graph run op by op (never for one op: those are ATen fallback nodes)
        "graphs_run_eagerly": counter.get("graph_runs_eagerly", "aot_runs_eagerly"),
        "kernels": counter.get("kernel"),
        "compile_s": round(compile_s, 3),
    }
    inductor = None
    if not args.no_inductor:
        try:
            inductor = torch.compile(model)
            start = time.perf_counter()
            with torch.no_grad():
                inductor(*inputs)
                if device == "cuda":
                    torch.cuda.synchronize()
            row["inductor_compile_s"] = round(time.perf_counter() - start, 3)
        except Exception as e:
            inductor = None
            row["inductor_error"] = f"{type(e).__name__}: {e}"[:300]
    # The three timings run back to back, holding the suite's timing lock: with --jobs, other
    # models compile meanwhile, but no two models are timed at once.
    with timing_lock(args.lock_file), torch.no_grad():
        row["eager_ms"] = median_ms(lambda: model(*inputs), device, args.repeat)
        row["ours_ms"] = median_ms(lambda: compiled(*inputs), device, args.repeat)
        row["speedup_vs_eager"] = round(row["eager_ms"] / row["ours_ms"], 3)
        if inductor is not None:
            try:
                row["inductor_ms"] = median_ms(lambda: inductor(*inputs), device, args.repeat)
                row["inductor_speedup_vs_eager"] = round(row["eager_ms"] / row["inductor_ms"], 3)
                row["ours_vs_inductor"] = round(row["inductor_ms"] / row["ours_ms"], 3)
            except Exception as e:
                row["inductor_error"] = f"{type(e).__name__}: {e}"[:300]
    if args.train and spec.trainable:
        row.update(check_training(spec, compiler, device, dtype))
    return row


def check_training(spec, compiler, device, dtype):
    """One forward+backward step, compiled vs eager: every parameter's gradient must match."""
    torch.manual_seed(0)
    eager_model = spec.build().to(device).train()
    compiled_model = copy.deepcopy(eager_model)
    inputs = spec.inputs(device, dtype, "cpu" if device == "cpu" else "gpu")

    def loss_of(model):
        return sum(t.float().sum() for t in flatten(model(*inputs)) if t.is_floating_point())

    torch.manual_seed(1)
    loss_of(eager_model).backward()
    torch.manual_seed(1)
    loss_of(compiler.compile(compiled_model)).backward()
    worst = 0.0
    for (name, p), q in zip(eager_model.named_parameters(), compiled_model.parameters()):
        if p.grad is None and q.grad is None:
            continue
        if p.grad is None or q.grad is None:
            return {"train_accurate": False, "train_detail": f"{name}: gradient missing on one side"}
        scale = p.grad.abs().max().item() + 1e-6
        worst = max(worst, (p.grad - q.grad).abs().max().item() / scale)
    return {"train_accurate": worst < 1e-3, "train_detail": f"max relative grad error {worst:.2g}"}


if __name__ == "__main__":
    sys.exit("suite_worker is run by scripts/run_suite.py")
