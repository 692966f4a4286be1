"""Builtins: len, min/max, sorted, sum, round, divmod, isinstance, type, int/float/str, etc."""
import math

import torch
import torch.nn.functional as F

from tests.compiler.frontend.pysem import World, brk, case

PROGRAMS = []
P = PROGRAMS.append


def _sizes(i):
    return (torch.arange(float([2, 3, 5, 4][i])),)


@case("builtins", args=_sizes, calls=4)
def shape_arithmetic_across_dynamic_sizes():
    def f(x):
        return F.pad(x, (1, 1)) + x.shape[-1], x.split(1)[-1], x.unbind(0)[-1] + 1, \
            torch.linspace(0, 1, 2 * x.shape[-1]), x.sum() / max(1, x.shape[0])
    return f
P(shape_arithmetic_across_dynamic_sizes)


@case("builtins", args=_sizes, calls=4)
def size_used_as_python_int():
    def f(x):
        n = x.shape[0]
        lst = list(range(n))
        return x + len(lst), n // 2, n % 2 == 0, x.view(n, 1).shape
    return f
P(size_used_as_python_int)


@case("builtins", args=lambda i: (torch.ones(2), [3, -2, 7][i], [0.5, 2.25, -1.5][i]))
def numeric_builtins():
    def f(x, n, v):
        return x + abs(n), divmod(n, 3), round(v), round(v, 1), int(v), float(n), pow(n, 2), \
            min(n, 1), max(v, 0.0), bool(n), str(n) + "!", hex(abs(n)), math.floor(v)
    return f
P(numeric_builtins)


@case("builtins")
def sum_min_max_sorted_on_lists():
    def f(x):
        vals = [3, 1, 2]
        return x + sum(vals), min(vals), max(vals, default=0), sorted(vals), sum([x, x], x), \
            min([], default=-1)
    return f
P(sum_min_max_sorted_on_lists)


@case("builtins")
def type_and_isinstance_of_containers():
    def f(x):
        vals = [(1,), [1], {1: 2}, {1}, "s", 1.0, None, x]
        return [type(v).__name__ for v in vals], [isinstance(v, (list, tuple)) for v in vals]
    return f
P(type_and_isinstance_of_containers)


@case("builtins")
def tensor_type_and_new():
    def f(x):
        return x.type(torch.HalfTensor), x.type(), x.new(x.size()).shape, x.new(2, 3).shape, \
            x.new().shape, x.type(torch.float64).dtype
    return f
P(tensor_type_and_new)


@case("builtins")
def aten_overload_attribute():
    def f(x):
        return torch.ops.aten.add.Tensor(x, x), torch.ops.aten.mul.Scalar(x, 3.0)
    return f
P(aten_overload_attribute)


@case("builtins")
def view_before_break_keeps_aliasing():
    def f(x):
        v = x[0]
        w = x.view(-1)
        brk()
        x.add_(1)
        return v + 0, w * 1
    return f
P(view_before_break_keeps_aliasing)


@case("builtins")
def str_formatting_and_methods():
    def f(x):
        name = "Layer"
        s = f"{name}-{3:02d}"
        return x + len(s), s.lower(), s.split("-"), "-".join(["a", "b"]), s.startswith("L"), \
            "{}/{}".format(1, 2), name * 2
    return f
P(str_formatting_and_methods)


@case("builtins")
def id_and_is_comparisons():
    def f(x):
        a = [1]
        b = a
        c = [1]
        return x + 1, a is b, a is c, a == c, None is None, x is x
    return f
P(id_and_is_comparisons)


@case("builtins")
def chained_comparisons_and_ternary():
    def f(x):
        n = x.shape[0]
        ok = 0 < n <= 3
        return (x * 2 if ok else x), ok, 1 < 2 < 1
    return f
P(chained_comparisons_and_ternary)


@case("builtins")
def all_any_on_bools():
    def f(x):
        flags = [True, False]
        return x + 1, all(flags), any(flags), all([]), any([])
    return f
P(all_any_on_bools)


@case("builtins", args=lambda i: (torch.ones(2), [3, 0, -1, 5][i]), calls=4)
def floor_division_of_changing_ints_with_negative_divisors():
    def f(x, n):
        q = (n // 4) // (n or 1)
        r = (n % 3) % -(abs(n) + 1)
        if q > 0:
            return x + 100 + r
        return x * q + r
    return f
P(floor_division_of_changing_ints_with_negative_divisors)
