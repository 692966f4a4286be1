"""Code whose generation guarded a dynamic size (an int() of a SymInt in a backend pass) serves
only the sizes its guards allow: it is never stored under the graph's cache key, and every
call is checked against the guards, through our frontend (it recompiles) and through
torch.compile(backend=...) (the aot input check runs the other sizes eagerly). Each call is
compared with eager. The bug is simulated: pad_gemm reads its sizes with int()."""

import logging

import torch

from tracetorch import compiler
from tracetorch.compiler import config
from tracetorch.compiler.backend import pad_gemm
from tracetorch.logs.testing import capture


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 1003), torch.nn.ReLU(), torch.nn.Linear(1003, 64))


def _guarding_pad_gemm(monkeypatch):
    monkeypatch.setattr(pad_gemm, "static_size", lambda size: int(size))    # int() guards a SymInt


def test_specialized_code_is_not_cached_and_other_sizes_recompile(tmp_path, monkeypatch):
    _guarding_pad_gemm(monkeypatch)
    model = _model()
    with config.patch({"backend.pad_gemm": "always", "backend.cache_dir": str(tmp_path)}), \
            capture(names={"backend_guarded"}, level=logging.WARNING) as events, torch.no_grad():
        for _ in range(2):          # the second round would find the first round's code on disk
            compiler.reset()
            fn = compiler.compile(model)
            for n in (40, 56, 40, 48):
                x = torch.randn(n, 512)
                torch.testing.assert_close(fn(x), model(x), atol=1e-3, rtol=1e-4)
    fixed = [f for e in events for f in e.fields["fixed"]]
    assert fixed and all(f.startswith("Eq(") for f in fixed)
    # 40 is the first, static graph; 56 and 48 are each a dynamic compile guarded to its size,
    # in both rounds: no cache hit handed the code to another size
    assert len(events) == 2 * 2


def test_dynamo_recompiles_for_sizes_the_backend_guarded(monkeypatch):
    """Through torch.compile(backend=...), aot traces in Dynamo's ShapeEnv (as inductor does): the
    backend's guard joins Dynamo's, which recompiles for another size."""
    _guarding_pad_gemm(monkeypatch)
    model = _model()
    with config.patch({"backend.pad_gemm": "always", "backend.cache_enabled": False}), \
            capture(names={"backend_guarded", "compiled_graph_skipped"}, level=logging.WARNING) as events, \
            torch.no_grad():
        torch._dynamo.reset()
        fn = torch.compile(model, backend=compiler.backend, dynamic=True)
        for n in (40, 56, 40):
            x = torch.randn(n, 512)
            torch.testing.assert_close(fn(x), model(x), atol=1e-3, rtol=1e-4)
        torch._dynamo.reset()
    assert [e.name for e in events] == ["backend_guarded"] * 2, "one compile per size, none skipped"


def test_the_aot_input_check_holds_guards_the_backend_added(monkeypatch):
    """Called directly with real example inputs and dynamic=True, aot makes its own ShapeEnv: the
    guard the backend added is checked before each call, and another size runs eagerly."""
    _guarding_pad_gemm(monkeypatch)
    model = _model()
    gm = torch.fx.symbolic_trace(model)
    with config.patch({"backend.pad_gemm": "always", "backend.cache_enabled": False}), \
            capture(names={"backend_guarded", "compiled_graph_skipped"}, level=logging.WARNING) as events, \
            torch.no_grad():
        fn = compiler.backend(gm, [torch.randn(40, 512)], dynamic=True)
        for n in (40, 56, 40):
            x = torch.randn(n, 512)
            torch.testing.assert_close(fn(x), model(x), atol=1e-3, rtol=1e-4)
    assert [e.name for e in events] == ["backend_guarded", "compiled_graph_skipped"]


class _PaddedConvNet(torch.nn.Module):
    """Convolutions after F.pad (MobileNetV2's and EfficientNet's "same" padding in
    transformers), pooled."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, stride=2)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, groups=16)

    def forward(self, x):
        pad = torch.nn.functional.pad
        y = self.conv1(pad(x, (0, 1, 0, 1))).relu()
        return self.conv2(pad(y, (1, 1, 1, 1))).mean((2, 3))


def test_the_gpu_rewrites_keep_a_dynamic_batch_symbolic():
    """Channels-last convolutions run on the GPU only (conv_layout re-propagates every fake
    value); here they run on the CPU. Re-propagating constant_pad_nd through ATen's C++ kernel
    guarded the batch: MobileNetV2 and EfficientNet recompiled per size, each compile logged
    backend_guarded."""
    torch.manual_seed(0)
    model = _PaddedConvNet().eval()
    options = {"backend.pad_gemm": "always", "backend.conv_layout": "channels_last", "backend.cache_enabled": False}
    with config.patch(options), \
            capture(names={"backend_guarded", "frame_compiled", "conv_layout_channels_last", "compiled_graph_skipped"},
                    level=logging.DEBUG) as events, torch.no_grad():
        compiler.reset()
        fn = compiler.compile(model)
        for n in (2, 3, 5, 7, 3):
            x = torch.randn(n, 3, 16, 16)
            torch.testing.assert_close(fn(x), model(x), atol=1e-4, rtol=1e-4)
    names = [e.name for e in events]
    assert names.count("frame_compiled") == 2 and names.count("conv_layout_channels_last") == 2
    assert "backend_guarded" not in names and "compiled_graph_skipped" not in names
