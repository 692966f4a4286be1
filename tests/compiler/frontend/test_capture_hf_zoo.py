"""The Hugging Face zoo (hf_zoo.py), a fast subset: eager vs compiled, and our graph and break
counts against torch._dynamo's on the same call (side by side, never in the pipeline).

Per model (tiny config, random weights, no downloads): an eval forward through a positional and
a keyword call (same output type, keys and values as eager), a training step with labels (loss
and every parameter gradient against eager), and graphs/breaks no more than Dynamo's. The whole
zoo runs with scripts/run_hf_zoo.py. Then greedy generate() with a compiled forward gives
eager's tokens, with a bounded number of recompiles (KV cache growth), each logged.
"""
import logging
import sys
from pathlib import Path

import pytest
import torch

from tracetorch import compiler, logs

pytest.importorskip("transformers")
if str(Path(__file__).parent) not in sys.path:        # any pytest import mode
    sys.path.insert(0, str(Path(__file__).parent))
from hf_zoo import FAST, ZOO, check  # noqa: E402

# the eval calls through "eager" (capture only) and the training step through "aot_eager"
# (AOT autograd's joint graph); one model also through the default backend (C++ code)
CASES = [(name, "eager", "aot_eager") for name in FAST] + [("llama", "default", "default")]


@pytest.mark.parametrize("name,backend,train_backend", CASES,
                         ids=[f"{n}-{b}" for n, b, _ in CASES])
def test_hf_zoo_model_matches_eager_and_dynamo_counts(name, backend, train_backend):
    r = check(name, backend=backend, train_backend=train_backend,
              with_dynamo=backend == "eager")
    assert r["same_type"] and r["same_keys"], r
    tol = 1e-5 if backend == "eager" else 1e-4
    assert r["out_err"] <= tol, r
    assert r["loss_err"] <= tol, r
    assert not r["grad_mismatch"], r
    assert r["grad_err"] <= 1e-4, r
    if backend == "eager":
        # no exception: every model of the subset is one graph, as in Dynamo
        assert (r["graphs"], r["breaks"]) <= (r["dynamo_graphs"], r["dynamo_breaks"]) \
            and r["breaks"] <= r["dynamo_breaks"], (r["break_reasons"], r["dynamo_reasons"])


@pytest.fixture
def recompiles():
    with logs.testing.capture(level=logging.DEBUG, artifacts={"recompile"}) as got:
        compiler.reset()
        yield got
    compiler.reset()


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_hf_greedy_generate_with_compiled_forward_matches_eager(name, recompiles):
    entry = ZOO[name]
    model, inputs = entry.model(), entry.inputs()
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(**inputs, **kwargs)
        model.forward = compiler.compile(model.forward, backend="eager")
        got = model.generate(**inputs, **kwargs)
        again = model.generate(**inputs, **kwargs)       # every entry cached by now
    assert torch.equal(got, expected) and torch.equal(again, expected)
    events = [e for e in recompiles if e.name == "recompile"]
    # prefill (empty cache), first decode step (cache initialized), then the cache length
    # becomes dynamic: the remaining 6 steps and the second generate() reuse that entry
    assert 1 <= len(events) <= 2, [e.payload for e in events]


def test_hf_attention_implementation_dispatch_is_guarded():
    """The attention function is looked up by config._attn_implementation at run time: each
    implementation is one graph, and switching it on a compiled model recompiles."""
    entry = ZOO["llama"]
    model, inputs = entry.model(), entry.inputs()
    compiled = compiler.compile(model, backend="eager")
    with torch.no_grad():
        for impl in ("eager", "sdpa", "eager"):
            model.set_attn_implementation(impl)
            report = compiler.explain(model)(**inputs)
            assert (report.graph_count, report.graph_break_count) == (1, 0), report
            torch.testing.assert_close(compiled(**inputs).logits, model(**inputs).logits)


@pytest.mark.parametrize("name", ["t5", "whisper"])
def test_hf_seq2seq_generate_passes_encoder_outputs_without_breaks(name):
    """generate() on an encoder-decoder passes the encoder's ModelOutput (made before the call)
    and a cache object back into forward: no break, eager's tokens."""
    entry = ZOO[name]
    model, inputs = entry.model(), entry.inputs()
    inputs.pop("decoder_input_ids")
    kwargs = dict(max_new_tokens=4, do_sample=False)
    with torch.no_grad():
        expected = model.generate(**inputs, **kwargs)
        model.forward = compiler.compile(model.forward, backend="eager")
        got = model.generate(**inputs, **kwargs)
        fresh = entry.model()
        main = next(iter(inputs.values()))                  # input_ids / input_features
        enc = fresh.get_encoder()(main)                     # a ModelOutput made before the call
        report = compiler.explain(fresh)(encoder_outputs=enc, decoder_input_ids=expected[:, :2])
    assert torch.equal(got, expected)
    assert report.graph_break_count == 0, report


def _rows(inputs, n):
    """The zoo inputs with n rows (the example rows repeated, then cut)."""
    def one(x):
        return x.repeat(-(-n // x.shape[0]), *([1] * (x.dim() - 1)))[:n].contiguous()
    return {k: one(v) for k, v in inputs.items()}


def test_a_changing_batch_keeps_bloom_in_one_dynamic_graph():
    """scripts/dynamic_batch_zoo.py found Bloom losing its dynamic graph: the aot trace failed
    in ATen's baddbmm meta kernel, which expands the ALiBi bias itself (the graph ran eagerly).
    The GPU's rewrites are on, as in that script (MobileNetV2's case of them:
    tests/compiler/backend/test_backend_guards.py)."""
    from tracetorch.compiler import config
    entry = ZOO["bloom"]
    model, inputs = entry.model(), entry.inputs()
    lost = {"aot_runs_eagerly", "graph_runs_eagerly", "backend_guarded", "compiled_graph_skipped"}
    options = {"backend.pad_gemm": "always", "backend.conv_layout": "channels_last", "backend.cache_enabled": False}
    with config.patch(options), logs.testing.capture(level=logging.DEBUG) as events, torch.no_grad():
        compiler.reset()
        fn = compiler.compile(model)
        for n in (2, 3, 5, 3):
            x = _rows(inputs, n)
            want = model(**x)
            got = fn(**x)
            key = "logits" if hasattr(want, "logits") else "last_hidden_state"
            torch.testing.assert_close(getattr(got, key), getattr(want, key), atol=1e-4, rtol=1e-4)
    names = [e.name for e in events]
    assert not lost & set(names), [e for e in events if e.name in lost]
    assert names.count("frame_compiled") == 2
