"""Lists, tuples, dicts, sets, views: aliasing, mutation of inputs, live views, breaks."""
import collections

import torch

from tests.compiler.frontend.pysem import SINK, World, case, brk

PROGRAMS = []
P = PROGRAMS.append


def _dict_arg(i):
    return ({"a": torch.full((2,), float(i)), "b": torch.ones(2) * 2},)


def _list_arg(i):
    return ([torch.full((2,), float(i)), torch.ones(2)], i + 1)


@case("containers")
def keys_view_is_live():
    def f(x):
        d = {"a": 1}
        k, v, it = d.keys(), d.values(), d.items()
        d["b"] = 2
        del d["a"]
        d["c"] = 3
        return x + len(k), list(k), list(v), list(it), "c" in k, 3 in v
    return f
P(keys_view_is_live)


@case("containers")
def view_returned_and_types():
    def f(x):
        d = {"p": x, "q": 2}
        ks = d.keys()
        d["r"] = x * 2
        return ks, d.values(), type(d.items()).__name__, len(ks)
    return f
P(view_returned_and_types)


@case("containers")
def keys_set_operators():
    def f(x):
        a = {"a": 1, "b": 2}
        b = {"b": 3, "c": 4}
        return x + 1, sorted(a.keys() | b.keys()), sorted(a.keys() & b.keys()), \
            sorted(a.keys() - b.keys()), sorted(a.keys() ^ {"a", "z"})
    return f
P(keys_set_operators)


@case("containers", args=_dict_arg)
def dict_input_mutated():
    def f(d):
        d["c"] = d["a"] + d["b"]
        d.pop("a")
        d.setdefault("z", 5)
        return d["c"] * 2
    return f
P(dict_input_mutated)


@case("containers", args=lambda i: ({"outer": {"inner": torch.full((2,), float(i))}, "n": i},))
def nested_dict_input_untouched_and_mutated():
    def f(d):
        inner = d["outer"]
        y = inner["inner"] + d["n"]
        inner["seen"] = True
        return y, type(d["outer"]) is dict
    return f
P(nested_dict_input_untouched_and_mutated)


@case("containers", args=_list_arg)
def list_input_mutations():
    def f(lst, n):
        lst.append(lst[0] * n)
        lst.insert(0, torch.zeros(2))
        last = lst.pop()
        lst.reverse()
        lst[1:2] = [lst[1] + 1, lst[1] + 2]
        del lst[0]
        return last, len(lst)
    return f
P(list_input_mutations)


@case("containers", args=lambda i: ([3, 1, 2 + i, 0],))
def list_sort_and_alias():
    def f(lst):
        alias = lst
        lst.sort()
        alias.append(len(lst))
        copy = list(lst)
        copy.append(99)
        return torch.tensor(lst).sum(), alias is lst, copy
    return f
P(list_sort_and_alias)


@case("containers")
def dict_across_break():
    def f(x):
        d = {"a": x, "b": x + 1}
        d["c"] = d["a"] * 2
        brk("d")
        d["e"] = d["b"] + d["c"]
        return d, list(d)
    return f
P(dict_across_break)


@case("containers")
def ordered_dict_across_break():
    def f(x):
        d = collections.OrderedDict(a=x)
        d["b"] = x + 1
        d.move_to_end("a") if hasattr(d, "move_to_end") and False else None
        brk("od")
        return d["a"] + d["b"], list(d.keys())
    return f
P(ordered_dict_across_break)


@case("containers")
def keys_view_across_break():
    def f(x):
        d = {"a": 1}
        ks = d.keys()
        brk()
        d["b"] = 2
        return x + len(ks), list(ks)
    return f
P(keys_view_across_break)


@case("containers")
def split_result_fresh_each_call():
    def f(x):
        words = "a b c".split()
        words.append("d")
        parts = "k=v".partition("=")
        return x + len(words), words, parts
    return f
P(split_result_fresh_each_call)


@case("containers")
def constant_list_literal_fresh():
    def f(x):
        acc = [1, 2]
        acc += [3]
        s = {1, 2}
        s.add(len(acc)) if hasattr(s, "add") and False else None
        return x * len(acc), acc, s
    return f
P(constant_list_literal_fresh)


@case("containers")
def nested_list_aliasing():
    def f(x):
        row = [0] * 2
        grid = [row] * 2
        grid[0][0] = 5
        other = [[0] * 2 for _ in range(2)]
        other[0][0] = 5
        return x + grid[1][0] + other[1][0], grid, other
    return f
P(nested_list_aliasing)


@case("containers", args=lambda i: ((torch.ones(2) * i, i + 1, "s"),))
def tuple_star_unpack():
    def f(t):
        a, *rest = t
        first, *mid, last = [1, 2, 3, 4 + rest[0]]
        return a * rest[0], rest, mid, last
    return f
P(tuple_star_unpack)


@case("containers")
def dict_comprehension_and_update():
    def f(x):
        d = {k: x * i for i, k in enumerate("abc")}
        d.update(z=x.sum(), a=0)
        e = dict(d, extra=1)
        del e["b"]
        return d, e, dict.fromkeys(["p", "q"], 0)
    return f
P(dict_comprehension_and_update)


@case("containers")
def set_operations_local():
    def f(x):
        s = {1, 2, 3}
        t = frozenset({3, 4})
        u = s | t
        s -= {1}
        return x + len(u), sorted(u), sorted(s), type(t).__name__, 2 in s
    return f
P(set_operations_local)


@case("containers", args=lambda i: ({"k": i, "j": i * 2},))
def dict_items_sum_input():
    def f(d):
        total = 0
        for k, v in d.items():
            total += v
        keys = d.keys()
        d["new"] = 1
        return torch.tensor(float(total)), list(keys)
    return f
P(dict_items_sum_input)


@case("containers")
def list_index_count_and_in():
    def f(x):
        lst = ["a", "b", "a"]
        return x + lst.index("b") + lst.count("a"), "c" in lst, lst[::-1], lst[-1]
    return f
P(list_index_count_and_in)


@case("containers", args=lambda i: ([torch.full((2,), float(i))] * (i + 1),))
def list_length_changes_between_calls():
    def f(lst):
        return torch.stack(lst).sum(0), len(lst)
    return f
P(list_length_changes_between_calls)


@case("containers")
def sorted_with_key_lambda():
    def f(x):
        items = [("b", 2), ("a", 3), ("c", 1)]
        by_val = sorted(items, key=lambda p: p[1])
        by_name = sorted(items, reverse=True)
        return x * by_val[0][1], by_val, by_name, max(items, key=lambda p: p[1])
    return f
P(sorted_with_key_lambda)


@case("containers", args=lambda i: (torch.full((2,), float(i + 1)), [i % 2, 2, 3 + i]))
def defaultdict_and_deque_across_break():
    # a defaultdict and a deque built in the frame, changed on both sides of a break; types,
    # order and the default factory must survive it
    def f(x, keys):
        dd = collections.defaultdict(list)
        for k in keys:
            dd[k].append(x * k)
        dq = collections.deque([x, x + 1])
        dq.append(x + 2)
        brk()
        dq.appendleft(x * 0)
        dd["new"].append(x)
        dd[keys[0]].append(x - 1)
        return sum(dq), dd, dq, len(dd[keys[-1]]), dd.default_factory
    return f
P(defaultdict_and_deque_across_break)


@case("containers", args=lambda i: (torch.full((2,), float(i + 1)), "abca"[: 2 + i]))
def counter_and_ordered_dict_across_break():
    # a Counter and an OrderedDict reordered after the break
    def f(x, word):
        c = collections.Counter(word)
        od = collections.OrderedDict(a=x, b=x * 2)
        brk()
        c.update("zz")
        od.move_to_end("a")
        od["c"] = x + c["a"]
        return od, c, list(od), od["c"] * 2
    return f
P(counter_and_ordered_dict_across_break)
