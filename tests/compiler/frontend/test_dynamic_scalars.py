"""Automatic dynamic for Python scalars (frontend/dynamic.py): an int/float of a frame's locals
(an argument, or a value that crossed a graph break into a resume function) is a constant until
its CONSTANT_MATCH guard fails on a new value; the recompile makes it a SymInt/SymFloat graph
input guarded by its type, so later values need no recompile. Every call is checked against
eager."""
import pytest
import torch

from tracetorch import compiler
from tests.compiler.frontend.capture_harness import GraphListBackend
from tracetorch import logs


def recompiles(events):
    return [e.payload for e in events if e.name == "recompiles"]


def marks(events):
    return [e.fields for e in events if e.name == "automatic_dynamic_scalar"]


def run(fn, calls, dynamic=None):
    """Call the compiled fn with each argument tuple; compare with eager every time."""
    c = GraphListBackend()
    g = compiler.compile(fn, backend=c, dynamic=dynamic)
    for args in calls:
        torch.testing.assert_close(g(*args), fn(*args))
    return c


# ---- a scalar crossing a graph break -------------------------------------------------------
def item_scale(x):
    s = x.max().item()                  # graph break: the float crosses it on the stack
    return x / (abs(s) + 1)


def item_int(x):
    n = int(x.abs().sum().item()) % 3 + 1     # int() of the float after the break
    return x * n


def test_float_crossing_break_recompiles_once(events):
    xs = [torch.full((3, 4), float(v)) for v in (1.5, -2.0, 3.25, 7.0, -0.5, 11.0)]
    run(item_scale, [(x,) for x in xs])
    rs = recompiles(events)
    assert len(rs) == 1, rs                       # the resume function, once
    assert "__resume_at_" in rs[0]
    assert "L['___stack'][0] == 1.5: '___stack[0]' value mismatch. expected 1.5, actual -2.0" in rs[0]
    assert [(m["source"], m["type"]) for m in marks(events)] == [("L['___stack'][0]", "float")]
    assert "automatic dynamic float L['___stack'][0] 1.5 != -2.0" in marks(events)[0]["reason"]
    guards = [e.payload for e in events if e.name == "guards"][-1]
    assert "TYPE_MATCH: ___check_type_id(L['___stack'][0], float)" in guards
    assert "CONSTANT_MATCH: L['___stack'][0]" not in guards


def test_int_from_float_crossing_break_is_symbolic(events):
    xs = [torch.full((2, 2), float(v)) for v in (0.5, 1.25, 2.0, 4.75, 9.0, 1.0)]
    c = run(item_int, [(x,) for x in xs])
    assert len(recompiles(events)) == 1
    # the resume graph takes the float and truncates it in the graph (torch.sym_int: no guard
    # on its value), so n = trunc(s) % 3 + 1 stays symbolic
    last = c.graphs[-1]
    assert any(n.target is torch.sym_int for n in last.graph.nodes), last.code


def test_new_shape_and_new_scalar_after_marking(events):
    # the corpus's schedule: same shape twice, then two new sizes (Dynamo: 3 recompiles)
    calls = [(torch.randn(3, 4),), (torch.randn(3, 4),), (torch.randn(5, 4),), (torch.randn(6, 4),),
             (torch.randn(7, 4),)]
    run(item_scale, calls)
    assert len(recompiles(events)) == 3


# ---- int / float arguments of the compiled function ----------------------------------------
def scale(x, n):
    return x * n + 1


def test_int_argument_recompiles_once_then_symbolic(events):
    x = torch.randn(4)
    c = run(scale, [(x, 2), (x, 3), (x, 4), (x, 5), (x, 0), (x, 1), (x, -7)])
    assert len(c.graphs) == 2
    rs = recompiles(events)
    assert len(rs) == 1
    assert "L['n'] == 2: 'n' value mismatch. expected 2, actual 3" in rs[0]
    assert [(m["source"], m["type"], m["expected"], m["actual"]) for m in marks(events)] == \
        [("L['n']", "int", 2, 3)]
    placeholders = [n for n in c.graphs[-1].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 2 and isinstance(placeholders[1].meta["example_value"], torch.SymInt)


def test_float_argument_recompiles_once(events):
    x = torch.randn(4)
    c = run(scale, [(x, 0.5), (x, 0.25), (x, 2.0), (x, -3.5)])
    assert len(c.graphs) == 2
    assert len(recompiles(events)) == 1
    assert isinstance([n for n in c.graphs[-1].graph.nodes if n.op == "placeholder"][1]
                      .meta["example_value"], torch.SymFloat)


def test_type_change_is_not_a_dynamic_mark(events):
    x = torch.randn(4)
    run(scale, [(x, 2), (x, 2.0)])
    assert len(recompiles(events)) == 1
    assert marks(events) == []


def branchy(x, n):
    if n > 2:
        return x + n
    return x - n


def test_branch_on_dynamic_int_guards_the_condition(events):
    x = torch.randn(4)
    c = run(branchy, [(x, 3), (x, 4), (x, 5), (x, 9), (x, 1), (x, 0), (x, -4)])
    # 3 -> 4 marks n dynamic (the recompiled entry guards 3 <= n); 1 fails that guard: one
    # more entry for n < 3, which covers 0 and -4
    assert len(c.graphs) == 3
    assert len(recompiles(events)) == 2
    assert "symbolic shape guard failed: 3 <= n (n = 1)" in recompiles(events)[1]


def loop(x, n):
    for i in range(n):
        x = x + i
    return x


def test_range_of_dynamic_int_specializes_with_a_guard(events):
    x = torch.randn(3)
    c = run(loop, [(x, 2), (x, 3), (x, 3), (x, 2)])
    # range() needs the value: the symbolic n is specialized (guarded n == 3), no graph break
    assert len(c.graphs) == 2
    assert len(recompiles(events)) == 1


def break_between(x, n):
    y = x * 2
    print("test_dynamic_scalars: break")
    return y + n, n


def test_int_argument_live_across_a_break(events, capsys):
    x = torch.randn(3)
    run(break_between, [(x, 1), (x, 2), (x, 3), (x, 10)])
    rs = recompiles(events)
    # n is not read before the break (no guard there): only the resume function, which
    # reads it, recompiles, once
    assert len(rs) == 1, rs
    assert "__resume_at_" in rs[0] and "L['n'] == 1: 'n' value mismatch" in rs[0]
    assert [m["source"] for m in marks(events)] == ["L['n']"]


_G = 1


def uses_global(x):
    return x * _G


def test_global_int_stays_specialized(events):
    global _G
    c = GraphListBackend()
    g = compiler.compile(uses_global, backend=c)
    x = torch.randn(3)
    for v in (1, 2, 3, 4):
        _G = v
        torch.testing.assert_close(g(x), uses_global(x))
    _G = 1
    assert len(c.graphs) == 4           # as Dynamo: ints from globals are specialized
    assert marks(events) == []


# ---- dynamic=False / dynamic=True ----------------------------------------------------------
def test_dynamic_false_keeps_specializing(events):
    x = torch.randn(4)
    c = run(scale, [(x, 2), (x, 3), (x, 4), (x, 5)], dynamic=False)
    assert len(c.graphs) == 4
    assert len(recompiles(events)) == 3
    assert marks(events) == []
    guards = [e.payload for e in events if e.name == "guards"][-1]
    assert "CONSTANT_MATCH: L['n'] == 5" in guards


def test_dynamic_false_scalar_across_break(events):
    xs = [torch.full((3,), float(v)) for v in (1.0, 2.0, 3.0)]
    run(item_scale, [(x,) for x in xs], dynamic=False)
    assert len(recompiles(events)) == 2       # every new value
    assert marks(events) == []


def test_dynamic_true_scalar_argument_symbolic_at_once(events):
    x = torch.randn(4)
    c = run(scale, [(x, 2), (x, 3), (x, 4)], dynamic=True)
    assert len(c.graphs) == 1
    assert recompiles(events) == []


def test_automatic_dynamic_shapes_off_keeps_scalars_static(events):
    x = torch.randn(4)
    with compiler.config.patch(**{"frontend.automatic_dynamic_shapes": False}):
        c = run(scale, [(x, 2), (x, 3), (x, 4)])
    assert len(c.graphs) == 3
    assert marks(events) == []


def test_default_backend_matches_eager_with_dynamic_scalars(events):
    g = compiler.compile(item_int, backend="aot_eager")
    for v in (0.5, 1.25, 2.0, 4.75):
        x = torch.full((2, 2), v)
        torch.testing.assert_close(g(x), item_int(x))
    h = compiler.compile(scale, backend="aot_eager")
    x = torch.randn(4)
    for n in (2, 3, 4):
        torch.testing.assert_close(h(x, n), scale(x, n))


# ---- code that needs a dynamic scalar's value ----------------------------------------------
def _in_tuple(x, n):
    return x * 2 if n in (1, 2, 3) else x


def _fstring(x, n):
    return x + len(f"{n}")


def _round(x, n):
    return x + round(n / 3, 2)


def _str_index(x, n):
    return x + len("abcdef"[n])


def _list_repeat(x, n):
    return x + sum([1] * n)


def _dict_key(x, n):
    return x + {2: 1.0, 3: 2.0, 4: 3.0}[n]


@pytest.mark.parametrize("fn", [_in_tuple, _fstring, _round, _str_index, _list_repeat, _dict_key])
def test_value_needed_specializes_without_graph_break(events, fn):
    with logs.testing.capture(artifacts={"graph_breaks"}) as got:
        g = compiler.compile(fn, backend="eager")
        for n in (2, 3, 4):
            x = torch.randn(5)
            torch.testing.assert_close(g(x, n), fn(x, n))
    assert [e for e in got if e.name == "graph_breaks"] == []
    assert [m["source"] for m in marks(events)] == ["L['n']"]


def _hashed(x, n):
    return x + hash(n) % 7


def test_symbolic_scalar_that_cannot_specialize_is_captured_constant(events):
    # hash() of a SymInt: no symbolic answer; the capture restarts with the scalar constant
    # (logged), so the result is still right and nothing worse than before happens
    g = compiler.compile(_hashed, backend="eager")
    for n in (2, 3, 40):
        x = torch.randn(3)
        torch.testing.assert_close(g(x, n), _hashed(x, n))
    specialized = [e.fields for e in events if e.name == "dynamic_scalars_specialized"]
    assert specialized and specialized[0]["sources"] == ["L['n']"]
    assert "Sym(n)" in specialized[0]["reason"]


def test_str_computed_at_a_break_is_unspecialized_after_it_changes():
    """f"{tensor}" is computed eagerly at the break and crosses it as a str; its value changes
    every call, so after the first change the resume function stops guarding it (only its
    type; len() is a symbolic input) instead of recompiling on every call."""
    from tracetorch import compiler as _compiler
    from tracetorch import logs as _logs
    from tests.compiler.frontend.capture_harness import CountingBackend

    def f(x):
        y = x + 1
        s = f"{y.sum()}"
        return y * len(s)

    _compiler.reset()
    with _logs.testing.capture(artifacts={"recompile"}) as events:
        compiled = _compiler.compile(f, backend=CountingBackend())
        for i in range(6):
            x = torch.randn(3, 4)
            torch.testing.assert_close(compiled(x), f(x))
    assert sum(e.name == "recompile" for e in events) == 1
