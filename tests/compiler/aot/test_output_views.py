"""Outputs that eager returns as views of graph inputs (aliases.input_views): the compiled
function returns a view of the caller's tensor itself (same storage, sizes, strides, storage
offset), after the write-back of any mutation, as AOTAutograd regenerates "alias of input"
outputs. Differential: compiled (our backend, C++ code) vs eager on copies of the inputs."""
import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler import config
from tracetorch.compiler.aot import aliases


def diagonal_divided(a):             # fuzz 331104: a view written through, returned
    v = a.diagonal()
    v.div_(2)
    return (v,)


def mutated_then_viewed(a, b):       # fuzz 340072: the input mutated, a view of it returned
    a.sub_(b, alpha=2)
    return (a[..., None][1:],)


def view_of_unmutated(a, b):
    return a.t()[1:], a.t() + b


def split_and_sized_view(a, b):
    a.mul_(b)
    first, second = a.split(2)
    return second.view(a.size(1), -1), first.unsqueeze(0)


def inplace_on_view_returned(a):
    return a[1:].mul_(3).transpose(0, 1)


def view_then_t_(a):                 # fuzz 350483: a metadata op on the view, not on the input
    v = a.reshape(-1)
    v.t_()
    return (v,)


def written_view_then_t_(a):         # the op reached through an in-place write of the view
    v = a[:, 1:]
    v.mul_(2).t_()
    return v, v.unsqueeze_(0)


def view_beside_metadata_change(a, b):   # fuzz 461565: b's t_ does not order a's view; Dynamo
    v = a.t()                              # breaks at the t_ and resumes with a and v as two inputs
    b.t_()                                 # sharing memory (a synthetic-base variant)
    a.mean()
    return (v.abs_(),)


def _expanded(*shape):
    return torch.randn(1, *shape[1:]).expand(shape)


CASES = [(diagonal_divided, lambda: [_expanded(13, 5, 7, 1)]),
         (mutated_then_viewed, lambda: [torch.randn(7, 6)[:, ::2], torch.randn(1, 1)]),
         (view_of_unmutated, lambda: [torch.randn(5, 4), torch.randn(4, 5)]),
         (split_and_sized_view, lambda: [torch.randn(4, 3), torch.randn(4, 3)]),
         (inplace_on_view_returned, lambda: [torch.randn(4, 3)]),
         (view_then_t_, lambda: [torch.randn(3, 3)]),
         (written_view_then_t_, lambda: [torch.randn(3, 4)]),
         (view_beside_metadata_change, lambda: [torch.randn(4, 7), torch.randn(1, 7)])]


def _views_of(outs, inputs):
    return [any(o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() for x in inputs)
            for o in outs]


def _dynamo(fn):
    return torch.compile(fn, backend=compiler.backend)


@pytest.mark.parametrize("frontend", [_dynamo, compiler.compile], ids=["dynamo", "ours"])
@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_output_views_of_inputs_are_eagers(fn, make, frontend, backend_cache_dir):
    torch._dynamo.reset()
    inputs = make()
    e_in = [x.clone() if x.stride().count(0) == 0 else x.contiguous()[:1].expand(x.shape) for x in inputs]
    c_in = [x.clone() if x.stride().count(0) == 0 else x.contiguous()[:1].expand(x.shape) for x in inputs]
    if fn is mutated_then_viewed:        # keep the strided layout of the first input
        e_in[0], c_in[0] = (torch.randn(7, 6)[:, ::2].copy_(inputs[0]) for _ in range(2))
    expected = fn(*e_in)
    with config.patch(**{"backend.fallback_on_error": False}):
        got = frontend(fn)(*c_in)
    for e, c in zip(expected, got):
        torch.testing.assert_close(c, e)
        assert (c.stride(), c.storage_offset()) == (e.stride(), e.storage_offset())
    for e, c in zip(e_in, c_in):
        torch.testing.assert_close(c, e)
    assert _views_of(got, c_in) == _views_of(expected, e_in)
    # the alias is observable: a later write to the input shows in the output
    for x in c_in:
        x.zero_()
    for e, c in zip(_views_of(expected, e_in), got):
        if e:
            assert not c.any()


def _capture_gm(fn, *inputs):
    seen = {}

    def backend(gm, example_inputs):
        seen["gm"] = gm
        return gm.forward
    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(*inputs)
    return seen["gm"]


def test_outputs_not_replayed():
    """A view indexed by a tensor and a copy are not regenerated (the compiled graph's output
    stands); a view whose metadata an in-place op changes later is, with the op replayed on the
    replay's own view (output 0: a.view(-1) then unsqueeze_)."""
    def f(a, i):
        v = a.view(-1)
        v.unsqueeze_(0)
        return v, a[i], a.reshape(-1) * 2, a.contiguous().t()
    gm = _capture_gm(f, torch.randn(3, 4), torch.tensor(1))
    [(positions, replay, early)] = aliases.input_views(gm)
    assert positions == [0, 3] and early
    a = torch.randn(3, 4)
    (v, t) = replay(a, torch.tensor(1))
    assert v.shape == (1, 12) and v.data_ptr() == a.data_ptr() and t.stride() == (1, 4)


@pytest.mark.parametrize("frontend", ["ours", "dynamo"])
def test_views_around_metadata_changes_of_an_input(frontend):
    """An input whose own metadata changes in place (squeeze_): a view taken before the change
    keeps the input's entry sizes, one taken after sees the new ones; both are views of the
    caller's tensor, as in eager (fuzz 371842: `a0.div_(2); v = a0.unflatten(0, (1, -1));
    a0.squeeze_()` returned a new tensor)."""
    def before(a0):
        a0.div_(2)
        v1 = a0.unflatten(0, (1, -1))
        a0.squeeze_()
        return v1,

    def after(a0):
        a0.div_(2)
        a0.squeeze_()
        return a0.unflatten(0, (1, -1)),

    def through(a0):                 # the view chain passes through the metadata op itself (fuzz 5188)
        return a0.unsqueeze_(0).pow_(2).movedim(0, -1),

    for fn in (before, after, through):
        torch._dynamo.reset()
        compiled = compiler.compile(fn) if frontend == "ours" else torch.compile(fn, backend=compiler.backend)
        x = torch.randn(2, 1).bfloat16()
        e_in, c_in = x.clone(), x.clone()
        (e,), (c,) = fn(e_in), compiled(c_in)
        assert c.untyped_storage().data_ptr() == c_in.untyped_storage().data_ptr(), fn.__name__
        assert (c.shape, c.stride(), c_in.shape, c_in.stride()) == (e.shape, e.stride(), e_in.shape, e_in.stride())
        assert torch.equal(c, e) and torch.equal(c_in, e_in)
