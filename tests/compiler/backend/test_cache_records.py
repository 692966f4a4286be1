"""The compiled-code cache keeps the records a compile emitted, so that a later hit can emit them
again (cache.py). Keeping them must not build payloads nobody asked for: with no trace and no
consumer, only the records already at hand are kept; with a trace open, all of them."""
import collections

import torch

from tracetorch import compiler, logs
from tracetorch.compiler import config
from tracetorch.logs import core

EXPENSIVE = {"ir_pre_fusion", "ir_post_fusion", "schedule", "fusion_decision", "fusion"}


def _f(x):
    return (torch.sin(x) + 1).relu().sum(-1) * 2


def _built_artifacts(monkeypatch, tmp_path, trace: bool):
    built = collections.Counter()
    emit = core._emit_artifact

    def spy(name, *args, **kwargs):
        built[name] += 1
        return emit(name, *args, **kwargs)
    monkeypatch.setattr(core, "_emit_artifact", spy)
    with config.patch({"backend.cache_enabled": True, "backend.cache_dir": str(tmp_path / "cache")}):
        writer = logs.open_trace_dir(str(tmp_path / "trace")) if trace else None
        try:
            x = torch.randn(4, 8)
            torch.testing.assert_close(compiler.compile(_f)(x), _f(x))
        finally:
            if writer is not None:
                logs.close_trace(writer)
    return built


def test_a_compile_with_no_consumer_builds_no_ir_payloads(monkeypatch, tmp_path):
    built = _built_artifacts(monkeypatch, tmp_path, trace=False)
    assert built["kernel_code"] >= 1
    assert not EXPENSIVE & set(built), built


def test_a_traced_compile_keeps_every_record(monkeypatch, tmp_path):
    built = _built_artifacts(monkeypatch, tmp_path, trace=True)
    assert {"ir_pre_fusion", "schedule"} <= set(built), built
