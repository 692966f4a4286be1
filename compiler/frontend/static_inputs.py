"""Calling a compiled graph with the module parameters it takes read once, not on every call.

A graph captured from a module forward takes every parameter and buffer it uses as an input, each
named by a source such as `L['self'].h[3].attn.c_attn.weight`. Reading those in the transformed
code walks the path on every call: nn.Module.__getattr__, ModuleList.__getitem__ ... about a
hundred Python-level reads per call for a small GPT. The guards already treat those paths as
fixed while the modules along them are unmutated (static_sources.py, mutation.py); this does the
same for the graph's inputs:

  * the transformed code passes the chains' roots (`self`) and the other inputs;
  * on the first call (and after any watched mutation) every chain is walked once: a read that
    only a watched mutation can change (a module's own attribute, parameter, buffer or submodule;
    an item of a stock module container; an item of a tuple) is remembered, and the modules it
    went through are watched; any other read (a property, a plain object's attribute) stays in
    the generated call and runs every time;
  * a Python function is generated for those values (`fast`), so a steady-state call is one
    identity check of each root and the graph call itself.

A mutation of a watched module (setattr: a new Parameter, .train()/.eval(), register_*, _apply,
container edits) makes the next call walk the chains again. As in the guards (and Dynamo), writes
straight into a module's `__dict__` / `_parameters` / `_modules` are not seen.
"""
from __future__ import annotations

import torch

from tracetorch import logs
from tracetorch.compiler.frontend import mutation
from tracetorch.compiler.frontend.source import AttrSource, GetItemSource, GlobalSource, LocalSource
from tracetorch.compiler.frontend.static_sources import static_read

log = logs.get_logger(__name__)


def chain_of(source):
    """(root source, [(kind, key), ...]) for an attribute/item chain from a local or global (and
    the item reads that start it) with at least one step; None for any other source."""
    steps = []
    while isinstance(source, (AttrSource, GetItemSource)):
        steps.append((".", source.attr) if isinstance(source, AttrSource) else ("[]", source.index))
        source = source.base
    if not steps or not isinstance(source, (LocalSource, GlobalSource)):
        return None
    steps.reverse()
    # Leading item reads belong to the root: a decorator's wrapper (`def wrapped(*args, **kwargs)`,
    # as transformers puts around many forwards) reaches the module through `args[0]`, and the
    # *args tuple is a new object every call, so with it as the root no chain would be cached.
    # The root `L['args'][0]` is read every call (as the whole chain was) and, when it is a
    # module, checked by identity like `self`.
    while len(steps) > 1 and steps[0][0] == "[]":
        source = GetItemSource(source, steps.pop(0)[1])
    return source, steps


def split_sources(sources):
    """(roots, others, plan) for the graph's input sources: `roots` are the chain roots the call
    passes, `others` the sources passed as they are, `plan` per input either ("chain", root index,
    steps) or ("arg", index into others)."""
    roots, others, plan = [], [], []
    for s in sources:
        ch = chain_of(s)
        if ch is None:
            plan.append(("arg", len(others)))
            others.append(s)
            continue
        root, steps = ch
        if root not in roots:
            roots.append(root)
        plan.append(("chain", roots.index(root), steps))
    return roots, others, plan


def _render(base: str, steps) -> str:
    return base + "".join(f".{k}" if kind == "." else f"[{k!r}]" for kind, k in steps)


class StaticInputCall:
    """What the transformed code calls instead of the compiled graph (see the module docstring).
    Called as call(*roots, *others); returns what the graph returns."""

    # A module mutated on (nearly) every call (a hook assigning a weight each forward, say) would
    # make every call walk and regenerate: after this many walks the chains are read every call.
    MAX_WALKS = 8

    def __init__(self, compiled, sources):
        self.compiled = compiled
        self.roots, self.others, self.plan = split_sources(sources)
        self.__name__ = getattr(compiled, "__name__", "compiled")
        self._watched = []
        self._deps = {}           # id(module) -> (module, names) the walk read
        self.walks = 0            # how often the chains were walked (first call + mutations)
        self.fast = self.slow

    def __call__(self, *args):
        return self.fast(*args)

    def render_call(self) -> str:
        """The call as the transformed code's readable source shows it."""
        args = [r.render() for r in self.roots] + [s.render() for s in self.others]
        return f"{self.__name__}({', '.join(args)})"

    # ---- the slow path: walk every chain, then make the fast function -------------------
    def slow(self, *args):
        n = len(self.roots)
        roots, others = args[:n], args[n:]
        mutation.unwatch_all(self, self._watched)
        self._watched = []
        self._deps = {}
        ns = {"___compiled": self.compiled, "___slow": self.slow}
        params = [f"___r{i}" for i in range(n)] + [f"___a{i}" for i in range(len(others))]
        call_args, values = [], []
        # Only a module root is remembered (and checked by identity on each call): anything else
        # (a list or tuple of inputs, a plain object) may be a new object every call, so its
        # chains are read from it every time.
        cached_roots = {i for i, r in enumerate(roots) if isinstance(r, torch.nn.Module)}
        if self.walks >= self.MAX_WALKS:
            if self.walks == self.MAX_WALKS:
                log.info("static_inputs_disabled", graph=self.__name__, walks=self.walks,
                         reason="the modules its inputs come from keep being mutated: "
                                "reading every input on every call")
            cached_roots = set()
        for p in self.plan:
            if p[0] == "arg":
                call_args.append(f"___a{p[1]}")
                values.append(others[p[1]])
                continue
            _, ri, steps = p
            obj, fixed = roots[ri], 0
            for kind, key in (steps if ri in cached_roots else ()):
                ok, obj, module, name = static_read(obj, kind, key)
                if not ok:
                    break
                fixed += 1
                if module is not None:
                    mutation.watch(module, self, (name,))
                    self._watched.append(module)
                    self._deps.setdefault(id(module), (module, set()))[1].add(name)
            if fixed == len(steps):
                name = f"___s{len(ns)}"
                ns[name] = obj
                call_args.append(name)
            else:     # the rest of the chain runs on every call, from the root
                obj = roots[ri]
                for kind, key in steps:
                    obj = getattr(obj, key) if kind == "." else obj[key]
                call_args.append(_render(f"___r{ri}", steps))
            values.append(obj)
        checks = " and ".join(f"___r{i} is ___R{i}" for i in sorted(cached_roots)) or "True"
        for i in cached_roots:
            ns[f"___R{i}"] = roots[i]
        if self._deps:
            # the resolved inputs hold while the modules read are unchanged (mutation.py)
            ns["___unchanged"] = mutation.Fingerprint(
                [(m, type(m).__name__, names) for m, names in self._deps.values()]).unchanged
            checks = f"{checks} and ___unchanged()"
        self._deps = {}
        src = (f"def ___fast({', '.join(params)}):\n"
               f"    if not ({checks}):\n"
               f"        return ___slow({', '.join(params)})\n"
               f"    return ___compiled({', '.join(call_args)})\n")
        exec(compile(src, f"<static inputs of {self.__name__}>", "exec"), ns)
        self.fast = ns["___fast"]
        self.walks += 1
        log.debug("static_inputs_resolved", graph=self.__name__, walks=self.walks,
                  inputs=len(self.plan), resolved=sum(a.startswith("___s") for a in call_args),
                  modules_watched=len(self._watched))
        return self.compiled(*values)

    def on_module_mutation(self, module, name, change):
        self.fast = self.slow
        log.debug("static_inputs_invalidated", graph=self.__name__, change=change)
