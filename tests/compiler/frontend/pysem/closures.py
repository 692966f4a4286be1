"""Closures and cells: nonlocal, cell contents changing between calls, late binding."""
import torch

from tests.compiler.frontend.pysem import World, brk, case

PROGRAMS = []
P = PROGRAMS.append


@case("closures")
def closed_over_set_mutated_between_calls():
    s = {1}

    def f(x):
        return x + len(s), 3 in s

    def before(i):
        s.add(i + 2)
    return World(f, before=before, observe=lambda: sorted(s))
P(closed_over_set_mutated_between_calls)


@case("closures")
def closed_over_list_and_dict_mutated_between_calls():
    scale = [1.0]
    cfg = {"k": 2}

    def f(x):
        return x * scale[0] + cfg["k"]

    def before(i):
        scale[0] = float(i + 1)
        cfg["k"] = i * 3
    return World(f, before=before)
P(closed_over_list_and_dict_mutated_between_calls)


@case("closures")
def cell_rebound_between_calls():
    factor = 1

    def f(x):
        return x * factor

    def before(i):
        nonlocal factor
        factor = i + 2
    return World(f, before=before)
P(cell_rebound_between_calls)


@case("closures")
def nonlocal_counter_in_frame():
    def f(x):
        count = 0

        def bump(v):
            nonlocal count
            count += 1
            return v + count
        y = bump(x)
        y = bump(y)
        return y, count
    return f
P(nonlocal_counter_in_frame)


@case("closures")
def persistent_nonlocal_counter():
    count = 0

    def f(x):
        nonlocal count
        count += 1
        return x + count
    return World(f, observe=lambda: count)
P(persistent_nonlocal_counter)


@case("closures")
def late_binding_lambdas():
    def f(x):
        fns = [lambda v: v * i for i in range(3)]
        bound = [lambda v, i=i: v * i for i in range(3)]
        return [g(x) for g in fns], [g(x) for g in bound]
    return f
P(late_binding_lambdas)


@case("closures", args=lambda i: (torch.ones(2) * i, i % 2), calls=4)
def closure_recreated_each_call():
    def make(k):
        def inner(x):
            return x + k
        return inner

    def f(x, k):
        g = make(k)
        return g(x)
    return f
P(closure_recreated_each_call)


@case("closures", args=lambda i: (torch.ones(2) * i, i + 1))
def closure_argument_passed_in():
    def outer(k):
        return lambda v: v * k

    def f(x, k):
        return outer(k)(x), outer(2)(k)
    return f
P(closure_argument_passed_in)


@case("closures")
def closure_across_graph_break():
    def f(x):
        y = x + 1

        def add(v):
            return v + y
        brk()
        return add(x)
    return f
P(closure_across_graph_break)


@case("closures")
def nested_three_levels():
    def f(x):
        a = 1

        def mid():
            b = 2

            def inner(v):
                return v + a + b
            return inner
        return mid()(x)
    return f
P(nested_three_levels)


@case("closures")
def closure_over_tensor_global_changed():
    holder = {"w": torch.ones(3)}

    def f(x):
        w = holder["w"]
        return (lambda v: v * w)(x)

    def before(i):
        holder["w"] = torch.full((3,), float(i))
    return World(f, before=before)
P(closure_over_tensor_global_changed)


def _fresh_closure(i):
    k = i % 2 + 1

    def scale(v):
        return v * k
    return (torch.ones(2) * i, scale)


@case("closures", args=_fresh_closure, calls=4)
def closure_argument_recreated_each_call():
    def f(x, fn):
        return fn(x) + 1
    return f
P(closure_argument_recreated_each_call)


@case("closures", args=lambda i: (torch.full((2,), float(i + 1)), i * 3))
def closure_nonlocal_write_after_break():
    # a counter closure made before the break, bumped before and after it through nonlocal;
    # the frame also rebinds the cell after the break: both must see one cell throughout
    def f(x, n):
        count = n

        def bump(k):
            nonlocal count
            count += k
            return count
        first = bump(1)
        brk()
        y = x * bump(2)
        count += 10
        return y + bump(1), count, first
    return f
P(closure_nonlocal_write_after_break)


@case("closures", args=lambda i: (torch.full((2,), float(i + 1)), float(i) - 0.5))
def closure_over_two_cells_with_alias():
    # a closure over two cells (a tensor and a float), held by two locals; the frame rebinds
    # one cell after the break; the alias must stay the same function object
    def f(x, s):
        a = x + 1
        b = s

        def comb(v, w=2):
            return v * a + b * w
        alias = comb
        brk()
        b = b + 2
        return comb(x), alias(a, 3), alias is comb
    return f
P(closure_over_two_cells_with_alias)


@case("closures")
def closure_over_cell_and_free_variable_across_break():
    # the compiled function is itself a closure: the inner function closes over one of its
    # free variables (rebound by the function after the break) and over one of its own cells
    scale = [2.0]
    offset = 1.0

    def f(x):
        nonlocal offset
        t = x * scale[0]

        def g(v):
            return v * offset + t
        brk()
        offset = offset + 1.0
        return g(x)
    return World(f, observe=lambda: offset)
P(closure_over_cell_and_free_variable_across_break)


@case("closures")
def closure_in_a_list_across_break():
    # the closure is also held by a list: it is not made again, the frame's cell must still be
    # the one the closure reads after the break
    def f(x):
        y = x + 1

        def add(v):
            return v + y
        fns = [add]
        brk()
        y = y * 3
        return fns[0](x), add(x)
    return f
P(closure_in_a_list_across_break)


@case("closures", args=lambda i: (torch.full((3,), float(i + 1)), i))
def closure_in_a_dict_across_break():
    # a dict made in the frame holds two closures over one cell: after the break both read
    # the cell the frame writes, and the dict keeps its other values and its key order
    def f(x, n):
        y = x + n

        def add(v):
            return v + y

        def mul(v):
            return v * y
        table = {"first": n, "add": add, "mul": mul}
        brk()
        y = y - 1
        return table["add"](x), table["mul"](x), list(table), table["first"]
    return f
P(closure_in_a_dict_across_break)
