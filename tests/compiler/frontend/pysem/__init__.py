"""A differential Python-semantics corpus for the frontend (issue 16), by language feature.

Each module (containers, iterators, closures, classes, records, exceptions, global_state,
ambient, builtins_, stdlib) defines PROGRAMS, a list of `Case`s. A case is a *factory*: `make()`
builds the function under test and everything it closes over or reads (fresh objects, module
globals reset), so the eager run and the compiled run each start from the same world and
neither can see the other's mutations. `args(i)` gives the arguments of call i (fresh objects,
different values per call); `before(i, world)` changes global state before call i (a config
attribute, a global, the grad mode ...), identically in both worlds.

`run_case(case, compile_fn)` calls the function `calls` times (at least 2) eagerly, then in a
fresh world compiled, and compares per call: the result (values, exact types, nested),
the arguments afterwards (mutated inputs), what `observe(world)` reports (globals, closed-over
state, objects), and the exception type when eager raises. It returns a list of differences
(empty: same) and whether the compiled run crashed where eager did not.
"""
from __future__ import annotations

import dataclasses
import math
import types
from typing import Any, Callable

import torch


@dataclasses.dataclass
class World:
    fn: Callable
    observe: Callable | None = None       # () -> any value describing the state after a call
    before: Callable | None = None        # (i) -> None: change global state before call i
    after: Callable | None = None         # () -> None: undo global state (torch flags) at the end
    data: Any = None


@dataclasses.dataclass
class Case:
    name: str
    make: Callable[[], World]
    args: Callable[[int], tuple] = lambda i: (torch.full((3,), float(i + 1)),)
    calls: int = 3
    feature: str = ""
    note: str = ""


def case(feature, calls=3, args=None, note=""):
    """Decorator: the decorated function is `make` (returns a World or just the function)."""
    def wrap(make):
        def factory():
            w = make()
            return w if isinstance(w, World) else World(w)
        kw = {} if args is None else {"args": args}
        return Case(make.__name__, factory, calls=calls, feature=feature, note=note, **kw)
    return wrap


def T(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


# ---- comparison ---------------------------------------------------------------------------
def _materialize(v):
    """Lazy iterators and views compare by type and remaining contents."""
    if isinstance(v, (map, zip, filter, enumerate, reversed, types.GeneratorType)) or \
            type(v).__name__.endswith("iterator"):
        return ("<iter>", type(v).__name__, list(v))
    if type(v).__name__ in ("dict_keys", "dict_values", "dict_items"):
        return ("<view>", type(v).__name__, list(v))
    return v


def diff(a, b, path="result", depth=0) -> list[str]:
    a, b = _materialize(a), _materialize(b)
    if depth > 8:
        return []
    if type(a) is not type(b) and not _same_local_class(type(a), type(b)):
        return [f"{path}: type {type(a).__name__} vs {type(b).__name__} ({_short(a)} vs {_short(b)})"]
    if isinstance(a, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return [f"{path}: tensor {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"]
        if a.requires_grad != b.requires_grad:
            return [f"{path}: requires_grad {a.requires_grad} vs {b.requires_grad}"]
        if a.dtype.is_floating_point or a.dtype.is_complex:
            ok = torch.allclose(a.detach(), b.detach(), rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            ok = torch.equal(a, b)
        return [] if ok else [f"{path}: values differ ({_short(a)} vs {_short(b)})"]
    if isinstance(a, float):
        same = (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
        return [] if same else [f"{path}: {a!r} vs {b!r}"]
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} vs {len(b)} ({_short(a)} vs {_short(b)})"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]", depth + 1)
        return out
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return [f"{path}: keys {list(a)} vs {list(b)}"]
        out = []
        for k in a:
            out += diff(a[k], b[k], f"{path}[{k!r}]", depth + 1)
        return out
    if isinstance(a, (set, frozenset, int, str, bool, bytes, type(None), complex, torch.dtype,
                      torch.device, torch.Size, range, slice, type)):
        return [] if a == b else [f"{path}: {_short(a)} vs {_short(b)}"]
    if isinstance(a, BaseException):
        return [] if a.args == b.args else [f"{path}: exception args {a.args} vs {b.args}"]
    if hasattr(a, "__dict__") and not isinstance(a, (types.FunctionType, types.ModuleType)):
        return diff(dict(vars(a)), dict(vars(b)), f"{path}.__dict__", depth + 1)
    if isinstance(a, types.FunctionType):
        return [] if a.__code__ is b.__code__ else [f"{path}: different functions"]
    try:
        return [] if a == b else [f"{path}: {_short(a)} vs {_short(b)}"]
    except Exception:
        return []


def _same_local_class(a, b):
    """Classes a program defines in its factory: one per world, compared by name."""
    return "<locals>" in a.__qualname__ and a.__qualname__ == b.__qualname__ \
        and a.__module__ == b.__module__


def _short(v, n=80):
    try:
        s = repr(v)
    except Exception:
        s = f"<{type(v).__name__}>"
    return s if len(s) <= n else s[:n] + "..."


# ---- running ------------------------------------------------------------------------------
def _run_world(world: World, fn, case_: Case):
    records = []
    try:
        for i in range(case_.calls):
            if world.before is not None:
                world.before(i)
            args = case_.args(i)
            try:
                out = fn(*args)
                exc = None
            except Exception as e:      # noqa: BLE001 - compared with the other world
                out, exc = None, e
            records.append({"out": out, "exc": exc, "args": args,
                            "state": world.observe() if world.observe is not None else None})
    finally:
        if world.after is not None:
            world.after()
    return records


@dataclasses.dataclass
class Outcome:
    name: str
    diffs: list
    crashed: bool            # compiled raised where eager did not
    wrong: bool              # a value/type/state difference


def run_case(case_: Case, compile_fn) -> Outcome:
    eager_world = case_.make()
    eager = _run_world(eager_world, eager_world.fn, case_)
    comp_world = case_.make()
    compiled = compile_fn(comp_world.fn)
    got = _run_world(comp_world, compiled, case_)
    diffs, crashed = [], False
    for i, (e, c) in enumerate(zip(eager, got)):
        if (e["exc"] is None) != (c["exc"] is None):
            if e["exc"] is None:
                crashed = True
                diffs.append(f"call {i}: compiled raised {type(c['exc']).__name__}: {c['exc']}")
            else:
                diffs.append(f"call {i}: eager raised {type(e['exc']).__name__}, compiled returned "
                             f"{_short(c['out'])}")
            continue
        if e["exc"] is not None:
            if type(e["exc"]) is not type(c["exc"]):
                diffs.append(f"call {i}: exception {type(e['exc']).__name__} vs "
                             f"{type(c['exc']).__name__}: {c['exc']}")
            continue
        diffs += [f"call {i}: {d}" for d in diff(e["out"], c["out"])]
        diffs += [f"call {i}: {d}" for d in diff(e["args"], c["args"], "args")]
        diffs += [f"call {i}: {d}" for d in diff(e["state"], c["state"], "state")]
    return Outcome(case_.name, diffs, crashed, bool(diffs) and not crashed)


def all_cases() -> list[Case]:
    from tests.compiler.frontend.pysem import (ambient, builtins_, classes, closures, containers,
                                               exceptions, global_state, iterators, records, stdlib)
    out = []
    for mod in (containers, iterators, closures, classes, records, exceptions, global_state,
                ambient, builtins_, stdlib):
        for c in mod.PROGRAMS:
            c.feature = c.feature or mod.__name__.rsplit(".", 1)[-1]
            out.append(c)
    return out


# a graph break for the programs: print() runs eagerly
import io as _io  # noqa: E402

SINK = _io.StringIO()


def brk(*values):
    print(*values, end="", file=SINK)
