"""Channels-last activations for convolution graphs (compiler/backend/conv_layout.py): forced on
for CPU here (config 'channels_last'; 'auto' changes CUDA graphs only). Differential: every result
equals eager's in value and in strides."""
import contextlib
import logging
import re

import pytest
import torch
import torch.nn as nn

from tracetorch import compiler, logs
from tracetorch.compiler import config




class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


def small_resnet():
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         Block(8), Block(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))


def feature_map():
    # the output is a 4-d activation: it must come back with eager's (contiguous) strides
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GELU(), Block(8))


def patch_embed():
    # a view that is only valid on NCHW data: the pass must leave the graph alone (or cope)
    class P(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv2d(3, 16, 4, stride=4)

        def forward(self, x):
            return self.proj(x).flatten(2).transpose(1, 2).softmax(-1)
    return P()


@pytest.mark.parametrize("make", [small_resnet, feature_map, patch_embed])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_channels_last_matches_eager(make, dtype):
    torch.manual_seed(0)
    model = make().eval().to(dtype)
    x = torch.randn(2, 3, 16, 16, dtype=dtype)
    compiler.reset()
    with config.patch(**{"backend.conv_layout": "channels_last"}), torch.no_grad():
        out = compiler.compile(model)(x)
        ref = model(x)
    torch.testing.assert_close(out, ref)
    assert out.stride() == ref.stride()


def _fake_graph(model, x):
    """An aten graph of `model` with its parameters and buffers as inputs (as the aot stage makes)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}

    def run(state, x):
        return torch.func.functional_call(model, state, (x,))
    with torch.no_grad():
        return make_fx(run, tracing_mode="fake")(state, x)


def test_conv_graph_is_rewritten():
    from tracetorch.compiler.backend.conv_layout import use_channels_last
    torch.manual_seed(0)
    model = feature_map().eval()
    x = torch.randn(2, 3, 8, 8)
    gm = _fake_graph(model, x)
    with config.patch(**{"backend.conv_layout": "channels_last"}):
        assert use_channels_last(gm)
    clones = [n for n in gm.graph.nodes if n.target is torch.ops.aten.clone.default]
    formats = [n.kwargs.get("memory_format") for n in clones]
    # one conversion into channels_last (the first convolution's input), one back at the output
    assert formats.count(torch.channels_last) == 1 and formats.count(torch.contiguous_format) == 1
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    assert all(c.meta["val"].is_contiguous(memory_format=torch.channels_last) for c in convs)
    with config.patch(**{"backend.conv_layout": "off"}):
        assert not use_channels_last(_fake_graph(model, x))


def test_auto_leaves_cpu_graphs_alone():
    from tracetorch.compiler.backend.conv_layout import use_channels_last
    gm = _fake_graph(feature_map().eval(), torch.randn(1, 3, 8, 8))
    before = gm.code
    with config.patch(**{"backend.conv_layout": "auto"}):
        assert not use_channels_last(gm)
    assert gm.code == before


def test_rewritten_under_torch_compile_too():
    """Through torch.compile(backend=compiler.backend) Dynamo's tracing context holds a fake mode
    other than the one our aot stage traced the graph in; the pass re-propagates in the graph's
    own (it used to ask detect_fake_mode, got Dynamo's, failed on "Mixing fake modes" and left
    every such graph NCHW: cuDNN then transposed around each convolution)."""
    import logging

    from tracetorch import logs
    torch.manual_seed(0)
    model = small_resnet().eval()
    x = torch.randn(2, 3, 16, 16)
    torch._dynamo.reset()
    with config.patch(**{"backend.conv_layout": "channels_last"}), torch.no_grad(), \
            logs.testing.capture(names={"conv_layout_channels_last", "conv_layout_unchanged"},
                                 level=logging.DEBUG, artifacts=None) as events:
        out = torch.compile(model, backend=compiler.backend)(x)
    torch._dynamo.reset()
    torch.testing.assert_close(out, model(x))
    assert [e.name for e in events] == ["conv_layout_channels_last"], [e.fields for e in events]


def test_weights_changed_between_calls_are_seen_however_they_change():
    """A spatial filter of a channels_last convolution is converted to channels_last at every
    call: changes through the parameter (an in-place update bumps its version), through `.data`
    (a version counter of its own: nothing bumps the parameter's) and a new tensor are all seen."""
    import logging

    from tracetorch import logs
    torch.manual_seed(0)
    model = small_resnet().eval()
    x = torch.randn(2, 3, 16, 16)
    compiler.reset()
    opts = {"backend.conv_layout": "channels_last", "backend.cache_enabled": False}
    with config.patch(**opts), torch.no_grad(), \
            logs.testing.capture(names={"conv_layout_channels_last"}, level=logging.DEBUG, artifacts=None) as events:
        fn = compiler.compile(model)
        torch.testing.assert_close(fn(x), model(x))
        assert events, "the convolutions did not run channels_last"
        conv = model[3].conv1
        conv.weight.mul_(-2.0)
        torch.testing.assert_close(fn(x), model(x))
        version = conv.weight._version
        conv.weight.data.mul_(0.5)
        assert conv.weight._version == version
        torch.testing.assert_close(fn(x), model(x))
        conv.weight = nn.Parameter(conv.weight.detach() * 3.0)
        torch.testing.assert_close(fn(x), model(x))


@pytest.mark.parametrize("make", [small_resnet, feature_map, patch_embed])
@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_conv_bias_in_kernels_matches_eager(make, codegen):
    """config backend.conv_bias='kernel' (the CUDA default, 'auto'): the convolution runs
    without its bias and the bias is a pointwise add fused into what reads the result, as eager
    adds it after cuDNN's call; values, strides and the NCHW/channels_last mix as eager's."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(2, 3, 16, 16)
    torch._dynamo.reset()
    opts = {"backend.conv_bias": "kernel", "backend.conv_layout": "channels_last", "backend.cpu_codegen": codegen,
            "backend.fallback_on_error": False}
    with config.patch(**opts), torch.no_grad():
        out = torch.compile(model, backend=compiler.backend)(x)
    torch._dynamo.reset()
    ref = model(x)
    torch.testing.assert_close(out, ref)
    assert out.stride() == ref.stride()


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_training_keeps_saved_activations_channels_last(codegen):
    """Training: the forward's saved activations stay channels_last (only the backward reads
    them), the backward is re-propagated for the layouts that arrive, and every gradient, the
    loss and the batch norms' running statistics equal eager's over two steps, gradients with
    eager's strides (ResNet-50's training graphs stayed NCHW: cuDNN transposed around every
    convolution and its gradients, 1.3 ms per step on the H100)."""
    import copy
    import logging

    from tracetorch import logs
    torch.manual_seed(0)
    model = small_resnet().train()
    ref = copy.deepcopy(model)
    xs = [torch.randn(2, 3, 16, 16) for _ in range(2)]
    compiler.reset()
    with config.patch(**{"backend.conv_layout": "channels_last", "backend.cpu_codegen": codegen,
                         "backend.fallback_on_error": False}), \
            logs.testing.capture(names={"conv_layout_channels_last", "backward_layouts_repropagated",
                                        "backward_layouts_kept"}, level=logging.DEBUG, artifacts=None) as events:
        step = compiler.compile(model)
        for x in xs:
            out = step(x)
            out.square().sum().backward()
    for x in xs:
        expected = ref(x)
        expected.square().sum().backward()
    torch.testing.assert_close(out, expected)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
        assert p.grad.stride() == q.grad.stride(), name
    for b, c in zip(model.buffers(), ref.buffers()):
        torch.testing.assert_close(b, c)
    fields = {e.name: e.fields for e in events}
    assert fields["conv_layout_channels_last"]["outputs_kept_channels_last"] > 0, fields
    assert fields["backward_layouts_repropagated"]["inputs_changed"] > 0, fields


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_pointwise_convolution_gradients_come_back_without_a_copy(codegen):
    """A 1x1 convolution's weight gradient in channels_last has the parameter's strides except
    where a size is 1: the same bytes in the same order, so the backward returns a view with the
    parameter's strides, not a copy kernel (aot/output_layouts.py; ResNet-50's backward had 36 of
    them). Gradients equal eager's, with eager's strides."""
    import copy

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16)).train()
    ref = copy.deepcopy(model)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(2, 16, 8, 8)
    compiler.reset()
    # (a loss of random weights: the sum of a batch norm's squared outputs barely depends on
    # the filters before it, and those gradients were cancellation noise on both sides)
    with config.patch(**{"backend.conv_layout": "channels_last", "backend.cpu_codegen": codegen,
                         "backend.fallback_on_error": False, "backend.cache_enabled": False}), \
            _output_codes() as codes:
        (compiler.compile(model)(x) * w).sum().backward()
    (ref(x) * w).sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)   # sums of 128 products
        assert p.grad.stride() == q.grad.stride(), name
    backward = codes[-1]
    copies = set(re.findall(r"kernel\d+_\w*(?:clone_default|as_strided_default)\w*", backward))
    assert not copies, backward



@contextlib.contextmanager
def _output_codes():
    """The output code of every graph compiled inside the block, in order."""
    codes = []
    with logs.testing.capture(names={"output_code"}, level=logging.DEBUG) as events:
        yield codes
    codes.extend(e.payload for e in events)


def test_filter_copies_share_one_launch_each_way():
    """Forward: each 3x3 filter is converted to channels_last in the graph and the copy is saved
    for the backward (conv_layout `_save_converted_filters`), which then gets the layout its
    convolution gradients want; the conversions move to the start of the forward and run as one
    combined Triton launch. Backward: the filters' gradients, channels_last out of the convolution
    backward, are copied into the parameters' strides by kernels moved to the end, again one
    launch (scheduler `_group_copies`). Gradients equal eager's, with eager's strides."""
    import copy

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)).train()
    ref = copy.deepcopy(model)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(2, 8, 8, 8)
    compiler.reset()
    with config.patch(**{"backend.conv_layout": "channels_last", "backend.cpu_codegen": "triton",
                         "backend.fallback_on_error": False, "backend.cache_enabled": False}), \
            _output_codes() as codes:
        (compiler.compile(model)(x) * w).sum().backward()
    (ref(x) * w).sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)
        assert p.grad.stride() == q.grad.stride(), name
    forward, backward = codes[-2], codes[-1]
    for code in (forward, backward):
        body = code[code.index("def call("):]
        # the wrapper's note before a combined launch: "# combo_kernelN_...: <parts> in one launch"
        combined = re.findall(r"# combo_\w+: (.*) in one launch", body)
        assert len(combined) == 1 and len(combined[0].split(", ")) == 3, combined   # the three filters
    assert "channels_last_weight(" not in forward       # converted in the graph, not per call


def test_a_filter_two_convolutions_share_is_converted_once():
    """One 3x3 filter applied twice (weight sharing): the training forward converts it to
    channels_last once and saves that copy; gradients equal eager's, with eager's strides."""
    import copy

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)

        def forward(self, x):
            y = torch.relu(self.conv(torch.relu(self.stem(x))))
            return self.conv(y)

    torch.manual_seed(0)
    model = Shared().train()
    ref = copy.deepcopy(model)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(2, 8, 8, 8)
    compiler.reset()
    with config.patch(**{"backend.conv_layout": "channels_last", "backend.fallback_on_error": False,
                         "backend.cache_enabled": False}), \
            logs.testing.capture(names={"conv_layout_channels_last"}, level=logging.DEBUG) as events:
        (compiler.compile(model)(x) * w).sum().backward()
    (ref(x) * w).sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)
        assert p.grad.stride() == q.grad.stride(), name
    forward = [e.fields for e in events][0]
    assert forward["filters_saved_channels_last"] == 2, forward     # stem and the shared filter


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_a_max_pool_between_convolutions_stays_channels_last(codegen):
    """ResNet's stem (convolution, batch norm, ReLU, 3x3 / stride-2 max pool) before a block:
    the pool's values and indices keep the channels_last layout (lowered whole, as eager lays
    them out), so only the first convolution's input is converted; the decomposed pool's
    contiguous max needed a second conversion, and its gradients crossed layouts in the
    backward. A training step's loss, gradients and running statistics equal eager's."""
    import copy
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(3, 2, 1), Block(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 5)).train()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 3, 32, 32)
    compiler.reset()
    with config.patch(**{"backend.conv_layout": "channels_last", "backend.cpu_codegen": codegen,
                         "backend.fallback_on_error": False}), \
            logs.testing.capture(names={"conv_layout_channels_last"}, level=logging.DEBUG, artifacts=None) as events:
        out = compiler.compile(model)(x)
        out.square().sum().backward()
    expected = ref(x)
    expected.square().sum().backward()
    torch.testing.assert_close(out, expected)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    for b, c in zip(model.buffers(), ref.buffers()):
        torch.testing.assert_close(b, c)
    converted = [e.fields["converted_inputs"] for e in events if e.name == "conv_layout_channels_last"]
    assert converted and converted[0] == 1, converted
