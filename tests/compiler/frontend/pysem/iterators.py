"""Iterators, lazy builtins (map/zip/filter/enumerate) and generators."""
import torch

from tests.compiler.frontend.pysem import World, brk, case

PROGRAMS = []
P = PROGRAMS.append


@case("iterators")
def map_is_lazy_and_ordered():
    log = []

    def g(v):
        log.append(v)
        return v * 2

    def f(x):
        log.clear()
        m = map(g, [1, 2, 3])
        log.append("made")
        first = next(m)
        log.append("first")
        rest = list(m)
        return x + first + sum(rest), list(log)
    return World(f, observe=lambda: list(log))
P(map_is_lazy_and_ordered)


@case("iterators")
def map_interleaves_with_loop_body():
    log = []

    def g(v):
        log.append(("map", v))
        return v

    def f(x):
        log.clear()
        for v in map(g, range(3)):
            log.append(("body", v))
            x = x + v
        return x
    return World(f, observe=lambda: list(log))
P(map_interleaves_with_loop_body)


@case("iterators")
def zip_strict_raises():
    def f(x):
        return x + sum(a * b for a, b in zip([1, 2], [3, 4, 5], strict=True))
    return f
P(zip_strict_raises)


@case("iterators")
def zip_strict_ok_and_shortest():
    def f(x):
        pairs = list(zip([1, 2], "ab", strict=True))
        short = list(zip(range(5), [x, x * 2]))
        return pairs, short
    return f
P(zip_strict_ok_and_shortest)


@case("iterators")
def returned_lazy_objects_keep_their_type():
    def f(x):
        return map(lambda v: v + 1, [x, x * 2]), zip([1, 2], [x, x]), filter(None, [0, 1, 2]), \
            enumerate([x], 5)
    return f
P(returned_lazy_objects_keep_their_type)


@case("iterators")
def filter_with_predicate_side_effects():
    seen = []

    def keep(v):
        seen.append(v)
        return v % 2 == 0

    def f(x):
        seen.clear()
        it = filter(keep, range(6))
        a = next(it)
        seen.append("after-first")
        return x + a + sum(it), list(seen)
    return World(f, observe=lambda: list(seen))
P(filter_with_predicate_side_effects)


@case("iterators")
def range_iterator_fresh_per_call():
    def f(x):
        it = range(3).__iter__()
        a = next(it)
        return x + a, list(it), isinstance(iter(range(5)), type(iter(range(1))))
    return f
P(range_iterator_fresh_per_call)


@case("iterators")
def iterator_partially_consumed_across_break():
    def f(x):
        it = iter([1, 2, 3, 4])
        a = next(it)
        brk()
        b = next(it)
        return x + a + b, list(it)
    return f
P(iterator_partially_consumed_across_break)


@case("iterators")
def enumerate_start_and_reversed():
    def f(x):
        out = []
        for i, v in enumerate(reversed([x, x + 1, x + 2]), start=10):
            out.append(v * i)
        return torch.stack(out).sum(0), [i for i, _ in enumerate("abc", 1)]
    return f
P(enumerate_start_and_reversed)


@case("iterators")
def generator_function_consumed():
    def gen(n, x):
        for i in range(n):
            yield x * i

    def f(x):
        return sum(gen(3, x)), list(gen(2, 1))
    return f
P(generator_function_consumed)


@case("iterators")
def next_with_default():
    def f(x):
        it = iter([])
        d = next(it, 7)
        it2 = map(lambda v: v, [x])
        first = next(it2)
        return first + d, next(it2, None)
    return f
P(next_with_default)


@case("iterators")
def map_over_two_iterables_and_zip_unpack():
    def f(x):
        sums = list(map(lambda a, b: a + b, [x, x * 2, x * 3], [1, 2]))
        a, b = zip(*[(1, "a"), (2, "b")])
        return sums, a, b
    return f
P(map_over_two_iterables_and_zip_unpack)


@case("iterators")
def dict_iteration_order_after_mutation():
    def f(x):
        d = {"b": 1, "a": 2}
        d["c"] = 3
        del d["b"]
        d["b"] = 4
        return x + sum(d.values()), [k for k in d], list(reversed(list(d.items())))
    return f
P(dict_iteration_order_after_mutation)


@case("iterators")
def generator_expression_in_any_all():
    calls = []

    def check(v):
        calls.append(v)
        return v > 1

    def f(x):
        calls.clear()
        return x + int(any(check(v) for v in [0, 2, 3])), all(v < 5 for v in range(3))
    return World(f, observe=lambda: list(calls))
P(generator_expression_in_any_all)


@case("iterators")
def map_object_stored_and_resumed_in_loop():
    def f(x):
        m = map(lambda v: v * 10, range(4))
        out = []
        for v in m:
            out.append(v)
            if v >= 10:
                break
        return x + sum(out), list(m)
    return f
P(map_object_stored_and_resumed_in_loop)


@case("iterators")
def short_circuit_genexpr_with_side_effects():
    def f(x):
        seen = []

        def check(v):
            seen.append(v)
            return v > 1
        found = any(check(v) for v in [0, 2, 3, 4])
        first = next(v for v in [5, 6, 7] if not seen.append(v))
        return x + int(found), seen, first
    return f
P(short_circuit_genexpr_with_side_effects)


@case("iterators", args=lambda i: (torch.full((2,), float(i + 1)), [i, i + 1, i + 2, 3]))
def tuple_and_range_iterators_across_break():
    # iterators made in the frame over a tuple (holding tensors) and a range, partly
    # consumed, then finished after a break; the input list's values change per call
    def f(x, xs):
        it = iter((x, x * 2, x * 3, tuple(xs)))
        r = iter(range(xs[0], xs[0] + 4))
        first = next(it)
        skipped = next(r)
        brk()
        second = next(it)
        return first + second, list(it), list(r), skipped
    return f
P(tuple_and_range_iterators_across_break)


@case("iterators", args=lambda i: (torch.full((2,), float(i + 1)), [i, i + 1, i + 2]))
def list_iterator_sees_list_changed_after_break():
    # the list is also a local (and the argument): the iterator must stay live across the
    # break and see the append made after it; a second local holds the same iterator
    def f(x, xs):
        own = [x, x + 1, x + 2]
        it = iter(own)
        alias = it
        arg_it = iter(xs)
        a = next(it)
        next(arg_it)
        brk()
        own.append(x * 10)
        xs.append(len(xs))
        b = next(alias)
        return a + b, list(it), list(arg_it)
    return f
P(list_iterator_sees_list_changed_after_break)


# ---- generators stepped lazily: side effects in CPython's order, the rest never run ----------
@case("iterators", args=lambda i: (torch.full((2,), float(i + 1)), [i, i + 3, 1, i + 5]))
def generator_with_side_effects_in_for_with_break():
    log = []

    def produce(xs, x):
        for v in xs:
            log.append(("make", v))
            yield x * v

    def f(x, xs):
        log.clear()
        out = x
        for t in produce(xs, x):
            log.append("body")
            out = out + t
            if len(log) > 3:
                break
        return out, list(log)
    return World(f, observe=lambda: list(log))
P(generator_with_side_effects_in_for_with_break)


@case("iterators", args=lambda i: (torch.full((2,), float(i + 1)), [i, i + 1, i + 2, i + 3][:2 + i % 2]))
def generator_with_side_effects_zipped_with_shorter_list():
    # zip pulls the generator first: one more item is made (and logged) than zip yields
    log = []

    def produce(n, x):
        for k in range(n):
            log.append(k)
            yield x + k

    def f(x, short):
        log.clear()
        pairs = [a * b for a, b in zip(produce(5, x), short)]
        return sum(pairs), list(log)
    return World(f, observe=lambda: list(log))
P(generator_with_side_effects_zipped_with_shorter_list)


@case("iterators", args=lambda i: (torch.full((2,), float(i + 1)), i))
def generator_next_twice_interleaved():
    log = []

    def produce(x, n):
        log.append("start")
        yield x * 2
        log.append(("middle", n))
        yield x + n
        log.append("never")
        yield x

    def f(x, n):
        log.clear()
        g = produce(x, n)
        log.append("made")
        a = next(g)
        log.append("between")
        b = next(g)
        return a + b, list(log)
    return World(f, observe=lambda: list(log))
P(generator_next_twice_interleaved)


@case("iterators", args=lambda i: (torch.full((2,), float(i + 1)), [i, -1, i + 2]))
def generator_expression_any_stops_at_first_true_item():
    seen = []

    def f(x, xs):
        seen.clear()
        hit = any(seen.append(v) or v < 0 for v in xs)
        rest = all(seen.append(v) or v >= 0 for v in xs)
        return x + int(hit) + int(rest), list(seen)
    return World(f, observe=lambda: list(seen))
P(generator_expression_any_stops_at_first_true_item)


@case("iterators", args=lambda i: (torch.full((2,), float(i + 1)), [i, i + 1]))
def generator_made_before_a_break_consumed_after():
    # not started at the break: the resumed code gets a fresh generator over the same list
    log = []

    def produce(xs):
        for v in xs:
            log.append(v)
            yield v * 2

    def f(x, xs):
        log.clear()
        g = produce(xs)
        y = x + 1
        brk()
        xs.append(7)
        return y + sum(g), list(log)
    return World(f, observe=lambda: list(log))
P(generator_made_before_a_break_consumed_after)
