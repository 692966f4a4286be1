"""Graph breaks, resume functions, side effects and fullgraph errors of capture_frame.
Every compiled result is compared with eager; graph and break counts are asserted."""
import time

import pytest
import torch

from tracetorch.compiler.errors import CompilerError, GraphBreakError
from tracetorch.compiler.frontend.errors import FullgraphError
from tests.compiler.frontend.capture_harness import Recorder, check, same

LOG = []


def quiet(*args, **kwargs):
    LOG.append(args)


def brk_print(x, y):
    a = x + 1
    print("graph break here", end="\r")
    return a * y


def brk_item(x, y):
    a = x.sum()
    if a.item() > 0:
        return x + 1
    return x - 1


def brk_bool(x, y):
    z = x * 2
    if (z > 0).all():
        return z + y
    return z - y


def logged(t):
    t = t + 1
    print("inner", end="\r")
    return t * 2


def brk_nested(x, y):
    a = x * 3
    b = logged(a)
    return b + y


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def helper(self, t):
        print("method", end="\r")
        return self.lin(t)

    def forward(self, x):
        return self.helper(x).relu() + 1


net = Net()


def brk_method(x, y):
    return net(x) * y


def brk_multi(x, y):
    x = x + 1
    print(1, end="\r")
    x = x * 2
    print(2, end="\r")
    return x - y


def brk_loop(x, y):
    for i in range(3):
        x = x + i
        print(i, end="\r")
    return x * 2


def brk_stack_below(x, y):
    return torch.add(x * 2, logged(y)) - 1


def brk_numpy(x, y):
    # numpy on tensors is traced (numpy_calls.py); its data in Python is not
    return torch.tensor(x.numpy().tolist()) * 2 + y


def brk_tolist(x, y):
    return sum(x.tolist()[0]) + y


def brk_try(x, y):
    # a break inside a try block (a plain try body is traced through, as Dynamo does)
    z = x * 2
    try:
        print("in try", end="\r")
        z = z + y
    except RuntimeError:
        z = x
    return z * 2


def brk_generator(x, y):
    def gen():
        got = yield x
        yield y * got
    g = gen()       # stepped lazily by next(); a value sent in is still a break
    first = next(g)
    return [first, g.send(2)]


def brk_id(x, y):
    return x + (id(y) % 1)


def brk_no_grad(x, y):
    with torch.no_grad():
        z = x * 2
        print("in no_grad", end="\r")
        z = z + y
    return z, z.requires_grad, torch.is_grad_enabled()


def brk_nested_grad_modes(x, y):
    with torch.no_grad():
        with torch.enable_grad():
            a = x * 2
            print("deep", end="\r")
            b = a.sum() + torch.is_grad_enabled()
        c = y * 3
    return a, b, c, torch.is_grad_enabled()


def brk_locals_changed(x, y):
    a, b = x + 1, [y, 2]
    n = 3
    t0 = time.perf_counter()          # an opaque C function: runs eagerly
    return a * n, b, n, isinstance(t0, float)


def brk_with_cells(x, y):
    k = 2
    scaled = [t * k for t in (x, y)]      # 3.11: k becomes a cell variable
    print("cells", end="\r")
    k = k + 1
    return [t * k for t in scaled], (lambda t: t * k)(y)


def brk_closure_alive(x, y):
    k = 2
    f = lambda t: t * k                    # a closure alive across the break
    print("closure", end="\r")
    k = 3
    return f(x) + y


def brk_closure_shared(x, y):
    k = 2
    f = lambda t: t * k                    # also held by a tuple: cannot be made again
    fs = (f,)
    print("closure", end="\r")
    k = 3
    return fs[0](x) + y


def brk_closure_in_list(x, y):
    k = 2
    f = lambda t: t * k                    # held by a list only a local holds: made again
    fs = [f, y]
    print("closure", end="\r")
    k = 3
    return fs[0](x) + fs[1] + f(y)


BREAKS = [  # program, expected graph breaks in the first capture (resume functions add their own)
    (brk_print, 1), (brk_item, 1), (brk_bool, 1), (brk_nested, 1), (brk_method, 1),
    (brk_multi, 1), (brk_loop, 1), (brk_stack_below, 1), (brk_numpy, 1), (brk_tolist, 1),
    (brk_try, 1), (brk_generator, 1), (brk_id, 1), (brk_no_grad, 1), (brk_locals_changed, 1),
    (brk_with_cells, 1), (brk_closure_alive, 1), (brk_nested_grad_modes, 1),
]


@pytest.mark.parametrize("fn,n", BREAKS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_break_matches_eager(fn, n):
    for sign in (1, -1):
        x, y = sign * torch.rand(4, 3) + 0.1 * sign, torch.randn(4, 3)
        rec = check(fn, x, y)
        first = rec.results[0]
        assert len(first.graph_breaks) == n
        gb = first.graph_breaks[0]
        assert gb.filename == __file__ and gb.lineno and gb.source_line and gb.reason


def test_code_after_break_is_compiled():
    rec = check(brk_multi, torch.randn(3), torch.randn(3))
    assert len(rec.graphs) == 3           # x+1 | x*2 | x-y, each its own graph
    assert len(rec.breaks) == 2
    assert [b.lineno for b in rec.breaks] == [brk_multi.__code__.co_firstlineno + 2,
                                              brk_multi.__code__.co_firstlineno + 4]


def test_break_inside_grad_mode_blocks_resumes_compiled():
    x = torch.randn(3, requires_grad=True)
    for fn in (brk_no_grad, brk_nested_grad_modes):
        rec = check(fn, x, x)
        assert len(rec.graphs) == 2 and len(rec.breaks) == 1, fn.__name__
        assert torch.is_grad_enabled()


def test_break_with_cell_variables_resumes():
    rec = check(brk_with_cells, torch.randn(3), torch.randn(3))
    assert len(rec.graphs) == 2 and len(rec.breaks) == 1


def test_break_with_live_closure_resumes_compiled():
    # the closure, held by a local only, is made again over the resume function's cells
    # and f(x) + y is one graph of the resume function (nothing to compute before the break)
    rec = check(brk_closure_alive, torch.randn(3), torch.randn(3))
    assert len(rec.graphs) == 1 and len(rec.breaks) == 1
    assert "closure" not in rec.breaks[0].reason


def test_break_with_shared_closure_runs_rest_eagerly():
    rec = check(brk_closure_shared, torch.randn(3), torch.randn(3))
    assert "closure" in rec.breaks[0].reason


def test_break_with_closure_in_a_list_resumes_compiled():
    # the list travels with None in the closure's place; the resume prologue copies it and
    # puts the closure made again over its own cells back there
    rec = check(brk_closure_in_list, torch.randn(3), torch.randn(3))
    assert len(rec.breaks) == 1 and "closure" not in rec.breaks[0].reason
    assert len(rec.graphs) == 1


def test_break_in_inlined_call_compiles_the_callee():
    rec = check(brk_nested, torch.randn(3), torch.randn(3))
    codes = [r.fn.__code__.co_name for r in rec.results]
    assert "logged" in codes             # the callee was captured as a frame of its own
    gb = rec.results[0].graph_breaks[0]
    assert len(gb.user_stack) == 2 and "logged" in gb.user_stack[1]
    assert gb.source_line.startswith("print(")


class _Scaler:
    def apply(self, t, *, scale):
        t = t * scale
        print("scaler", end="\r")
        return t + 1


_SCALER = _Scaler()


def brk_loop_callees(x, y):
    # the callees break inside, in a loop the caller cannot resume in: the caller runs
    # eagerly, its calls are routed to the callees compiled on their own (keyword arguments,
    # a method loaded with LOAD_METHOD, a builtin call that must pass unchanged)
    for i in range(2):
        x = logged(x)
        x = _SCALER.apply(x, scale=i + 2)
        y = abs(y)
    return x + y


def test_eager_loop_compiles_its_callees():
    rec = check(brk_loop_callees, torch.randn(3), torch.randn(3))
    top = rec.results[0]
    assert not top.graphs and not top.graph_breaks      # the break is reported by the callee
    assert top.fn is not brk_loop_callees                # rewritten to route its calls
    codes = [r.fn.__code__.co_name for r in rec.results]
    assert codes.count("logged") == 2 and codes.count("apply") == 2, codes
    assert all(b.filename == __file__ for b in rec.breaks) and len(rec.breaks) >= 2


def test_break_reasons_name_the_construct():
    cases = {brk_item: "item", brk_bool: "bool", brk_numpy: "numpy", brk_generator: "generator",
             brk_try: "try", brk_print: "print"}
    for fn, word in cases.items():
        rec = check(fn, torch.randn(3, 3), torch.randn(3, 3))
        assert word in rec.results[0].graph_breaks[0].reason, rec.results[0].graph_breaks[0]


class Box:
    def __init__(self):
        self.count = 0
        self.items = []


STATE = {"box": Box(), "lst": [], "d": {}}
COUNTER = 0


def side_effects(x, box, lst, d):
    global COUNTER
    lst.append(x * 2)
    box.count = box.count + 1
    box.last = x + 1
    d["k"] = x.sum()
    COUNTER = COUNTER + 1
    return x * len(lst), box.count


def side_effects_with_break(x, box, lst, d):
    lst.append(1)
    box.count = 5
    print("side effects happen before this", end="\r")
    lst.append(len(lst))
    box.count = box.count * 2
    return x + box.count


@pytest.mark.parametrize("fn", [side_effects, side_effects_with_break], ids=lambda f: f.__name__)
def test_side_effects_replayed(fn):
    global COUNTER
    x = torch.randn(3)
    states = []
    for mode in ("eager", "compiled"):
        COUNTER = 0
        box, lst, d = Box(), [torch.ones(1)], {"a": 1}
        if mode == "eager":
            out = fn(x, box, lst, d)
        else:
            rec = Recorder()
            r = rec.capture(fn, (x, box, lst, d), {})
            out = r.fn(x, box, lst, d)
        states.append((out, COUNTER, box.__dict__, lst, d))
    assert same(states[0][0], states[1][0])
    assert states[0][1] == states[1][1]
    assert same(states[0][2], states[1][2])
    assert same(states[0][3], states[1][3])
    assert same(states[0][4], states[1][4])


def test_side_effects_artifact_and_order():
    box, lst, d = Box(), [], {}
    r = Recorder().capture(side_effects, (torch.randn(2), box, lst, d), {})
    src = r.transformed_source
    # replay order: list, attribute writes, dict, global -- as they happened
    order = [src.index("lst[:]"), src.index("box.count ="), src.index("box.last ="),
             src.index("d.clear()"), src.index("global COUNTER")]
    assert order == sorted(order), src


def test_fullgraph_error():
    x = torch.randn(3)
    with pytest.raises(FullgraphError) as info:
        Recorder().capture(brk_nested, (x, x), {}, fullgraph=True)
    e = info.value
    assert isinstance(e, GraphBreakError) and isinstance(e, CompilerError)
    assert e.filename == __file__ and e.lineno == logged.__code__.co_firstlineno + 2
    text = str(e)
    assert "print(" in text and "^" in text and f"{__file__}:{e.lineno}" in text
    assert "brk_nested" in text          # the user stack names the outer frame


def test_fullgraph_ok_when_no_break():
    x = torch.randn(3)
    LOG.clear()
    r = Recorder().capture(lambda a, b: quiet(a) or a * b + 1, (x, x), {}, fullgraph=True)
    assert r.graph_breaks == [] and len(r.graphs) == 1
    assert same(r.fn(x, x), x * x + 1) and len(LOG) == 1   # the inlined append was replayed


class Holder:
    def __init__(self):
        self.items = []


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)


def aliased_mutation(x, o, m):
    o.items.append(x)
    a = len(o.items)              # a second read of o.items sees the append
    m.lin.count = 5
    b = m.lin.count               # and of m.lin the attribute write
    alias = o.items
    alias.append(x * 2)
    return x * a + b, len(o.items)


def test_mutation_seen_through_every_path():
    x = torch.randn(2)
    o1, m1 = Holder(), Counter()
    expected = aliased_mutation(x, o1, m1)
    o2, m2 = Holder(), Counter()
    r = Recorder().capture(aliased_mutation, (x, o2, m2), {})
    assert same(r.fn(x, o2, m2), expected)
    assert len(o2.items) == len(o1.items) == 2 and m2.lin.count == 5


JOURNAL = []


def append_only(x):
    y = x * 2
    JOURNAL.append(y)
    JOURNAL.extend([1, 2])
    return y + 1


def append_then_read(x, lst):
    lst.append(x)
    n = len(lst)                  # reading it: guarded on its length, replayed in full
    lst.append(x * n)
    return lst[-1] + n


def test_append_only_list_is_not_guarded():
    JOURNAL.clear()
    x = torch.randn(3)
    r = Recorder().capture(append_only, (x,), {})
    assert not [g for g in r.guards if g.source.startswith("G['JOURNAL']") and g.kind != "TYPE_MATCH"]
    out = r.fn(x)
    assert same(out, x * 2 + 1) and len(JOURNAL) == 3 and same(JOURNAL[0], x * 2)
    from tracetorch import compiler
    compiler.reset()
    JOURNAL.clear()
    opt = compiler.compile(append_only, backend="eager")
    for _ in range(4):
        assert same(opt(x), x * 2 + 1)
    assert len(JOURNAL) == 12
    report = compiler.explain(append_only)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0


def test_append_then_read_list():
    x = torch.randn(3)
    a, b = [torch.ones(3)], [torch.ones(3)]
    expected = append_then_read(x, a)
    r = Recorder().capture(append_then_read, (x, b), {})
    assert ("L['lst']", "LENGTH_CHECK") in {(g.source, g.kind) for g in r.guards}
    assert same(r.fn(x, b), expected) and same(a, b)
