"""Tuples, lists, dicts, comprehensions, unpacking and slicing."""
import torch

from tests.compiler.frontend.corpus import D, L, P, STD, STD2, T, TUP, shapes


def tuple_return(x): return x + 1, x - 1
def list_return(x): return [x, x * 2]
def dict_return(x): return {"a": x, "b": x.sum()}
def nested_return(x): return {"a": (x, [x + 1]), "b": None, "c": 3}
def list_build_sum(x): parts = [x, x * 2, x * 3]; return sum(parts)
def list_append(x):
    out = []
    for i in range(3):
        out.append(x * i)
    return torch.stack(out)
def list_extend_pop(x): out = [x]; out.extend([x + 1, x + 2]); last = out.pop(); return last - out[0]
def list_comprehension(x): return torch.cat([x * i for i in range(3)])
def dict_comprehension(x): d = {f"k{i}": x + i for i in range(3)}; return d["k2"] - d["k0"]
def nested_comprehension(x): return sum([x[i] * j for i in range(2) for j in range(2)])
def tuple_unpack(x): a, b = x.shape; return x.reshape(b, a)
def star_unpack(x): first, *rest = [x, x + 1, x + 2]; return first + rest[-1]
def nested_unpack(x): (a, b), c = (x, x + 1), x + 2; return a + b + c
def swap(x, y): x, y = y, x; return x - y
def list_input(xs): return xs[0] + xs[1]
def tuple_input(xs): a, b = xs; return a * b
def dict_input(d): return d["x"] * d["scale"]
def list_len_loop(xs): return sum(x.sum() for x in xs) / len(xs)
def dict_items(x):
    d = {"a": 1.0, "b": 2.0}
    for k, v in d.items():
        x = x * v
    return x
def dict_get(x): d = {"a": 2}; return x * d.get("a", 1) + d.get("z", 0)
def dict_update(x): d = {"a": x}; d.update({"b": x + 1}); d["c"] = x + 2; return sum(d.values())
def list_slice(x): parts = [x, x + 1, x + 2, x + 3]; return sum(parts[1:3]) + parts[::-1][0]
def tuple_concat(x): t = (x,) + (x * 2,); return t[0] + t[1]
def list_mul(x): return sum([x] * 3)
def list_index_of_shapes(x): dims = list(x.shape); dims[0] = -1; return x.view(*dims)
def in_operator(x, key): return x * 2 if key in ("a", "b") else x
def list_mutation_input(xs): xs.append(xs[0] * 2); return xs[-1]
def zip_containers(xs, ys): return [a * b for a, b in zip(xs, ys)]
def sorted_builtin(x): order = sorted([3, 1, 2]); return x * order[0] + order[-1]
def reversed_builtin(x): return torch.stack([x * i for i in reversed(range(3))])
def enumerate_list(x):
    acc = x
    for i, w in enumerate([0.5, 1.5]):
        acc = acc + w * i
    return acc
def set_ops(x): s = {1, 2, 3}; return x * len(s) if 2 in s else x
def namedtuple_like(x): r = torch.max(x, dim=1); return r.values + r.indices
def kwargs_dict_build(x): opts = dict(dim=1, keepdim=True); return x.sum(**opts)

PROGRAMS = [
    P(tuple_return),
    P(list_return),
    P(dict_return),
    P(nested_return),
    P(list_build_sum),
    P(list_append),
    P(list_extend_pop),
    P(list_comprehension),
    P(dict_comprehension),
    P(nested_comprehension),
    P(tuple_unpack),
    P(star_unpack),
    P(nested_unpack),
    P(swap, STD2),
    P(list_input, [(L(T(3), T(3)),), (L(T(3), T(3)),), (L(T(5), T(5)),), (L(T(6), T(6)),)], recompiles=1),
    P(tuple_input, [(TUP(T(3), T(3)),), (TUP(T(3), T(3)),)]),
    P(dict_input, [(D(x=T(3), scale=2.0),), (D(x=T(3), scale=2.0),), (D(x=T(3), scale=3.0),)], recompiles=1),
    P(list_len_loop, [(L(T(3), T(3)),), (L(T(3), T(3)),), (L(T(3), T(3), T(3)),)], recompiles=1),
    P(dict_items),
    P(dict_get),
    P(dict_update),
    P(list_slice),
    P(tuple_concat),
    P(list_mul),
    P(list_index_of_shapes),
    P(in_operator, [(T(3), "a"), (T(3), "a"), (T(3), "c")], recompiles=1),
    P(list_mutation_input, [(L(T(3)),), (L(T(3)),)]),
    P(zip_containers, [(L(T(3), T(3)), L(T(3), T(3))), (L(T(3), T(3)), L(T(3), T(3)))]),
    P(sorted_builtin),
    P(reversed_builtin),
    P(enumerate_list),
    P(set_ops),
    P(namedtuple_like),
    P(kwargs_dict_build),
]
