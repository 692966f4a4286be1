"""Which parts of guard sources stay fixed while the modules they go through are not mutated.

A source like `L['self'].blocks[0].attn.qkv.weight` is a chain of reads. When the chain starts at
an ID_MATCH'd object (an anchor: that guard already pins its identity) and each following read is
one that only a watched mutation can change (mutation.py), its value is fixed until then: guards.py
reads it once, at build time, and the generated guard function holds the object itself instead of
walking the path on every call. A read is static when it is
  * `module.name` found in the module's instance `__dict__` (not shadowed by a class-level data
    descriptor such as a property) or, through nn.Module.__getattr__, in `_parameters`,
    `_buffers` or `_modules`: depends on that name of that module;
  * `container[key]` on a ModuleList / Sequential / ModuleDict / ParameterList / ParameterDict
    with the stock __getitem__: depends on the whole container;
  * `tuple[i]` on an exact tuple or torch.Size (immutable).
Class attributes, properties, plain Python objects, dicts and lists are read at call time.

Each guard kind then says (guards.GuardKind.implied, asking `static_value`, `class_fixed`,
`fixed_length`) whether its guard is true for as long as the watched modules are unmutated (an
ID_MATCH on a static value, a CONSTANT_MATCH on an immutable static value, the training flag, the
length of a module container ...), so it needs no check per call at all.
"""
from __future__ import annotations

import ast
import dataclasses
import enum
import re

import torch

from tracetorch.compiler.frontend.mutation import ITEMS

_ROOT = r"""[LG]\[(?:'[A-Za-z_]\w*'|"[A-Za-z_]\w*")\]"""
_STEP = r"""(?:\.[A-Za-z_]\w*|\[(?:-?\d+|'[^'\\\]]*'|"[^"\\\]]*")\])"""
_CHAIN_RE = re.compile(f"(?<![\\w.\\]])({_ROOT})({_STEP}*)")
_STEP_RE = re.compile(_STEP)
_REF_RE = re.compile(r"___r(\d+)")

_Module = torch.nn.Module
_STOCK_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict,
                     torch.nn.ParameterList, torch.nn.ParameterDict)
_STOCK_GETITEM = frozenset(c.__dict__["__getitem__"] for c in _STOCK_CONTAINERS)
_STOCK_LEN = frozenset(c.__dict__["__len__"] for c in _STOCK_CONTAINERS)
_MODULE_DICTS = ("_parameters", "_buffers", "_modules")
_IMMUTABLE_TYPES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                    torch.layout, torch.memory_format, type(Ellipsis), range)


def is_immutable(v) -> bool:
    """Values that nothing can change in place (so a guard on their value holds forever)."""
    t = type(v)
    if t in _IMMUTABLE_TYPES or isinstance(v, enum.Enum):
        return True
    if t in (tuple, torch.Size, frozenset):
        return all(is_immutable(x) for x in v)
    return False


@dataclasses.dataclass
class Dependency:
    module: _Module
    path: str                     # the source naming it, for messages: L['self'].fc
    names: set                    # attribute names the resolution read (ITEMS: as a container)


class StaticSources:
    """Resolves static chain prefixes of an entry's guard sources into named references."""

    def __init__(self, anchors):
        """anchors: (source, object) pairs whose identity guards already pin (ID_MATCH)."""
        self.anchors = {}
        for source, obj in anchors:
            if source and _CHAIN_RE.fullmatch(source):
                self.anchors.setdefault(source, obj)
        self.values: list = []                 # ref index -> value
        self.names: dict[str, str] = {}        # static prefix text -> ref name
        self.deps: dict[int, Dependency] = {}  # id(module) -> what resolving depended on

    # ---- text substitution (used by guards._Scope.translate) ----------------------------
    def substitute(self, text: str) -> str:
        if not self.anchors:
            return text
        return _CHAIN_RE.sub(self._chain, text)

    def _chain(self, m) -> str:
        whole = m.group(0)
        steps = _STEP_RE.findall(m.group(2))
        prefix, i = m.group(1), 0
        while prefix not in self.anchors:       # the shortest anchored prefix starts the walk
            if i == len(steps):
                return whole
            prefix += steps[i]
            i += 1
        obj = self.anchors[prefix]
        best = None
        for step in steps[i:]:
            ok, obj = self._step(obj, step, prefix)
            if not ok:
                break
            prefix += step
            best = (prefix, obj)
        if best is None:
            return whole
        return self.ref(*best) + whole[len(best[0]):]

    def ref(self, text: str, value) -> str:
        name = self.names.get(text)
        if name is None:
            name = self.names[text] = f"___r{len(self.values)}"
            self.values.append(value)
        return name

    def _depend(self, module, path: str, name: str) -> None:
        d = self.deps.get(id(module))
        if d is None:
            d = self.deps[id(module)] = Dependency(module, path, set())
        d.names.add(name)

    def _step(self, obj, step: str, path: str):
        """(True, value) when reading `step` from obj is fixed until a watched mutation."""
        if step[0] == ".":
            ok, value, module, name = static_read(obj, ".", step[1:])
        else:
            ok, value, module, name = static_read(obj, "[]", ast.literal_eval(step[1:-1]))
        if ok and module is not None:
            self._depend(module, path, name)
        return ok, value

    # ---- guards implied by the static structure ---------------------------------------
    def static_value(self, source: str):
        """(True, value) when the whole source is one static reference."""
        m = _REF_RE.fullmatch(self.substitute(source))
        return (True, self.values[int(m.group(1))]) if m else (False, None)

    # Each guard kind decides whether the static structure implies it (guards.GuardKind.implied);
    # these are the questions it asks.
    def class_fixed(self, v, source: str) -> bool:
        """Is type(v) fixed while the watched modules are unmutated? (A module's class changes
        only through setattr of __class__, which is watched; an immutable value never changes.)"""
        if isinstance(v, _Module):
            self._depend(v, source, "__class__")
            return True
        return is_immutable(v)

    def fixed_length(self, v, source: str) -> int | None:
        """len(v) if it is fixed while the watched modules are unmutated, else None."""
        if type(v) in (tuple, torch.Size):
            return len(v)
        if isinstance(v, _Module) and type(v).__len__ in _STOCK_LEN:
            self._depend(v, source, ITEMS)
            return len(v)
        return None

    @staticmethod
    def immutable(v) -> bool:
        return is_immutable(v)


def static_read(obj, kind: str, key):
    """Read `obj.key` (kind ".") or `obj[key]` (kind "[]") if the read is one that only a watched
    mutation can change: (True, value, module the read depends on or None, its dependency name).
    Any other read: (False, None, None, None), and nothing is read."""
    if kind == ".":
        if isinstance(obj, _Module) and _module_attr_is_static(obj, key):
            return True, getattr(obj, key), obj, key
        return False, None, None, None
    try:
        if isinstance(obj, _Module) and type(obj).__getitem__ in _STOCK_GETITEM:
            return True, obj[key], obj, ITEMS
        if type(obj) in (tuple, torch.Size) and type(key) is int:
            return True, obj[key], None, None
    except (IndexError, KeyError, TypeError, AttributeError):
        pass
    return False, None, None, None


def _module_attr_is_static(m: _Module, name: str) -> bool:
    cls = type(m)
    if cls.__getattribute__ is not object.__getattribute__:
        return False
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            t = type(attr)
            if hasattr(t, "__set__") or hasattr(t, "__delete__"):
                return False      # a property or slot: computed (or stored) outside __dict__
            return name in m.__dict__   # an instance value shadows a plain class attribute
    if name in m.__dict__:
        return True
    if getattr(cls, "__getattr__", None) is not _Module.__getattr__:
        return False
    d = m.__dict__
    return any(name in d.get(k, ()) for k in _MODULE_DICTS)
