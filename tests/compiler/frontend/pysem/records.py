"""Dataclasses and namedtuples: construction, fields, _replace, subclasses, escape."""
import collections
import dataclasses
import typing

import torch

from tests.compiler.frontend.pysem import World, case

PROGRAMS = []
P = PROGRAMS.append

Pair = collections.namedtuple("Pair", "a b")


class Typed(typing.NamedTuple):
    x: torch.Tensor
    n: int = 2


class PairGet(collections.namedtuple("PairGet", "a b")):
    def __getitem__(self, i):
        if isinstance(i, str):
            return getattr(self, i)
        return super().__getitem__(i)


@dataclasses.dataclass
class DC:
    t: torch.Tensor
    k: int = 1


@case("records")
def namedtuple_build_and_fields():
    def f(x):
        p = Pair(x, 2)
        q = p._replace(b=3)
        a, b = q
        return p, q.a * b, p._fields, p[1], len(p)
    return f
P(namedtuple_build_and_fields)


@case("records")
def typed_namedtuple_defaults():
    def f(x):
        t = Typed(x)
        return t.x * t.n, t, Typed(x, 5).n
    return f
P(typed_namedtuple_defaults)


@case("records")
def namedtuple_subclass_getitem():
    def f(x):
        p = PairGet(x, 3)
        return p["a"] + p[1], p.b
    return f
P(namedtuple_subclass_getitem)


@case("records")
def namedtuple_class_made_in_frame():
    def f(x):
        Local = collections.namedtuple("Local", ["u", "v"])
        r = Local(x, 1)
        return r.u + r.v, type(r).__name__, r._asdict()["v"]
    return f
P(namedtuple_class_made_in_frame)


@case("records", args=lambda i: (Pair(torch.full((2,), float(i)), i),))
def namedtuple_input():
    def f(p):
        return p.a * p.b, p._replace(b=0)
    return f
P(namedtuple_input)


@case("records")
def dataclass_made_and_mutated():
    def f(x):
        d = DC(x)
        d.k += 2
        return d.t * d.k, d
    return f
P(dataclass_made_and_mutated)


@case("records", args=lambda i: (DC(torch.full((2,), float(i)), i),))
def dataclass_input_mutated():
    def f(d):
        d.k = d.k + 1
        d.t = d.t * 2
        return dataclasses.fields(d)[0].name, d.t.sum()
    return f
P(dataclass_input_mutated)


@case("records")
def dataclass_replace_and_asdict():
    def f(x):
        d = DC(x, 3)
        e = dataclasses.replace(d, k=4)
        return e.k * e.t, dataclasses.asdict(d)["k"], d == DC(x, 3) if False else True
    return f
P(dataclass_replace_and_asdict)


@case("records")
def frozen_dataclass_and_eq():
    @dataclasses.dataclass(frozen=True)
    class Key:
        a: int
        b: str

    def f(x):
        k = Key(1, "z")
        return x + k.a, k == Key(1, "z"), hash(k) == hash(Key(1, "z"))
    return f
P(frozen_dataclass_and_eq)


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    lo: Point
    hi: Point
    tags: list
    t: torch.Tensor


@case("records", args=lambda i: (torch.full((2,), float(i)), i))
def frozen_dataclass_assignment_raises():
    def f(x, n):
        p = Point(n, 2)
        try:
            p.x = 5                     # FrozenInstanceError, caught in the compiled function
            caught = "no"
        except dataclasses.FrozenInstanceError as e:
            caught = type(e).__name__
        try:
            del p.y
        except AttributeError:
            pass
        return x * p.x, caught, p, p == Point(n, 2), p != Point(n + 1), hash(p) == hash(Point(n, 2))
    return f
P(frozen_dataclass_assignment_raises)


@case("records", args=lambda i: (torch.full((2,), float(i)), i))
def dataclass_asdict_astuple_nested():
    def f(x, n):
        b = Box(Point(n), Point(n + 1, 3), [n, (n, "a")], x)
        d = dataclasses.asdict(b)
        t = dataclasses.astuple(b)
        d["tags"].append(9)             # a deep copy: b.tags is unchanged
        return d["lo"], d["hi"]["y"], d["t"] * 2, t[1], t[2], b.tags, dataclasses.fields(Point)[1].name
    return f
P(dataclass_asdict_astuple_nested)


@case("records", args=lambda i: (torch.full((2,), float(i)), i))
def frozen_dataclass_replace_and_is_dataclass():
    def f(x, n):
        p = Point(n, 1)
        q = dataclasses.replace(p, y=n * 2)
        return x + q.y, q, p is not q, dataclasses.is_dataclass(q), dataclasses.is_dataclass(x)
    return f
P(frozen_dataclass_replace_and_is_dataclass)


class _Slots:
    kind = "class"                    # a class attribute that a deleted instance one shadowed

    def __init__(self, n):
        self.n = n
        self.kind = "instance"


class _Audited:
    """A class with its own __delattr__: the deletion is logged, then done by object's."""
    def __init__(self):
        self.log = []
        self.a = 1

    def __delattr__(self, name):
        self.log.append(name)
        object.__delattr__(self, name)


@case("records", args=lambda i: (torch.full((2,), float(i)), i))
def del_attribute_of_object_made_in_frame():
    def f(x, n):
        s = _Slots(n)
        del s.kind                    # the class attribute shows through again
        try:
            del s.kind
            missing = "no"
        except AttributeError:
            missing = "raised"
        if n % 2:
            del s.n
        au = _Audited()
        del au.a
        return x * (getattr(s, "n", 10)), s.kind, missing, hasattr(s, "n"), au.log, \
            hasattr(au, "a"), getattr(s, "kind")
    return f
P(del_attribute_of_object_made_in_frame)


class _State:
    pass


STATE = _State()


def _reset_state(i):
    STATE.__dict__.clear()
    STATE.step = i
    if i != 1:                        # call 1: the attribute is absent, `del` raises
        STATE.cache = [i]


@case("records", args=lambda i: (torch.full((2,), float(i + 1)),))
def del_attribute_of_global_object():
    # a pre-existing object: the deletion is replayed after the graph, its presence guarded
    def f(x):
        try:
            del STATE.cache
            dropped = True
        except AttributeError:
            dropped = False
        STATE.tmp = x.sum()
        had_tmp = hasattr(STATE, "tmp")
        del STATE.tmp
        delattr(STATE, "step")
        return x * 2, dropped, had_tmp, hasattr(STATE, "cache"), hasattr(STATE, "step")
    return World(f, observe=lambda: sorted(vars(STATE)), before=_reset_state)
P(del_attribute_of_global_object)
