"""Noticing that nn.Modules changed, so guards may treat the module tree as static.

Guards on a compiled module used to walk every attribute path (`L['self'].h[3].attn.c_attn.weight`)
on every call, through nn.Module.__getattr__ and ModuleList.__getitem__: most of the per-call cost.
Instead, those paths are resolved once, when the guards are built (static_sources.py), and a
`Fingerprint` of what the resolution read is checked on each call: for every module along the
paths and every attribute name the resolution depended on, the dict entry the name was found
in (the instance `__dict__`, `_parameters`, `_buffers` or `_modules`) must still hold the very
same object (or the name must still be absent from all four), and the module's class must be
the same. A module seen as a container (ITEMS: iterated, indexed, len()) also compares its
`_modules` / `_parameters` entries. These are C-level dict lookups and identity tests, no path
walking and no Python-level __getattr__.

Nothing is patched: no method of torch.nn.Module (or of any other class) is replaced, so compiling
has no effect on other code in the process (Dynamo wraps nn.Module.__setattr__; we do not).

Caught: setattr/delattr on a module (a new Parameter, a submodule, a plain value; .train()/.eval()
through `training`), register_parameter / register_buffer / add_module, `_apply` where it swaps
buffers, container edits (append, insert, del, setattr of an index), `__class__` assignment.
In-place changes of tensors (`p.data = ...`, `.to()` converting parameters in place,
`requires_grad_()`) keep the same objects: the per-call tensor metadata check catches them.
"""
from __future__ import annotations

import collections
import operator
import threading
import weakref

from tracetorch import logs
from tracetorch.compiler.native_checks import DictEntries

log = logs.get_logger(__name__)

ANY = "*"   # a dependency on every attribute of the module (its dicts swapped, ...)
ITEMS = "[items]"   # depends on the module's submodules/parameters as a container (len, [i])
_DICTS = ("_parameters", "_buffers", "_modules")
_MISSING = object()

_lock = threading.RLock()
_listeners: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # listener -> {id: (ref, names)}


class Fingerprint:
    """What a resolution of module paths read, checked cheaply per call.

    `deps`: iterable of (module, path text, names). `unchanged()` is True while every read
    would give the same object; `describe()` names the first change (slow; on a miss only)."""

    def __init__(self, deps, slots=()):
        """deps: (module, path, names) per module; slots: static_sources.Slot reads outside
        the module tree, each checked by identity (an "absent" slot: the key stays missing)."""
        parts = []               # (path, what, condition) per module and name, for describe()
        ns = {"___MISSING": _MISSING, "___list": list, "___map": map, "___id": id,
              "___get": dict.get, "___has": dict.__contains__, "___any": any}
        mods, types_ = [], []
        get_d, get_k, get_objs = [], [], []       # one vectorized dict.get over every read
        abs_d, abs_k = [], []                     # names that must stay absent
        whole = []                                # (expr, dict, keys, ids, values) compared whole
        self._keep = []                           # the expected objects (their ids stay valid)
        for i, (module, path, names) in enumerate(deps):
            d = module.__dict__
            dicts = [d] + [d.get(k) if type(d.get(k)) is dict else {} for k in _DICTS]
            ns[f"___m{i}"] = module
            ns[f"___T{i}"] = type(module)
            for j, dd in enumerate(dicts):
                ns[f"___d{i}_{j}"] = dd
            mods.append(module)
            types_.append(type(module))
            label = f"module {path} was mutated"
            parts.append((label, "its class changed", f"type(___m{i}) is ___T{i}"))
            which = []
            if ANY in names:
                which = list(range(len(dicts)))
                whole.append((f"___m{i}.__dict__", d, None, None, None))
                for j, k in enumerate(_DICTS):
                    if type(d.get(k)) is dict:
                        get_d.append(d)
                        get_k.append(k)
                        get_objs.append(d[k])
            elif ITEMS in names:
                which = [1, 3]            # _parameters, _modules
            for j in which:
                dd = dicts[j]
                whole.append((f"___d{i}_{j}", dd, list(dd.keys()), [id(v) for v in dd.values()], tuple(dd.values())))
                self._keep.append(list(dd.values()))
            if which:
                conds = [f"___list({n}.keys()) == {k!r} and ___list(___map(___id, {n}.values())) == {ids!r}"
                         for n, _, k, ids, _ in whole[-len(which):]]
                parts.append((label, "its attributes changed" if ANY in names
                              else "its submodules or parameters changed", " and ".join(conds)))
            for name in sorted(n for n in names if n not in (ANY, ITEMS, "__class__")):
                where = next((j for j, dd in enumerate(dicts) if name in dd), None)
                if where is None:
                    for dd in dicts:
                        abs_d.append(dd)
                        abs_k.append(name)
                    cond = " and ".join(f"{name!r} not in ___d{i}_{j}" for j in range(len(dicts)))
                else:
                    value = dicts[where][name]
                    self._keep.append(value)
                    get_d.append(dicts[where])
                    get_k.append(name)
                    get_objs.append(value)
                    key = f"___v{len(ns)}"
                    ns[key] = value
                    cond = f"___d{i}_{where}.get({name!r}, ___MISSING) is {key}"
                parts.append((label, f"attribute {name!r} changed", cond))
        attr_g, attr_h, attr_o = [], [], []       # getattr(holder, name) is expected, vectorized
        for k, slot in enumerate(slots):
            ns[f"___S{k}"] = slot.holder
            ns[f"___E{k}"] = slot.expected
            ns[f"___K{k}"] = slot.key
            if slot.kind == "item":
                get_d.append(slot.holder)
                get_k.append(slot.key)
                get_objs.append(slot.expected)
                part = (f"{slot.path}[{slot.key!r}] changed", "another object is there",
                        f"___S{k}[___K{k}] is ___E{k}")
            elif slot.kind == "type":
                mods.append(slot.holder)
                types_.append(slot.expected)
                part = (f"{slot.path} changed", "its class changed", f"type(___S{k}) is ___E{k}")
            elif slot.kind == "absent":
                abs_d.append(slot.holder)
                abs_k.append(slot.key)
                part = (f"{slot.path} changed", f"{slot.key!r} was added", f"___K{k} not in ___S{k}")
            else:
                attr_g.append(operator.attrgetter(slot.key))
                attr_h.append(slot.holder)
                attr_o.append(slot.expected)
                part = (f"{slot.path}.{slot.key} changed", "another object is there",
                        f"getattr(___S{k}, ___K{k}) is ___E{k}")
            self._keep.append(slot.expected)
            parts.append(part)
        # the reads of exact dicts (module __dict__s, _parameters, _buffers, _modules) go
        # through native_checks.DictEntries (C++ when built: ResNet-50's 1571 reads cost ~160 us
        # per call from Python on this project's CPU machine); other mappings (a slot's holder
        # may be any Mapping) keep their own __getitem__
        exact = [type(dd) in (dict, collections.OrderedDict) for dd in get_d]
        checks = []
        for kind in (True, False):
            picked = [i for i, e in enumerate(exact) if e is kind]
            if picked:
                checks.append(DictEntries([get_d[i] for i in picked], [get_k[i] for i in picked],
                                          [get_objs[i] for i in picked], exact=kind).same)
        ns.update(___MODS=tuple(mods), ___TYPES=types_, ___ENTRIES=tuple(checks), ___AD=tuple(abs_d),
                  ___AK=tuple(abs_k), ___call=operator.call, ___is=operator.is_, ___all=all, ___len=len)
        ns.update(___AG=tuple(attr_g), ___AH=tuple(attr_h), ___AO=tuple(attr_o))
        fast = ["___list(___map(type, ___MODS)) == ___TYPES"] if mods else []   # modules and "type" slots
        if checks:
            fast.append("___all(___map(___call, ___ENTRIES))")
        if attr_g:
            fast.append("___all(___map(___is, ___map(___call, ___AG, ___AH), ___AO))")
        if abs_d:
            fast.append("not ___any(___map(___has, ___AD, ___AK))")
        for k, (expr, dd, keys, ids, values) in enumerate(whole):
            ns[f"___W{k}"] = dd
            if keys is None:
                fast.append(f"{expr} is ___W{k}")
            else:
                ns[f"___V{k}"] = values
                fast.append(f"___len(___W{k}) == {len(keys)} and ___list(___W{k}.keys()) == {keys!r} and "
                            f"___all(___map(___is, ___W{k}.values(), ___V{k}))")
        body = " and ".join(f"({c})" for c in fast) or "True"
        src = (f"def ___unchanged():\n    try:\n        return {body}\n"
               f"    except Exception:\n        return False\n")
        src += "".join(f"def ___part{k}():\n    return {c}\n" for k, (_, _, c) in enumerate(parts))
        exec(compile(src, "<module fingerprint>", "exec"), ns)
        self.unchanged = ns["___unchanged"]
        self._parts = [(path, what, ns[f"___part{k}"]) for k, (path, what, _) in enumerate(parts)]
        self.size = len(mods) + len(slots)

    def describe(self) -> str | None:
        """'module L['self'].fc was mutated: attribute 'weight' changed' for the first change."""
        for label, what, part in self._parts:
            try:
                ok = part()
            except Exception:
                ok = False
            if not ok:
                return f"{label}: {what}"
        return None


def watch(module, listener, names) -> None:
    """Remember that `listener` depends on `names` of `module` (for `notify`); listeners are
    held weakly. Detection itself is by `Fingerprint`, checked by the listener on each call."""
    with _lock:
        deps = _listeners.get(listener)
        if deps is None:
            deps = _listeners[listener] = {}
        ref, have = deps.get(id(module), (None, None))
        if ref is None or ref() is not module:
            deps[id(module)] = (weakref.ref(module), set(names))
        else:
            have.update(names)


def unwatch_all(listener, modules=()) -> None:
    """Drop `listener`'s dependencies (on `modules`, or all of them)."""
    with _lock:
        deps = _listeners.get(listener)
        if deps is None:
            return
        if not modules:
            deps.clear()
        for m in modules:
            deps.pop(id(m), None)


def notify(module, name: str, change: str, items: bool = False) -> None:
    """Tell the listeners depending on `name` of `module` (ANY: every name) that it changed.
    Only explicit callers use this (nothing in torch is patched to call it)."""
    with _lock:
        hit = []
        for listener, deps in list(_listeners.items()):
            ref, names = deps.get(id(module), (None, None))
            if ref is None or ref() is not module:
                continue
            if name == ANY or name in names or ANY in names or (items and ITEMS in names):
                hit.append(listener)
    for listener in hit:
        listener.on_module_mutation(module, name, change)
