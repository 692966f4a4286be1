"""functools, itertools, operator and collections."""
import collections
import functools
import itertools
import operator

import torch

from tests.compiler.frontend.pysem import World, case

PROGRAMS = []
P = PROGRAMS.append


@case("stdlib")
def functools_reduce():
    def f(x):
        return functools.reduce(operator.add, [x, x, x]), functools.reduce(lambda a, b: a * b, [1, 2, 3], 1)
    return f
P(functools_reduce)


@case("stdlib")
def functools_partial():
    def scale(v, k, bias=0):
        return v * k + bias

    def f(x):
        g = functools.partial(scale, k=2)
        h = functools.partial(scale, x, 3)
        return g(x), h(bias=1)
    return f
P(functools_partial)


@case("stdlib")
def itertools_chain_and_islice():
    def f(x):
        out = list(itertools.chain([1, 2], (3,), [x.sum().item() if False else 4]))
        first = list(itertools.islice(itertools.count(5), 3))
        return x + sum(out), out, first
    return f
P(itertools_chain_and_islice)


@case("stdlib")
def itertools_combinatorics():
    def f(x):
        perms = list(itertools.permutations([1, 2, 3], 2))
        prod = list(itertools.product("ab", [0, 1]))
        combos = list(itertools.combinations(range(4), 2))
        return x + len(perms) + len(prod) + len(combos), perms[:2], prod[-1]
    return f
P(itertools_combinatorics)


@case("stdlib")
def itertools_accumulate_zip_longest():
    def f(x):
        acc = list(itertools.accumulate([1, 2, 3]))
        zl = list(itertools.zip_longest([1, 2], "a", fillvalue=0))
        return x + acc[-1], acc, zl
    return f
P(itertools_accumulate_zip_longest)


@case("stdlib")
def operator_getters():
    def f(x):
        get1 = operator.itemgetter(1)
        get02 = operator.itemgetter(0, 2)
        pairs = [(x, 1, 2), (x * 2, 3, 4)]
        m = operator.methodcaller("split", "-")
        return [get1(p) for p in pairs], get02(pairs[0])[0] + 1, m("a-b")
    return f
P(operator_getters)


@case("stdlib")
def operator_attrgetter():
    class O:
        def __init__(self, v):
            self.v = v
            self.w = 2

    def f(x):
        g = operator.attrgetter("v")
        gw = operator.attrgetter("v", "w")
        o = O(x)
        return g(o) * 2, gw(o)[1]
    return f
P(operator_attrgetter)


@case("stdlib")
def collections_deque():
    def f(x):
        d = collections.deque([1, 2])
        d.append(3)
        d.appendleft(0)
        last = d.pop()
        first = d.popleft()
        return x + last + first, list(d), len(d)
    return f
P(collections_deque)


@case("stdlib")
def collections_ordered_dict():
    def f(x):
        od = collections.OrderedDict()
        od["b"] = x
        od["a"] = x * 2
        return od["a"] + od["b"], list(od), type(od).__name__
    return f
P(collections_ordered_dict)


@case("stdlib")
def collections_defaultdict():
    def f(x):
        dd = collections.defaultdict(list)
        dd["a"].append(1)
        dd["a"].append(2)
        dd["b"].append(3)
        counts = collections.defaultdict(int)
        for ch in "abca":
            counts[ch] += 1
        return x + len(dd["a"]), dict(dd), dict(counts)
    return f
P(collections_defaultdict)


@case("stdlib")
def collections_counter():
    def f(x):
        c = collections.Counter("abca")
        return x + c["a"], c.most_common(1)
    return f
P(collections_counter)


@case("stdlib")
def operator_functions_on_tensors():
    def f(x):
        return operator.mul(x, 2), operator.neg(x), operator.getitem([x, 1], 1), operator.truth(0)
    return f
P(operator_functions_on_tensors)


@case("stdlib")
def lru_cache_like_memo():
    memo = {}

    def fib(n):
        if n in memo:
            return memo[n]
        r = n if n < 2 else fib(n - 1) + fib(n - 2)
        memo[n] = r
        return r

    def f(x):
        return x + fib(6)
    return World(f, observe=lambda: dict(memo))
P(lru_cache_like_memo)


@case("stdlib", args=lambda i: (torch.full((2,), float(i)), "abcab"[: 3 + i]))
def collections_counter_arithmetic():
    def f(x, s):
        c = collections.Counter(s)
        d = collections.Counter({"a": 1, "z": 2})
        both = c + d
        c.update("zz")
        return (x * c["a"], c["missing"], both.most_common(2), (c - d), c & d, c | d,
                sorted(c.elements()), c.most_common())
    return f
P(collections_counter_arithmetic)


@case("stdlib", args=lambda i: (torch.tensor([0.5, 1.5, 2.5, 1.5][: 2 + i]) * (i + 1),))
def counter_from_tensor_derived_list():
    # keys computed from tensor values (a graph break: tolist) and from the shape
    def f(x):
        c = collections.Counter((x > 1).tolist())
        c.update([x.shape[0]] * 2, extra=x.dim())
        c.subtract({True: 1})
        neg = -c
        return (x * c[True], c[False], c.total(), +c, neg, c.most_common(), list(c.elements()),
                type(c.elements()).__name__)
    return f
P(counter_from_tensor_derived_list)


def _counter_arg(i):
    return (torch.full((2,), float(i + 1)),
            collections.Counter({"a": i + 1, "b": 2 - i, "c": i}))


@case("stdlib", args=_counter_arg)
def counter_input_mutated_across_calls():
    # a pre-existing Counter whose counts change between calls, mutated in place (replayed)
    seen = collections.Counter(q=1)

    def f(x, c):
        c["a"] += 1
        c += collections.Counter(b=1)
        c -= collections.Counter(z=3)
        seen.update(c)
        both = c | seen
        inter = c & seen
        key, value = c.popitem()
        return x * c["a"] + value, key, both, inter, c.most_common(1), c["nope"], type(c).__name__
    return World(f, observe=lambda: dict(seen))
P(counter_input_mutated_across_calls)


@case("stdlib")
def ordered_dict_move_to_end_and_popitem():
    def f(x):
        od = collections.OrderedDict(a=x, b=x * 2, c=x * 3)
        od.move_to_end("a")
        od.move_to_end("c", last=False)
        k1, v1 = od.popitem()
        k2, v2 = od.popitem(last=False)
        d = {"p": 1, "q": 2}
        k3, v3 = d.popitem()
        return od, list(od), k1 + k2 + k3, v1 + v2 + v3, d
    return f
P(ordered_dict_move_to_end_and_popitem)
