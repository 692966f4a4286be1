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
