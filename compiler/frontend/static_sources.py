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
Reads outside the module tree are static too when what they read is one object held in one
place (a `Slot`), which the fingerprint then re-checks by identity on every call, from C:
  * `d[key]` on an exact dict (a module's globals, a registry) or list: that entry;
  * `obj.name` on an object with the stock __getattribute__ whose instance `__dict__` holds the
    name (no data descriptor on its class): that `__dict__` entry and the object's class; a plain
    class-level value (no descriptor): the class attribute, and the name's absence from `__dict__`;
  * `obj.method.__func__` (a plain function found on the class): the class attribute and the
    name's absence from the instance `__dict__` (the bound method itself is new on every read);
  * a function's `__globals__` / `__closure__` (read-only: fixed), its `__code__`, `__defaults__`,
    `__kwdefaults__` (the attribute), a cell's `cell_contents` (the attribute).
Properties, custom __getattribute__ / __getattr__ (a Hugging Face config) and any other read
stay in the guard function and run on every call.

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
import types

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


@dataclasses.dataclass(frozen=True)
class Slot:
    """One read outside the module tree that a resolution depended on; the fingerprint re-checks
    it on every call by identity (mutation.Fingerprint)."""
    holder: object      # the dict, list, object, class, function or cell read from
    kind: str           # "item": holder[key]; "attr": getattr(holder, key); "absent": key not in
    #                     holder; "type": type(holder)
    key: object
    expected: object    # what the read gave (None for "absent")
    path: str           # the source the holder stands for, for messages


class _BoundFunction:
    """`obj.method` read through the class: not a value anyone may hold (a new bound method on
    every read), only a step towards `.__func__` / `.__self__`."""

    def __init__(self, obj, func):
        self.obj, self.func = obj, func


@dataclasses.dataclass
class Dependency:
    module: _Module
    path: str                     # the source naming it, for messages: L['self'].fc
    names: set                    # attribute names the resolution read (ITEMS: as a container)


class StaticSources:
    """Resolves static chain prefixes of an entry's guard sources into named references."""

    def __init__(self, anchors, globals_: dict | None = None):
        """anchors: (source, object) pairs whose identity guards already pin (ID_MATCH);
        globals_: the function's globals, where `G['name']` sources start (an entry of it)."""
        self.globals = globals_
        self.anchors = {}
        for source, obj in anchors:
            if source and _CHAIN_RE.fullmatch(source):
                self.anchors.setdefault(source, obj)
        self.values: list = []                 # ref index -> value
        self.names: dict[str, str] = {}        # static prefix text -> ref name
        self.deps: dict[int, Dependency] = {}  # id(module) -> what resolving depended on
        self.slots: dict[tuple, Slot] = {}     # (id(holder), kind, key) -> a read outside modules

    # ---- text substitution (used by guards._Scope.translate) ----------------------------
    def substitute(self, text: str) -> str:
        if not self.anchors and self.globals is None:
            return text
        return _CHAIN_RE.sub(self._chain, text)

    def _chain(self, m) -> str:
        whole = m.group(0)
        steps = _STEP_RE.findall(m.group(2))
        prefix, i = m.group(1), 0
        best = None
        ok = False
        if prefix[0] == "G" and type(self.globals) is dict:
            # a global: an entry of the function's globals dict (fixed for the function)
            ok, obj = self._step(self.globals, prefix[1:], "G")
            if ok:
                best = (prefix, obj)
        if not ok:
            while prefix not in self.anchors:       # the shortest anchored prefix starts the walk
                if i == len(steps):
                    return whole
                prefix += steps[i]
                i += 1
            obj = self.anchors[prefix]
        for step in steps[i:]:
            ok, obj = self._step(obj, step, prefix)
            if not ok:
                break
            prefix += step
            if type(obj) is not _BoundFunction:
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
        """(True, value) when reading `step` from obj is fixed until a watched mutation or a
        change the fingerprint's slots see."""
        kind, key = (".", step[1:]) if step[0] == "." else ("[]", ast.literal_eval(step[1:-1]))
        ok, value, module, name = static_read(obj, kind, key)
        if ok:
            if module is not None:
                self._depend(module, path, name)
            return ok, value
        ok, value, slots = slot_read(obj, kind, key, path)
        for s in slots:
            self.slots.setdefault((id(s.holder), s.kind, s.key), s)
        return ok, value

    # ---- guards implied by the static structure ---------------------------------------
    def static_value(self, source: str):
        """(True, value) when the whole source is one static reference."""
        m = _REF_RE.fullmatch(self.substitute(source))
        return (True, self.values[int(m.group(1))]) if m else (False, None)

    def pinned_value(self, source: str):
        """Like static_value, but an anchor (whose own ID_MATCH is checked on every call)
        counts too: for guards other than that ID_MATCH."""
        if source in self.anchors:
            return True, self.anchors[source]
        return self.static_value(source)

    # Each guard kind decides whether the static structure implies it (guards.GuardKind.implied);
    # these are the questions it asks.
    def class_fixed(self, v, source: str) -> bool:
        """Is type(v) fixed while the watched modules are unmutated? (A module's class changes
        only through setattr of __class__, which is watched; an immutable value never changes.)"""
        if isinstance(v, _Module):
            self._depend(v, source, "__class__")
            return True
        if is_immutable(v) or not type(v).__flags__ & _HEAPTYPE:
            return True           # only instances of classes defined in Python can change class
        self._depend_type(v, source)
        return True

    def _depend_type(self, v, source: str) -> None:
        self.slots.setdefault((id(v), "type", None), Slot(v, "type", None, type(v), source))

    def attribute_fixed(self, v, name: str, present: bool, source: str) -> bool:
        """Is `hasattr(v, name) == present` true while the watched modules and slots are
        unchanged? (HASATTR guards on static objects.)"""
        if present:
            ok, _ = self._step(v, "." + name, source)
            return ok
        cls = type(v)
        if _class_lookup(cls, name)[0] is not None:
            return False
        if isinstance(v, _Module):
            if getattr(cls, "__getattr__", None) is not _Module.__getattr__ or cls.__getattribute__ is not \
                    object.__getattribute__ or name in v.__dict__ or _module_attr_is_static(v, name):
                return False
            self._depend(v, source, name)     # absent from every dict; the fingerprint checks its class
            return True
        if not _plain_instance(v) or _class_lookup(cls, "__getattr__")[0] is not None or name in v.__dict__:
            return False
        d = v.__dict__
        self.slots.setdefault((id(d), "absent", name), Slot(d, "absent", name, None, source + ".__dict__"))
        self._depend_type(v, source)
        return True

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
    owner, attr = _class_lookup(cls, name)
    if owner is not None:
        if _is_data_descriptor(attr):
            return False          # a property or slot: computed (or stored) outside __dict__
        return name in m.__dict__   # an instance value shadows a plain class attribute
    if name in m.__dict__:
        return True
    if getattr(cls, "__getattr__", None) is not _Module.__getattr__:
        return False
    d = m.__dict__
    return any(name in d.get(k, ()) for k in _MODULE_DICTS)


# ---- reads outside the module tree (Slots) ---------------------------------------------------
# function attributes that cannot be assigned: fixed for the function object's lifetime
_FIXED_FUNCTION_ATTRS = frozenset({"__globals__", "__closure__", "__builtins__"})
_WRITABLE_FUNCTION_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
_FIXED_METHOD_ATTRS = frozenset({"__func__", "__self__"})
_MISSING = object()
_HEAPTYPE = 1 << 9        # Py_TPFLAGS_HEAPTYPE: a class defined in Python (its instances' __class__ is assignable)


def slot_read(obj, kind: str, key, path: str):
    """(True, value, slots) when `obj.key` / `obj[key]` gives one object held in one place that
    the slots name (module docstring); (False, None, ()) for any other read, nothing read
    that could run user code."""
    try:
        if kind == "[]":
            if type(obj) in (dict, list) and _hashable(key):
                value = obj[key]
                return True, value, (Slot(obj, "item", key, value, path),)
            return False, None, ()
        t = type(obj)
        if t is _BoundFunction:
            if key == "__func__":
                return True, obj.func, ()
            if key == "__self__":
                return True, obj.obj, ()
            return False, None, ()
        if t is types.FunctionType:
            if key in _FIXED_FUNCTION_ATTRS:
                return True, getattr(obj, key), ()
            if key in _WRITABLE_FUNCTION_ATTRS:
                value = getattr(obj, key)
                return True, value, (Slot(obj, "attr", key, value, path),)
            return False, None, ()
        if t is types.MethodType:
            return (True, getattr(obj, key), ()) if key in _FIXED_METHOD_ATTRS else (False, None, ())
        if t is types.CellType:
            if key == "cell_contents":
                value = obj.cell_contents          # ValueError when empty: not static
                return True, value, (Slot(obj, "attr", key, value, path),)
            return False, None, ()
        if _plain_instance(obj):
            return _instance_read(obj, key, path)
    except Exception:
        pass
    return False, None, ()


def _plain_instance(obj) -> bool:
    """An instance (not a class) with the stock attribute lookup and an instance __dict__."""
    t = type(obj)
    return (t.__getattribute__ is object.__getattribute__ and not isinstance(obj, type)
            and type(getattr(obj, "__dict__", None)) is dict)


def _instance_read(obj, key: str, path: str):
    """`obj.key` under the stock lookup: a data descriptor on the class wins, then the instance
    __dict__, then a class attribute (a plain function gives a _BoundFunction)."""
    cls = type(obj)
    d = obj.__dict__
    owner, attr = _class_lookup(cls, key)
    on_class = Slot(obj, "type", None, cls, path)
    if owner is not None and _is_data_descriptor(attr):
        return False, None, ()
    if key in d:
        value = d[key]
        return True, value, (Slot(d, "item", key, value, path + ".__dict__"), on_class)
    if owner is None:
        return False, None, ()                     # __getattr__ (or AttributeError) decides
    absent = Slot(d, "absent", key, None, path + ".__dict__")
    where = Slot(owner, "attr", key, getattr(owner, key, _MISSING), f"{path}.__class__")
    if where.expected is _MISSING or (owner.__dict__.get(key, _MISSING) is not where.expected):
        return False, None, ()
    if type(attr) is types.FunctionType:
        return True, _BoundFunction(obj, attr), (absent, where, on_class)
    if hasattr(type(attr), "__get__"):
        return False, None, ()                     # staticmethod, classmethod, ...: computed
    return True, attr, (absent, where, on_class)


def _class_lookup(cls, key):
    """(the class of cls.__mro__ defining key, its raw attribute) or (None, None)."""
    for klass in cls.__mro__:
        if key in klass.__dict__:
            return klass, klass.__dict__[key]
    return None, None


def _is_data_descriptor(attr) -> bool:
    t = type(attr)
    return hasattr(t, "__set__") or hasattr(t, "__delete__")


def _hashable(key) -> bool:
    try:
        hash(key)
        return True
    except TypeError:
        return False
