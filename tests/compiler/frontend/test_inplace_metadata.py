"""In-place metadata ops (t_, transpose_, swapdims_, squeeze_, unsqueeze_, as_strided_, resize_,
detach_) on graph inputs, differential: compiled vs eager over calls at several sizes, so that the
automatic-dynamic recompile traces them with symbolic sizes (the backend fuzzer's seeds 340107,
340124 and 336029 crashed there: `sources must not be empty for symbol s65`, and AOT traced
`a0[:, ::3]` on an input already squeezed to 1-D).

What must hold: the placeholder's fake and the symbolic guards describe the input as it enters
the graph (not after the op), and the sizes of a view input's base (the fuzzer's inputs are
views of a flat buffer) are not guarded on."""
import pytest
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import GraphListBackend


def t_input(a, b):                  # 336029: a1.t_() then a1 + a0
    a.t_()
    return a + b.t(), a


def transpose_input(a, b):
    a.transpose_(0, 1)
    return a * 2, b


def swapdims_input(a, b):
    a.swapdims_(1, 0)
    return a.sum(0), a


def swapaxes_input(a, b):
    a.swapaxes_(0, 1)
    return a - b.t()


def squeeze_input(a, b):            # 340124: a view read before the input is squeezed
    v = a[:, ::3]
    a.squeeze_()
    return v * 2, a + 1, torch.cumprod(v.to(torch.float64), 0)


def squeeze_dim_input(a, b):
    a.squeeze_(1)
    return a.cumsum(0), b


def unsqueeze_input(a, b):          # 340107: read, unsqueeze_, then broadcast with another input
    v = torch.isnan(a)
    a.unsqueeze_(0)
    return v.view(-1), a + 7, (a + 7) * b


def as_strided_input(a, b):
    a.as_strided_((a.shape[0], 1), (a.stride(0), 1))
    return a * 3


def resize_input(a, b):             # resize_ fails on fake tensors: a graph break, run eagerly
    a.resize_(2, 1)
    return a + 1, b * 2


def returns_mutated_input(a, b):    # the caller's tensor comes back, not a new one
    return a.t_(), b + 1


def twice(a, b):                    # two metadata ops on one input, and one on a computed value
    y = a * 2
    y.t_()
    a.t_()
    a.unsqueeze_(0)
    return a + y, y


def detach_input(a, b):             # a plain input only: eager refuses detach_ of a view
    a.detach_()
    return a * 2


#: name -> (program, shape of `a` for size n, shape of `b`)
PROGRAMS = {
    "t_": (t_input, lambda n: (n, 1), lambda n: (n, 1)),
    "transpose_": (transpose_input, lambda n: (n, 3), lambda n: (3, n)),
    "swapdims_": (swapdims_input, lambda n: (n, 2), lambda n: (n,)),
    "swapaxes_": (swapaxes_input, lambda n: (n, 3), lambda n: (n, 3)),
    "squeeze_": (squeeze_input, lambda n: (n, 1), lambda n: (n,)),
    "squeeze_dim": (squeeze_dim_input, lambda n: (n, 1, 3), lambda n: (n,)),
    "unsqueeze_": (unsqueeze_input, lambda n: (n, 3, 1), lambda n: (n, 3, 2)),
    "as_strided_": (as_strided_input, lambda n: (n, 3), lambda n: (n,)),
    "resize_": (resize_input, lambda n: (n, 3), lambda n: (n,)),
    "returns_input": (returns_mutated_input, lambda n: (n, 2), lambda n: (n,)),
    "twice": (twice, lambda n: (n, 3), lambda n: (n,)),
    "detach_": (detach_input, lambda n: (n, 3), lambda n: (n,)),
}
SIZES = [4, 4, 6, 9, 5]            # a size change, then sizes the dynamic recompile must serve


def _contiguous(shape, gen):
    return torch.randn(shape, generator=gen)


def _view_of_buffer(shape, gen):
    """As the fuzzer's inputs: a view (as_strided) of a flat buffer, so `_base` is set."""
    flat = torch.randn(max(1, torch.Size(shape).numel()), generator=gen)
    return flat.as_strided(shape, torch.empty(shape).stride())


LAYOUTS = {"contiguous": _contiguous, "view": _view_of_buffer}


def _same_layout_copy(x):
    if x._base is None:
        return x.clone()
    return torch.empty_like(x._base).as_strided(x.shape, x.stride(), x.storage_offset()).copy_(x)


def _leaves(out):
    return list(out) if isinstance(out, tuple) else [out]


def _check_call(e_in, e_out, c_in, c_out):
    e_leaves, c_leaves = _leaves(e_out), _leaves(c_out)
    assert len(e_leaves) == len(c_leaves)
    for e, c in zip(e_leaves, c_leaves):
        assert c.shape == e.shape and c.dtype == e.dtype
        torch.testing.assert_close(c, e, equal_nan=True)
        for j, x in enumerate(e_in):
            if e is x:
                assert c is c_in[j], "eager returns the caller's input: so must the compiled code"
    for e, c in zip(e_in, c_in):      # the caller's tensors after the call: same metadata and data
        assert (c.shape, c.stride(), c.storage_offset()) == (e.shape, e.stride(), e.storage_offset())
        torch.testing.assert_close(c, e, equal_nan=True)


#: events that say a whole graph ran eagerly (our rule: never for one op)
WHOLE_GRAPH_EAGER = {"compiled_graph_skipped", "aot_runs_eagerly", "graph_runs_eagerly"}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_inplace_metadata_op_on_input_matches_eager(name, layout, backend, events):
    fn, a_shape, b_shape = PROGRAMS[name]
    if name == "detach_" and layout == "view":
        pytest.skip("eager refuses detach_ of a view")
    compiled = compiler.compile(fn, backend=backend)
    gen = torch.Generator().manual_seed(0)
    for n in SIZES:
        inputs = [LAYOUTS[layout](a_shape(n), gen), LAYOUTS[layout](b_shape(n), gen)]
        e_in = [_same_layout_copy(x) for x in inputs]
        c_in = [_same_layout_copy(x) for x in inputs]
        e_out = fn(*e_in)
        c_out = compiled(*c_in)
        _check_call(e_in, e_out, c_in, c_out)
    texts = [e.payload for e in events if e.name == "recompiles"]
    # guards read from the input after its metadata changed index dims it does not have
    assert not any("could not be evaluated" in t for t in texts), texts
    assert len(texts) <= 2, texts       # one size change, then the dynamic graph serves the rest
    eager = [(e.name, e.fields) for e in events if e.name in WHOLE_GRAPH_EAGER]
    assert not eager, eager             # aot traced the inputs as they enter: its check passes


def test_guards_and_placeholder_describe_the_input_at_entry(events):
    """The guards bind L['a'].size()[i] to the input before unsqueeze_ (2-D), and the graph's
    placeholder fake keeps that rank (AOT traces from it)."""
    c = GraphListBackend()
    compiled = compiler.compile(lambda a, b: (a.unsqueeze_(0), a + b)[1], backend=c, dynamic=True)
    for n, m in [(4, 3), (5, 3), (6, 2)]:
        a, b = torch.randn(n, m), torch.randn(1, n, m)
        expected = (a.clone().unsqueeze_(0) + b)
        torch.testing.assert_close(compiled(a, b), expected)
        assert a.shape == (1, n, m)
    assert len(c.graphs) == 1
    [placeholder] = [p for p in c.graphs[0].graph.nodes if p.op == "placeholder"][:1]
    assert placeholder.meta["example_value"].dim() == 2
    guards = [e.payload for e in events if e.name == "guards"][-1]
    assert "L['a'].size()[2]" not in guards and "L['b'].size()[1] == L['a'].size()[0]" in guards, guards


def test_view_input_base_bound_is_not_guarded(events):
    """unsqueeze_ of a view checks the view against its base's storage: a ShapeEnv guard on the
    base's own size symbol, which no input source carries. It is left out (logged), not an
    AssertionError from produce_guards."""
    compiled = compiler.compile(lambda a: (a.unsqueeze_(0), a * 2)[1], backend="eager", dynamic=True)
    for n in (4, 6):
        a = _view_of_buffer((n, 3), torch.Generator().manual_seed(n))
        expected = _same_layout_copy(a).unsqueeze_(0) * 2
        torch.testing.assert_close(compiled(a), expected)
    dropped = [e for e in events if e.name == "guard_not_installed"]
    assert dropped and all("._base" in str(e.fields["symbols"]) for e in dropped)
    assert [e for e in events if e.name == "inplace_metadata_op"]


@pytest.mark.parametrize("backend", ["aot_eager", "default"])
@pytest.mark.parametrize("convert", ["type_as", "to_dtype", "to_device"])
def test_a_conversion_that_changes_nothing_is_the_input_itself(convert, backend):
    """`a.type_as(a)`, `a.to(a.dtype)`, `a.to("cpu")` return `a` itself in eager; traced as graph
    ops they came back as copies once `a` changed its metadata in place (fuzz 431434: an
    output that is a view of the input in eager was a new tensor)."""
    conv = {"type_as": lambda a: a.type_as(a), "to_dtype": lambda a: a.to(a.dtype),
            "to_device": lambda a: a.to("cpu")}[convert]

    def fn(a):
        v = conv(a)
        a.unsqueeze_(0)
        a.pow_(2)
        return v[..., None]

    a_e, a_c = torch.arange(9, dtype=torch.uint8).reshape(3, 3, 1), torch.arange(9, dtype=torch.uint8).reshape(3, 3, 1)
    e, c = fn(a_e), compiler.compile(fn, backend=backend)(a_c)
    assert torch.equal(c, e) and torch.equal(a_c, a_e)
    assert c.untyped_storage().data_ptr() == a_c.untyped_storage().data_ptr()     # a view of the input
