"""Cache, recompiles, the cache size limit, compile ids and automatic dynamic shapes.

These run the runtime half against a minimal stand-in for capture_frame (defined here, as the
contract in docs/CONTRACTS.md section 6 describes it): it runs the function as is and guards
each argument (TENSOR_MATCH with the requested dynamic dims, CONSTANT_MATCH for scalars), so the
runtime's behaviour is tested independently of the real capture.
"""
import logging

import pytest
import torch

from tracetorch import compiler
from tracetorch import logs
from tracetorch.compiler import config
from tracetorch.compiler.errors import RecompileLimitError
from tracetorch.compiler.frontend import eval_frame
from tests.compiler.frontend.corpus.stand_in import StandIn


@pytest.fixture
def capture(monkeypatch):
    stand_in = StandIn()
    monkeypatch.setattr(eval_frame, "capture_impl", stand_in)
    compiler.reset()
    yield stand_in
    compiler.reset()


@pytest.fixture
def events():
    with logs.testing.capture(level=logging.DEBUG,
                              artifacts={"recompiles", "recompiles_verbose", "recompile", "guards"}) as got:
        yield got


def _payloads(events, name):
    return [e.payload for e in events if e.name == name]


def add(x, y):
    return x + y


def scale(x, n):
    return x * n


def test_hit_runs_cached_entry_and_miss_recompiles_with_reason(capture, events):
    f = compiler.compile(add, backend="eager", dynamic=False)
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(f(a, b), a + b)
    torch.testing.assert_close(f(b, a), a + b)
    assert len(capture.calls) == 1
    c = torch.randn(4)
    torch.testing.assert_close(f(c, c), c + c)
    assert [cid for _, cid, _ in capture.calls] == ["0/0", "0/1"]
    [text] = _payloads(events, "recompiles")
    assert text == (f"Recompiling function add in {__file__}:{add.__code__.co_firstlineno}\n"
                    "    triggered by the following guard failure(s):\n"
                    "    - 0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4")
    [rec] = _payloads(events, "recompile")
    assert rec["reasons"][0]["compile_id"] == "0/0"


def test_recompiles_verbose_lists_every_failing_guard_of_every_entry(capture, events):
    f = compiler.compile(add, backend="eager", dynamic=False)
    f(torch.randn(3), torch.randn(3))
    f(torch.randn(4), torch.randn(4))
    f(torch.randn(5), torch.randn(5))
    text = _payloads(events, "recompiles_verbose")[-1]
    assert "guard 0/1 failures:" in text and "guard 0/0 failures:" in text
    assert text.count("size mismatch") == 4      # x and y, in both entries
    assert text.index("guard 0/1") < text.index("guard 0/0")   # newest first
    assert f"  # guard from {__file__}:{add.__code__.co_firstlineno}" in text   # where it was installed


def test_each_guard_kind_triggers_only_its_recompile(capture):
    f = compiler.compile(scale, backend="eager", dynamic=False)
    x = torch.randn(2, 3)
    f(x, 2)
    for _ in range(3):
        f(torch.randn(2, 3), 2)                   # new values, same meta: no recompile
    assert len(capture.calls) == 1
    f(x, 3)                                       # constant
    f(x.double(), 3)                              # dtype
    f(torch.randn(3, 2).t(), 3)                   # stride
    f(torch.randn(2, 3, requires_grad=True), 3)   # requires_grad
    with torch.no_grad():
        f(x, 3)                                   # grad mode
    assert len(capture.calls) == 6
    for args in [(x, 2), (x, 3), (x.double(), 3), (torch.randn(3, 2).t(), 3)]:
        f(*args)                                  # every variant now hits its own entry
    assert len(capture.calls) == 6


def test_default_dtype_change_recompiles(capture, events):
    f = compiler.compile(scale, backend="eager")
    f(torch.randn(2), 2)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        f(torch.randn(2).float(), 2)
    finally:
        torch.set_default_dtype(old)
    assert len(capture.calls) == 2
    assert "default dtype. expected torch.float32, actual torch.float64" in _payloads(events, "recompiles")[0]


def test_cache_size_limit_runs_eagerly_with_warning(capture, events):
    with logs.testing.capture(names={"cache_size_limit_hit"}, level=logging.WARNING,
                              artifacts="all") as warnings:
        f = compiler.compile(scale, backend="eager", options={"frontend.cache_size_limit": 2})
        x = torch.randn(3)
        for n in range(5):
            torch.testing.assert_close(f(x, n), x * n)
        assert len(capture.calls) == 2
        torch.testing.assert_close(f(x, 0), x * 0)   # still cached
    [w] = warnings
    assert (w.fields["function"], w.fields["limit"]) == ("scale", 2)
    assert w.fields["location"] == f"{__file__}:{scale.__code__.co_firstlineno}"
    assert w.fields["last_reason"] == "0/1: L['n'] == 1: 'n' value mismatch. expected 1, actual 2"
    assert 'TRACE_LOGS="recompiles"' in w.fields["hint"]


def test_cache_size_limit_with_fullgraph_raises(capture):
    f = compiler.compile(scale, backend="eager", fullgraph=True)
    x = torch.randn(3)
    with config.patch(**{"frontend.cache_size_limit": 1}):
        f(x, 1)
        with pytest.raises(RecompileLimitError, match="function: 'scale'"):
            f(x, 2)


def test_automatic_dynamic_marks_changed_dim_once(capture):
    f = compiler.compile(add, backend="eager")
    for n in [3, 4, 5, 6, 7]:
        a = torch.randn(n, 2)
        torch.testing.assert_close(f(a, a), a + a)
    assert [dims for _, _, dims in capture.calls] == [{}, {"L['x']": {0}, "L['y']": {0}}]
    f(torch.randn(7, 3), torch.randn(7, 3))     # dim 1 changes: marked as well
    assert capture.calls[-1][2] == {"L['x']": {0, 1}, "L['y']": {0, 1}}
    assert len(capture.calls) == 3


def test_dynamic_true_and_false(capture):
    f = compiler.compile(add, backend="eager", dynamic=True)
    f(torch.randn(3, 2), torch.randn(3, 2))
    assert capture.calls[0][2] == {"L['x']": {0, 1}, "L['y']": {0, 1}}
    for n in [4, 5, 6]:
        f(torch.randn(n, n), torch.randn(n, n))
    assert len(capture.calls) == 1
    g = compiler.compile(scale, backend="eager", dynamic=False)
    for n in [3, 4, 5]:
        g(torch.randn(n), 1)
    assert [dims for name, _, dims in capture.calls if name == "scale"] == [{}, {}, {}]


def test_compile_ids_per_code_object_and_lazy_callees(capture):
    def outer(x):
        return x

    def callee(x):
        return x + 1

    outer.callee = callee
    f = compiler.compile(outer, backend="eager")
    g = compiler.compile(add, backend="eager")
    torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 2.0))
    g(torch.ones(2), torch.ones(2))
    f(torch.ones(3))
    assert [(name, cid) for name, cid, _ in capture.calls] == [
        ("outer", "0/0"), ("callee", "1/0"), ("add", "2/0"), ("outer", "0/1"), ("callee", "1/1")]


def test_reset_forgets_everything(capture):
    f = compiler.compile(add, backend="eager")
    f(torch.ones(2), torch.ones(2))
    compiler.reset()
    f(torch.ones(2), torch.ones(2))
    assert [cid for _, cid, _ in capture.calls] == ["0/0", "0/0"]


def test_wrong_arguments_raise_the_functions_own_type_error(capture):
    f = compiler.compile(add, backend="eager")
    with pytest.raises(TypeError, match="add\\(\\) missing 1 required positional argument: 'y'"):
        f(torch.ones(2))
    f(torch.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        f(torch.ones(2))
    assert len(capture.calls) == 1


def test_guards_artifact_logged_per_compile(capture, events):
    f = compiler.compile(add, backend="eager")
    f(torch.ones(2), torch.ones(2))
    [text] = _payloads(events, "guards")
    assert text.startswith("GUARDS:") and "TENSOR_MATCH: check_tensor(L['x']" in text
    assert "GLOBAL_STATE: torch.is_grad_enabled() is True" in text


def test_nested_frame_with_nothing_to_compile_is_skipped(capture):
    def passthrough(x):
        return x

    def outer(x):
        return x

    passthrough.no_graph = True
    outer.callee = passthrough
    f = compiler.compile(outer, backend="eager", dynamic=False)
    for n in [2, 3, 4]:
        x = torch.randn(n)
        assert f(x) is x
    # the callee (like a resume function) is captured once, then runs as is without guards;
    # the top-level function keeps its entries and recompiles on each new size
    assert [name for name, _, _ in capture.calls] == ["outer", "passthrough", "outer", "outer"]


def test_top_level_frame_with_nothing_to_compile_keeps_guards(capture):
    def passthrough(x):
        return x

    passthrough.no_graph = True
    f = compiler.compile(passthrough, backend="eager", dynamic=False)
    f(torch.randn(2))
    f(torch.randn(3))
    assert len(capture.calls) == 2


def test_suppress_errors_runs_eagerly(monkeypatch):
    def broken_capture(*args, **kwargs):
        raise RuntimeError("internal capture bug")

    monkeypatch.setattr(eval_frame, "capture_impl", broken_capture)
    compiler.reset()
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="internal capture bug"):
        compiler.compile(add, backend="eager")(x, x)
    f = compiler.compile(add, backend="eager", options={"frontend.suppress_errors": True})
    torch.testing.assert_close(f(x, x), x + x)
    torch.testing.assert_close(f(x, x), x + x)


def test_dynamic_config_options(capture):
    with config.patch(**{"frontend.automatic_dynamic_shapes": False}):
        f = compiler.compile(add, backend="eager")
        for n in [3, 4, 5]:
            f(torch.randn(n), torch.randn(n))
    assert [dims for _, _, dims in capture.calls] == [{}, {}, {}]
    with config.patch(**{"frontend.assume_static_by_default": False}):
        g = compiler.compile(scale, backend="eager")
        g(torch.randn(3), 2)
    assert capture.calls[-1][2] == {"L['x']": {0}}
