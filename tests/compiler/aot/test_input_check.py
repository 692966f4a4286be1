"""The aot runtime's input check: the fast comparison with the last accepted call must accept
exactly what the full check accepts. Inputs with other strides/dtypes/shapes than traced run the
graph eagerly; every result is compared with eager."""
import torch

from tracetorch import compiler
from tracetorch.compiler.aot.inference import InputCheck


def f(x, y):
    return (x * 2 + y).sin()


def test_fast_path_agrees_with_the_full_check():
    gm = torch.fx.symbolic_trace(f)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    compiled = compiler.backend(gm, [x, y])
    cases = [
        (x, y),
        (torch.randn(4, 5), torch.randn(4, 5)),                 # same metadata, new values
        (torch.randn(5, 4).t(), y),                             # other strides
        (x.double(), y.double()),                               # other dtype
        (x, y),                                                 # back to the traced metadata
    ]
    for a, b in cases:
        torch.testing.assert_close(compiled(a, b), f(a, b))


def test_input_check_memo_and_last_call():
    x = torch.randn(3, 3)
    check = InputCheck([x, x], guards=[], shape_env=None)
    assert check((x, x)) == ""
    assert check.last is not None and check.last[1] == ""     # (layout, answer) of the last call
    bad = check((x.t().contiguous().t(), x))      # transposed strides
    assert bad, "a strided input must not pass as the traced contiguous one"
    assert check((torch.randn(3, 3), torch.randn(3, 3))) == ""
    assert check((x, 1.0)) != ""                  # not a tensor where a tensor was traced


def test_stride_symbols_of_size_one_dims_do_not_run_the_graph_eagerly():
    """A stride traced as a symbol (its input's strides changed between calls) can sit only on
    dims of size 1 in a later call: such a stride addresses nothing, so the call does not bind
    the symbol, and its guard (s >= 2) used to be unevaluable, running the whole graph eagerly
    (fuzz 340078). It takes its traced value instead, and the compiled graph runs."""
    import logging

    from tracetorch import logs

    def g(a):
        return a * 2 + 1

    compiled = compiler.compile(g)
    with logs.testing.capture(names={"compiled_graph_skipped", "graph_runs_eagerly"}, level=logging.WARNING,
                              artifacts=None) as eagerly:
        for n, m, step in [(5, 1, 2), (4, 1, 3), (1, 1, 2), (1, 1, 3)]:
            x = torch.randn(n * step, m * step)[::step, ::step]
            torch.testing.assert_close(compiled(x), g(x))
    assert [ev.fields for ev in eagerly] == []


def _events(names):
    import logging

    from tracetorch import logs
    return logs.testing.capture(names=names, level=logging.DEBUG, artifacts=None)


def test_a_graph_our_frontend_guards_skips_the_input_check_and_stays_correct():
    """compiler.compile's guards compare every graph input's dtype, device, sizes, strides and
    requires_grad before each call (static TENSOR_MATCH), so the aot runtime does not check them
    again; a change they catch is a recompile, never the old graph on new metadata."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 4)
    compiled = compiler.compile(lin)
    x = torch.randn(3, 6)
    with _events({"input_check_skipped", "compiled_graph_skipped"}) as got, torch.no_grad():
        torch.testing.assert_close(compiled(x), lin(x))
        lin.weight.data = torch.randn(6, 4).t()           # in place: other strides, same object
        torch.testing.assert_close(compiled(x), lin(x))
        lin.double()                                       # in place (param.data =): other dtype
        torch.testing.assert_close(compiled(x.double()), lin(x.double()))
    names = [e.name for e in got]
    assert "input_check_skipped" in names
    assert "compiled_graph_skipped" not in names           # the guards caught each change first


def test_a_graph_with_dynamic_sizes_keeps_the_input_check():
    def g(a):
        return a.sin() * 2

    compiled = compiler.compile(g, dynamic=True)
    with _events({"input_check_skipped"}) as got:
        for n in (3, 5, 7):
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x), g(x))
    assert [e.name for e in got] == []


def test_a_graph_from_another_frontend_keeps_the_input_check():
    """compiler.backend called on a graph that our frontend did not guard (torch.compile's, or a
    user's fx graph) checks its inputs on each call."""
    gm = torch.fx.symbolic_trace(f)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    with _events({"input_check_skipped"}) as got:
        compiled = compiler.backend(gm, [x, y])
    assert [e.name for e in got] == []
    other = torch.randn(5, 4).t()
    torch.testing.assert_close(compiled(other, y), f(other, y))


def test_a_backend_wrapper_that_changes_the_inputs_keeps_the_input_check():
    """The frontend's mark names the inputs its guards describe: a backend wrapper that compiles
    the graph for other inputs (here: other strides) gets the per-call check back."""
    def g(a, b):
        return (a @ b).relu()

    def wrapper(gm, inputs):
        return compiler.backend(gm, [x.t().contiguous().t() if x.dim() == 2 else x for x in inputs])

    compiled = compiler.compile(g, backend=wrapper)
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    with _events({"input_check_skipped"}) as got:
        torch.testing.assert_close(compiled(a, b), g(a, b))
    assert [e.name for e in got] == []
