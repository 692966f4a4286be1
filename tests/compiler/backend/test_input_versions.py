"""Inputs our kernels write in place count the write, as an ATen in-place op does (`_version`):
autograd refuses a backward through a tensor changed after it was saved, and the cached
channels_last copy of a convolution's weight is renewed after a compiled optimizer step."""
import copy

import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler import config

OPTS = {"backend.cache_enabled": False}


def _running_update(m, x):
    m.mul_(0.9).add_(x.mean(0) * 0.1)
    return x * 2


def test_an_input_written_by_a_kernel_counts_the_write_as_eager_does():
    m_e, m_o = torch.zeros(4), torch.zeros(4)
    x = torch.randn(8, 4)
    compiled = compiler.compile(_running_update, options=OPTS)
    for _ in range(2):
        torch.testing.assert_close(compiled(m_o, x), _running_update(m_e, x))
    torch.testing.assert_close(m_o, m_e)
    assert m_o._version > 0


def test_autograd_refuses_a_backward_through_a_saved_tensor_a_compiled_call_changed():
    compiled = compiler.compile(_running_update, options=OPTS)
    for fn in (_running_update, compiled):
        w = torch.randn(4, requires_grad=True)
        m = torch.zeros(4)
        loss = (w * m).sum()                     # saves m
        fn(m, torch.randn(8, 4))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_a_compiled_optimizer_step_renews_the_channels_last_copy_of_a_conv_weight():
    """The compiled model keeps a channels_last copy of each 3x3 filter while its version stays;
    the compiled AdamW step writes the filters with our kernels. Every step equals eager's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 3, padding=1))
    ours = copy.deepcopy(model)
    opt_e = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-2)
    with config.patch(**OPTS, **{"backend.conv_layout": "channels_last"}):
        fwd, step = compiler.compile(ours), compiler.compile(opt_o.step)
        for i in range(3):
            x = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(i))
            for f, opt in ((model, opt_e.step), (fwd, step)):
                f(x).square().mean().backward()
                opt()
            for (name, a), b in zip(model.named_parameters(), ours.parameters()):
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5,
                                           msg=lambda m, n=name, i=i: f"{n} at step {i}: {m}")
            for p in list(model.parameters()) + list(ours.parameters()):
                p.grad = None
