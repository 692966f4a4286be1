"""Guards: the conditions under which a cache entry's compiled code may be reused.

`capture_frame` returns a list of `Guard`s. This module turns that list into
  * ONE fast Python function per cache entry (`GuardSet.check`), generated as source text
    and compiled once. It has the user function's own signature, so CPython binds the call's
    arguments for us and `L['x']` becomes the plain local `x`: no dict, no inspect, no loop.
  * a slow path (`GuardSet.failures`) that re-checks each guard on its own and explains in
    words why it failed ("tensor 'x' size mismatch at index 0. expected 100, actual 101"). It
    only runs on a cache miss, to log `recompiles`.
  * a readable rendering in Dynamo's style for the `guards` artifact.

The guard kinds (what each checks, explains and renders) live in guard_kinds.py, one entry per
kind; this module generates and runs the checks and re-exports the kinds' names.
"""
from __future__ import annotations

import inspect
import math
import re
import types
from typing import Any

import torch

from tracetorch import logs
from tracetorch.compiler.native_checks import TENSOR_META, TensorLayout

# re-exported: callers import the kinds' names from guards
from tracetorch.compiler.frontend.guard_kinds import (  # noqa: F401
    _L_RE, _REF_NAME, AMBIENT_STATE, GUARD_KINDS, KINDS, Guard, GuardKind, IdMatch,
    TensorMeta, _float_key, _qualname, _safe_eq, _short, ambient_state, evaluate_source, kind_of,
    pretty_source, symbolic_python, tensor_meta)

log = logs.get_logger(__name__)


class _Scope:
    """How the generated guard function reaches `L[...]` names of one code object; with
    `statics`, static chain prefixes become references resolved at build time (`___r0`)."""

    def __init__(self, code: types.CodeType, statics=None):
        self.code = code
        self.params = _param_names(code)
        self.freevars = code.co_freevars
        self.unreachable: set[str] = set()
        self.statics = statics

    def translate(self, source: str) -> str:
        if self.statics is not None:
            source = self.statics.substitute(source)

        def sub(m):
            name = m.group(2)
            if name in self.params:
                return name
            if name in self.freevars:
                return f"___cells[{self.freevars.index(name)}].cell_contents"
            self.unreachable.add(name)
            return f"___L[{name!r}]"    # not reachable from the call: raises, i.e. a miss
        return _L_RE.sub(sub, source)


def _param_names(code: types.CodeType) -> tuple:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[:n]


def signature_source(code: types.CodeType) -> str:
    names = code.co_varnames
    pos = list(names[:code.co_argcount])
    if code.co_posonlyargcount:
        pos.insert(code.co_posonlyargcount, "/")
    i = code.co_argcount
    kwonly = list(names[i:i + code.co_kwonlyargcount])
    i += code.co_kwonlyargcount
    parts = pos
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[i])
        i += 1
    elif kwonly:
        parts.append("*")
    parts += kwonly
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[i])
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------
# the fast function
# ---------------------------------------------------------------------------------------
_CHAIN = re.compile(r"[A-Za-z_]\w*(?:\.\w+|\[[^\[\]()]*\])*$")


def _chain_prefixes(expr: str) -> list[str]:
    """`self[0].weight` -> [`self[0]`, `self[0].weight`]: the access-chain prefixes worth
    naming once (a bare local name is already free)."""
    if not _CHAIN.match(expr):
        return []
    out, depth, quote = [], 0, None
    for i, c in enumerate(expr):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "[":
            if depth == 0 and i and not expr[:i].isidentifier():
                out.append(expr[:i])
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "." and depth == 0 and not expr[:i].isidentifier():
            out.append(expr[:i])
    return out + ([expr] if not expr.isidentifier() else [])


class _Codegen:
    def __init__(self, scope: _Scope, guards: list[Guard] = ()):
        self.scope = scope
        self.consts: dict[str, Any] = {}
        self.lines: list[str] = []
        self.n = 0
        # Common subexpressions: an access chain read by several guards (self[0] for its id,
        # its .weight and its .bias) is evaluated once, into a local, where first needed.
        counts: dict[str, int] = {}
        for g in guards:
            if kind_of(g).reads_source:
                for p in _chain_prefixes(scope.translate(g.source)):
                    counts[p] = counts.get(p, 0) + 1
        self.shared = {p for p, c in counts.items() if c > 1}
        self.named: dict[str, str] = {}
        self.statics = scope.statics
        self.implied = 0                 # guards that hold while the watched modules are unmutated
        self.batch: list[tuple[str, TensorMeta, str | None]] = []   # static tensors, checked at once
        self.lengths: list[tuple[str, int]] = []      # lengths of static containers (hook dicts)
        self.prologue: list[str] = []    # lines run once per resolution, before the check exists

    def value(self, source: str) -> str:
        """The Python expression reading `source`, through shared locals where possible."""
        return self._cse(self.scope.translate(source))

    def _cse(self, expr: str) -> str:
        for p in reversed(_chain_prefixes(expr)):      # longest shared prefix first
            if p in self.shared:
                if p not in self.named:
                    inner = self._cse_strict(p)
                    self.named[p] = self.tmp(inner)
                return self.named[p] + expr[len(p):]
        return expr

    def _cse_strict(self, expr: str) -> str:
        """Like _cse, but never names `expr` itself (used to define that very name)."""
        for p in reversed(_chain_prefixes(expr)[:-1]):
            if p in self.shared:
                return self._cse(p) + expr[len(p):]
        return expr

    def const(self, value) -> str:
        name = f"___c{len(self.consts)}"
        self.consts[name] = value
        return name

    def check(self, cond: str, comment: str | None):
        self.lines.append(f"if not ({cond}): return False" + (f"  # {comment}" if comment else ""))

    def factory_tmp(self, expr: str) -> str:
        """A value computed once from the resolved references, when the check is made."""
        name = f"___f{len(self.prologue)}"
        self.prologue.append(f"{name} = {expr}")
        return name

    def tmp(self, expr: str) -> str:
        name = f"___v{self.n}"
        self.n += 1
        self.lines.append(f"{name} = {expr}")
        return name

    def guard(self, g: Guard):
        if self.statics is not None and kind_of(g).implied(g, self.statics):
            self.implied += 1
            return
        kind_of(g).emit(self, g)

    def length_batch(self):
        """The static containers' lengths (a module's hook dicts must stay empty), one map."""
        if not self.lengths:
            return
        objs = self.factory_tmp("(" + "".join(f"{v}, " for v, _ in self.lengths) + ")")
        self.check(f"___list(___map(___len, {objs})) == {self.const([n for _, n in self.lengths])}",
                   "static containers: lengths")

    def tensor_batch(self):
        """The static tensors' metadata, compared in C: one map over the tensors per field
        group and a list comparison, instead of five attribute reads per tensor in bytecode."""
        if not self.batch:
            return
        ts = self.factory_tmp("(" + "".join(f"{t}, " for t, _, _ in self.batch) + ")")
        types_ = [m.type for _, m, _ in self.batch]
        metas = [(m.dtype, m.device, torch.Size(m.shape), m.requires_grad) for _, m, _ in self.batch]
        self.check(f"___list(___map(type, {ts})) == {self.const(types_)}", "static tensors: types")
        if all(m.stride is not None for _, m, _ in self.batch):
            # one call for all of them (compiler/native_checks.py: C++ when built, ~200 us less
            # per call for ResNet-50's 267 parameters and buffers)
            layout = TensorLayout(metas, [m.stride for _, m, _ in self.batch])
            self.check(f"{self.const(layout.matches)}({ts})",
                       "static tensors: dtype, device, shape, stride, requires_grad")
            return
        self.check(f"___list(___map(___tensor_meta, {ts})) == {self.const(metas)}",
                   "static tensors: dtype, device, shape, requires_grad")
        strided = [i for i, (_, m, _) in enumerate(self.batch) if m.stride is not None]
        if strided:
            sts = ts if len(strided) == len(self.batch) else self.factory_tmp(
                "(" + "".join(f"{self.batch[i][0]}, " for i in strided) + ")")
            self.check(f"___list(___map(___stride, {sts})) == "
                       f"{self.const([tuple(self.batch[i][1].stride) for i in strided])}",
                       "static tensors: strides")


class GuardSet:
    """The compiled guards of one cache entry.

    `check` is what the hot path calls. With `static_modules` (the default), module-derived
    sources are resolved once (static_sources.py) and the modules along them watched
    (mutation.py): `check` holds the resolved objects and skips every guard the unmutated module
    tree implies. When a watched module changes in a way a resolution depended on, `check`
    becomes `_revalidate`: the full path-walking guards (today's semantics, nothing skipped);
    if they pass, the references are resolved anew and the fast check comes back; if not, the
    call misses and `failures` names the mutation and the failing guard. `on_check_changed`
    (set by the cache) is told whenever `check` is replaced.
    """

    # A guard set whose modules keep being mutated (a forward that assigns a module attribute
    # that a guard reads, on every call) stops resolving and walks the paths, as before.
    MAX_REBUILDS = 8

    def __init__(self, guards: list[Guard], fn: types.FunctionType, *, static_modules: bool = True):
        self.guards = sorted(guards, key=lambda g: kind_of(g).order)
        self.fn = fn
        self.static_modules = static_modules
        self.mutation: str | None = None     # why the fast check is stale (a module changed)
        self.on_check_changed = None
        self.rebuilds = 0
        self.implied = 0                     # guards the fast check skips (implied by the modules)
        self._walking = None
        self._paths: dict[int, str] = {}
        self._watched: list = []
        self._build()
        if self.scope.unreachable:
            # A guard on a name that is neither an argument nor a free variable can never
            # pass: say so now rather than recompiling until the cache limit.
            from tracetorch.logs import get_logger
            get_logger(__name__).warning(
                "guard_source_unreachable", function=fn.__code__.co_name,
                names=sorted(self.scope.unreachable),
                reason="guards must name arguments (L['x']), free variables or globals (G['w'])")

    def _build(self) -> None:
        statics = None
        if self.static_modules:
            from tracetorch.compiler.frontend.static_sources import StaticSources
            statics = StaticSources([(g.source, g.expected) for g in self.guards
                                     if isinstance(kind_of(g), IdMatch)], self.fn.__globals__)
        self.source, self.check, self.scope, self.implied = self._generate(statics)
        if statics is not None and (statics.deps or statics.slots):
            from tracetorch.compiler.frontend import mutation
            self._paths = {k: d.path for k, d in statics.deps.items()}
            self._watched = [d.module for d in statics.deps.values()]
            for d in statics.deps.values():
                mutation.watch(d.module, self, d.names)
        if statics is None or not statics.values:
            self._walking = self.check        # nothing resolved: the fast check is the walk

    def _generate(self, statics):
        """(source, check function, scope, implied count) of the guard function."""
        fn = self.fn
        scope = _Scope(fn.__code__, statics)
        guards = _shared_functions(self.guards, statics) if statics is not None else self.guards
        gen = _Codegen(scope, guards)
        for g in guards:
            gen.guard(g)
        gen.length_batch()
        gen.tensor_batch()
        fingerprint = None
        if statics is not None and (statics.deps or statics.slots):
            # the resolved references hold while the modules and slots read are unchanged
            from tracetorch.compiler.frontend import mutation
            fingerprint = mutation.Fingerprint(
                [(d.module, d.path, d.names) for d in statics.deps.values()], list(statics.slots.values()))
            gen.lines.insert(0, "if not ___unchanged(): return ___modules_changed()")
        if statics is not None:
            self._fingerprint = fingerprint
        body = "\n".join("        " + line for line in gen.lines) or "        pass"
        source = (f"def ___check_guards({signature_source(fn.__code__)}):\n"
                  f"    try:\n{body}\n        return True\n"
                  f"    except Exception:\n        return False\n")
        refs = statics.values if statics is not None else []
        if refs:
            # The resolved objects become closure variables of the check (as fast as locals).
            names = ", ".join(f"___r{i}" for i in range(len(refs)))
            source = (f"def ___make_check(___refs):\n    {names}, = ___refs\n"
                      + "".join(f"    {line}\n" for line in gen.prologue)
                      + "".join("    " + line + "\n" for line in source.splitlines())
                      + "    return ___check_guards\n")
        ns = dict(gen.consts, ___Tensor=torch.Tensor, ___is_grad_enabled=torch.is_grad_enabled,
                  ___get_default_dtype=torch.get_default_dtype, ___cells=fn.__closure__ or (),
                  G=fn.__globals__, math=math, ___L=_Unreachable(), ___list=list, ___map=map,
                  ___tensor_meta=TENSOR_META, ___len=len, ___stride=torch.Tensor.stride,
                  ___from_numpy=torch.from_numpy, ___float_key=_float_key,
                  ___ambient_state=ambient_state,
                  ___unchanged=fingerprint.unchanged if fingerprint else None,
                  ___modules_changed=lambda: self._modules_changed(fingerprint))
        exec(compile(source, f"<guards of {fn.__code__.co_name}>", "exec"), ns)
        check = ns["___make_check"](tuple(refs)) if refs else ns["___check_guards"]
        check.__defaults__ = fn.__defaults__
        check.__kwdefaults__ = fn.__kwdefaults__
        return source, check, scope, gen.implied

    def walking_check(self):
        """The guards evaluated in full, every source walked from the call's arguments."""
        if self._walking is None:
            self._walking = self._generate(None)[1]
        return self._walking

    # ---- module mutation ------------------------------------------------------------------
    def unchanged(self) -> bool:
        """Are the modules the fast check resolved as they were (True when none were)?"""
        fp = getattr(self, "_fingerprint", None)
        return fp is None or fp.unchanged()

    def _modules_changed(self, fingerprint) -> bool:
        """The fast check found a module it resolved changed: go stale (the next check walks
        every source, see _revalidate; eval_frame retries the entries once on a miss)."""
        if self.mutation is None:
            self.mutation = fingerprint.describe() or "a module the guards read was mutated"
            self._go_stale()
        return False

    def on_module_mutation(self, module, name: str, change: str) -> None:
        if self.mutation is not None:
            return
        self.mutation = f"module {self._paths.get(id(module), type(module).__name__)} was mutated: {change}"
        self._go_stale()

    def _go_stale(self) -> None:
        self.check = self._revalidate
        log.debug("guards_invalidated", function=self.fn.__code__.co_name, reason=self.mutation)
        if self.on_check_changed is not None:
            self.on_check_changed()

    def _revalidate(self, *args, **kwargs) -> bool:
        if not self.walking_check()(*args, **kwargs):
            return False
        from tracetorch.compiler.frontend import mutation
        mutation.unwatch_all(self, self._watched)
        self._watched = []
        self.rebuilds += 1
        reason, self.mutation = self.mutation, None
        if self.rebuilds > self.MAX_REBUILDS:
            self.static_modules = False
            log.info("guards_static_modules_disabled", function=self.fn.__code__.co_name,
                     rebuilds=self.rebuilds, last_mutation=reason,
                     reason="modules the guards read keep being mutated: walk the sources on every call")
        try:
            self._build()
        except Exception as e:        # never fail a call because of the optimization
            log.warning("guards_rebuild_failed", function=self.fn.__code__.co_name,
                        error=f"{type(e).__name__}: {e}")
            self.static_modules = False
            self.check = self.walking_check()
        log.debug("guards_revalidated", function=self.fn.__code__.co_name, after=reason,
                  rebuilds=self.rebuilds)
        if self.on_check_changed is not None:
            self.on_check_changed()
        return True

    @property
    def stale(self) -> bool:
        return self.mutation is not None

    # ---- slow path: why did it fail? -----------------------------------------------------
    def failures(self, args: tuple, kwargs: dict, *, first_only: bool = False) -> list[str]:
        """Every failing guard of this entry as a readable reason (only on a cache miss); after
        a module mutation, the first reason names the mutation too."""
        env = frame_locals(self.fn, args, kwargs)
        out = []
        for g in self.guards:
            reason = explain_failure(g, env, self.fn.__globals__)
            if reason:
                out.append(Reason(reason, g.user_location))
                if first_only:
                    break
        if self.mutation is not None:
            if out:
                out[0] = Reason(f"{self.mutation}; {out[0]}", out[0].location)
            else:
                out = [Reason(self.mutation)]
        return out

    # ---- rendering for the `guards` artifact ---------------------------------------------
    def render(self) -> str:
        return render_guards(self.guards)


_METHOD_FUNC = re.compile(r"___r(\d+)\.(\w+)\.__func__")


def _shared_functions(guards: list[Guard], statics) -> list[Guard]:
    """The guards with those on a method's function read through another instance dropped.

    Twelve BERT layers call one class's forward: the trace reads that function's closure cells,
    defaults and globals through each layer (`layer[3].forward.__func__.__closure__[1]...`), so
    the same checks came twelve times (1283 lines, 0.47 ms per call on this machine's CPU).
    Where a guard's source runs through `<static module>.<name>.__func__` and that function is
    the one an earlier source reached, the guard is dropped if the same guard on the earlier
    source is kept, and one identity check of the function through this source stands for all
    of them (the function may be replaced, not re-read)."""
    resolved: dict[str, Any] = {}

    def function_at(source):
        m = _METHOD_FUNC.match(statics.substitute(source))
        if m is None:
            return None
        try:
            fn = getattr(getattr(statics.values[int(m.group(1))], m.group(2)), "__func__")
        except Exception:
            return None
        return fn if isinstance(fn, types.FunctionType) else None

    prefix_end = ".__func__"
    first: dict[int, str] = {}            # id(function) -> the first prefix that reached it
    keys = {(g.source, g.kind, _expected_key(g.expected)) for g in guards}
    kept, identity = [], {}
    for g in guards:
        i = g.source.find(prefix_end)
        if not kind_of(g).reads_source or i < 0 or len(g.source) == i + len(prefix_end):
            kept.append(g)
            continue
        prefix = g.source[:i + len(prefix_end)]
        if prefix not in resolved:
            resolved[prefix] = function_at(prefix)
        f = resolved[prefix]
        owner = first.setdefault(id(f), prefix) if f is not None else prefix
        twin = (owner + g.source[len(prefix):], g.kind, _expected_key(g.expected))
        if owner == prefix or twin not in keys:
            kept.append(g)
            continue
        identity.setdefault(prefix, Guard(prefix, "ID_MATCH", f, g.user_location))
    return kept + list(identity.values())


def _expected_key(v):
    try:
        hash(v)
        return (type(v), v)
    except TypeError:
        return ("id", id(v))


class Reason(str):
    """A guard-failure reason; `.location` is the user's file:line that installed the guard."""

    def __new__(cls, text: str, location: str | None = None):
        self = super().__new__(cls, text)
        self.location = location
        return self


class _Unreachable:
    def __getitem__(self, key):
        raise KeyError(key)


def frame_locals(fn: types.FunctionType, args: tuple, kwargs: dict, strict: bool = False) -> dict:
    """What Dynamo calls L: the bound arguments, plus closure cell contents."""
    try:
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
        bound.apply_defaults()
        env = dict(bound.arguments)
    except TypeError:
        if strict:
            raise
        env = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            env[name] = cell.cell_contents
        except ValueError:
            pass
    return env


def explain_failure(g: Guard, env: dict, globals_: dict) -> str | None:
    """None if the guard holds, else the reason in words."""
    return kind_of(g).explain(g, env, globals_)


# ---------------------------------------------------------------------------------------
# rendering (Dynamo's `guards` artifact shape: one line per guard, grouped by source)
# ---------------------------------------------------------------------------------------
def describe(g: Guard) -> str:
    return kind_of(g).describe(g)


def render_guards(guards: list[Guard]) -> str:
    lines = ["GUARDS:", "", "+- RootGuardManager"]
    by_root: dict[str, list[Guard]] = {}
    for g in guards:
        root = _root(g.source) if kind_of(g).reads_source else ""
        by_root.setdefault(root, []).append(g)
    for root, gs in by_root.items():
        indent = "| "
        if root:
            lines.append(f"| +- GuardManager: source={root}")
            indent = "| | "
        for g in gs:
            loc = f"  # {g.user_location}" if g.user_location else ""
            lines.append(f"{indent}+- {describe(g)}{loc}")
    return "\n".join(lines)


def _root(source: str) -> str:
    m = re.match(r"""[LG]\[(['"]).*?\1\]""", source)
    return m.group(0) if m else source
