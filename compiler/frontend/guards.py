"""Guards: the conditions under which a cache entry's compiled code may be reused.

`capture_frame` returns a list of `Guard`s. This module turns that list into
  * ONE fast Python function per cache entry (`GuardSet.check`), generated as source text
    and compiled once. It has the user function's own signature, so CPython binds the call's
    arguments for us and `L['x']` becomes the plain local `x`: no dict, no inspect, no loop.
  * a slow path (`GuardSet.failures`) that re-checks each guard on its own and explains in
    words why it failed ("tensor 'x' size mismatch at index 0. expected 100, actual 101"). It
    only runs on a cache miss, to log `recompiles`.
  * a readable rendering in Dynamo's style for the `guards` artifact.

`expected` by kind (the contract with frontend-capture, docs/CONTRACTS.md section 6) is
documented on each kind's entry (`GUARD_KINDS`, section "guard kinds" below).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import operator
import re
import types
from typing import Any

import torch

from tracetorch import logs

log = logs.get_logger(__name__)

# one C-level read of the metadata a static tensor's guard compares (see _Codegen.tensor_batch)
_TENSOR_META = operator.attrgetter("dtype", "device", "shape", "requires_grad")

# Ambient torch state a captured graph depends on besides grad mode and the default dtype:
# (name, reader) pairs, read in this order by `ambient_state()`.
AMBIENT_STATE = (
    ("autocast_cpu", lambda: torch.is_autocast_enabled("cpu")),
    ("autocast_cpu_dtype", lambda: torch.get_autocast_dtype("cpu")),
    ("autocast_cuda", lambda: torch.is_autocast_enabled("cuda")),
    ("autocast_cuda_dtype", lambda: torch.get_autocast_dtype("cuda")),
    ("deterministic", torch.are_deterministic_algorithms_enabled),
    ("deterministic_warn_only", torch.is_deterministic_algorithms_warn_only_enabled),
    ("inference_mode", torch.is_inference_mode_enabled),
)


def ambient_state() -> tuple:
    return tuple(read() for _, read in AMBIENT_STATE)


@dataclasses.dataclass(eq=False)
class Guard:
    source: str
    kind: str
    expected: Any
    user_location: str | None = None

    def __repr__(self):
        return f"Guard({self.source!r}, {self.kind}, {_short(self.expected)}, {self.user_location!r})"


@dataclasses.dataclass(frozen=True)
class TensorMeta:
    dtype: torch.dtype
    device: torch.device
    shape: tuple            # int per dim, None where the dim is dynamic
    stride: tuple | None    # int per dim, None where unchecked (depends on a dynamic size)
    requires_grad: bool
    type: type | None = None  # exact Python type when known (Tensor, Parameter, ...)
    inference: bool | None = None  # is_inference(), checked when known (None: unchecked)

    @classmethod
    def of(cls, t: torch.Tensor, dynamic_dims=()) -> "TensorMeta":
        """Meta of a real tensor; dims in dynamic_dims become None (and strides that use them)."""
        dyn = set(dynamic_dims)
        shape = tuple(None if i in dyn else int(s) for i, s in enumerate(t.shape))
        stride = tuple(int(s) for s in t.stride())
        if dyn:
            # A dense stride is the product of the sizes of the dims laid out inside it (later
            # dims when contiguous, earlier ones when e.g. column-major): unknown when one of
            # those is dynamic. Order dims by stride to find them, whatever the layout.
            order = sorted(range(t.dim()), key=lambda d: (stride[d], -d))
            inside = {d: set(order[:k]) for k, d in enumerate(order)}
            stride = tuple(None if inside[i] & dyn else s for i, s in enumerate(stride))
        return cls(t.dtype, t.device, shape, stride, bool(t.requires_grad), type(t))


def tensor_meta(expected) -> TensorMeta:
    """Normalize the forms of TENSOR_MATCH's `expected` that capture may hand us."""
    if isinstance(expected, TensorMeta):
        return expected
    if isinstance(expected, torch.Tensor):
        return TensorMeta.of(expected)
    if isinstance(expected, dict):
        d = expected
        shape = d.get("shape", d.get("size", d.get("sizes")))
        stride = d.get("stride", d.get("strides"))
        return TensorMeta(d["dtype"], torch.device(d["device"]), tuple(shape),
                          None if stride is None else tuple(stride),
                          bool(d.get("requires_grad", False)), d.get("type"), d.get("inference"))
    if isinstance(expected, (tuple, list)):
        dtype, device, shape, stride, rg = expected[:5]
        return TensorMeta(dtype, torch.device(device), tuple(shape),
                          None if stride is None else tuple(stride), bool(rg),
                          expected[5] if len(expected) > 5 else None)
    # any object with the attributes
    stride = getattr(expected, "stride", None)
    return TensorMeta(expected.dtype, torch.device(expected.device), tuple(expected.shape),
                      None if stride is None or callable(stride) else tuple(stride),
                      bool(expected.requires_grad), getattr(expected, "type", None))


# ---------------------------------------------------------------------------------------
# guard kinds: one entry each, holding its place in the check, the fast check's code, the
# slow path's explanation and the `guards` artifact line
# ---------------------------------------------------------------------------------------
class GuardKind:
    """One guard kind. Subclasses register with `@_kind` and override `condition` (the fast
    check's test on the value read from the source), `mismatch` (why a value fails, in words)
    and `describe`; kinds that read no single source (global state, SYMBOLIC) override `emit`
    and `explain` instead."""

    name = "?"
    # Place in the check. Global-state guards are cheapest and most often the cause of a miss:
    # they come first (0, 1); tensors and symbolic shapes last; unknown kinds after everything.
    order = 9
    # False where the source is ignored or the guard reads several sources itself: such a
    # guard names no access chain worth sharing and renders outside the per-source groups.
    reads_source = True

    def emit(self, gen: _Codegen, g: Guard) -> None:
        """Add `g`'s lines to the fast check being generated."""
        gen.check(self.condition(gen, g, gen.value(g.source)), g.user_location)

    def condition(self, gen: _Codegen, g: Guard, v: str) -> str:
        raise NotImplementedError

    def explain(self, g: Guard, env: dict, globals_: dict) -> str | None:
        """None if `g` holds in the frame `env`, else the reason in words."""
        name = pretty_source(g.source)
        try:
            value = evaluate_source(g.source, env, globals_)
        except Exception as e:
            return f"{name} could not be read: {type(e).__name__}: {e}"
        return self.mismatch(g, name, value)

    def mismatch(self, g: Guard, name: str, value) -> str | None:
        raise NotImplementedError

    def describe(self, g: Guard) -> str:
        return f"{g.kind}: {g.source} {g.expected!r}"

    def implied(self, g: Guard, statics) -> bool:
        """Is `g` true for as long as the modules `statics` (static_sources.StaticSources)
        watches are unmutated? Then it needs no check per call. Most kinds: never."""
        return False


GUARD_KINDS: dict[str, GuardKind] = {}


def _kind(cls):
    GUARD_KINDS[cls.name] = cls()
    return cls


class _UnknownKind(GuardKind):
    """A kind string no entry registers: it can be explained and rendered, never compiled."""

    def emit(self, gen, g):
        raise ValueError(f"unknown guard kind {g.kind!r}; valid kinds: {', '.join(KINDS)}")

    def mismatch(self, g, name, value):
        return f"unknown guard kind {g.kind!r}"


_UNKNOWN = _UnknownKind()


def kind_of(g: Guard) -> GuardKind:
    return GUARD_KINDS.get(g.kind, _UNKNOWN)


@_kind
class TensorMatch(GuardKind):
    """`expected`: a `TensorMeta`, a dict with keys dtype, device, shape (None = dynamic dim),
    stride (None entries / None = unchecked), requires_grad, optionally type; or a tuple
    (dtype, device, shape, stride, requires_grad); or a real tensor."""

    name, order = "TENSOR_MATCH", 7

    def emit(self, gen, g):
        m = tensor_meta(g.expected)
        t = gen.value(g.source)
        if (gen.statics is not None and _REF_NAME.fullmatch(t) and m.type is not None
                and None not in m.shape and (m.stride is None or None not in m.stride)):
            gen.batch.append((t, m, g.user_location))
            return
        if not t.isidentifier():
            t = gen.tmp(t)
        if m.type is not None:
            gen.check(f"type({t}) is {gen.const(m.type)}", g.user_location)
        else:
            gen.check(f"isinstance({t}, ___Tensor)", g.user_location)
        conds = [f"{t}.dtype is {gen.const(m.dtype)}", f"{t}.device == {gen.const(m.device)}"]
        if all(s is not None for s in m.shape):
            # torch.Size == tuple compares in C: one call checks rank and every size.
            conds.append(f"{t}.shape == {gen.const(tuple(m.shape))}")
        else:
            s = f"{t}.shape"
            conds.append(f"len({s}) == {len(m.shape)}")
            conds += [f"{s}[{i}] == {d}" for i, d in enumerate(m.shape) if d is not None]
        if m.stride is not None:
            if all(s is not None for s in m.stride):
                conds.append(f"{t}.stride() == {gen.const(tuple(m.stride))}")
            elif any(s is not None for s in m.stride):
                st = f"{t}.stride()"
                conds += [f"{st}[{i}] == {d}" for i, d in enumerate(m.stride) if d is not None]
        conds.append(f"{t}.requires_grad is {m.requires_grad}")
        if m.inference is not None:
            conds.append(f"{t}.is_inference() is {m.inference}")
        gen.check(" and ".join(conds), g.user_location)

    def mismatch(self, g, name, t):
        m = tensor_meta(g.expected)
        if not isinstance(t, torch.Tensor):
            return f"expected type of '{name}' to be a tensor type, but found {type(t)}"
        if m.type is not None and type(t) is not m.type:
            return (f"tensor '{name}' Python type mismatch. expected {_qualname(m.type)}, "
                    f"actual {_qualname(type(t))}")
        if t.dtype is not m.dtype:
            return (f"tensor '{name}' dtype mismatch. expected {_dtype_name(m.dtype)}, "
                    f"actual {_dtype_name(t.dtype)}")
        if t.device != m.device:
            return f"tensor '{name}' device mismatch. expected {m.device}, actual {t.device}"
        if t.dim() != len(m.shape):
            return f"tensor '{name}' rank mismatch. expected {len(m.shape)}, actual {t.dim()}"
        for i, (e, a) in enumerate(zip(m.shape, t.shape)):
            if e is not None and e != a:
                return f"tensor '{name}' size mismatch at index {i}. expected {e}, actual {a}"
        if m.stride is not None:
            for i, (e, a) in enumerate(zip(m.stride, t.stride())):
                if e is not None and e != a:
                    return f"tensor '{name}' stride mismatch at index {i}. expected {e}, actual {a}"
        if bool(t.requires_grad) != m.requires_grad:
            return f"tensor '{name}' requires_grad mismatch. expected requires_grad={int(m.requires_grad)}"
        if m.inference is not None and t.is_inference() != m.inference:
            return f"tensor '{name}' inference mismatch. expected is_inference()={m.inference}"
        return None

    def describe(self, g):
        m = tensor_meta(g.expected)
        size = [("s?" if s is None else s) for s in m.shape]
        stride = None if m.stride is None else [("?" if s is None else s) for s in m.stride]
        return (f"TENSOR_MATCH: check_tensor({g.source}, {_qualname(m.type or torch.Tensor)}, "
                f"{m.dtype}, device={m.device}, requires_grad={m.requires_grad}, size={size}, stride={stride})")


@_kind
class ConstantMatch(GuardKind):
    """`expected`: the value (None, bool, int, float, str, tuples of those, ...); its type and
    == are checked (None and bools by identity, floats by bits)."""

    name, order = "CONSTANT_MATCH", 5

    def condition(self, gen, g, v):
        c = gen.const(g.expected)
        if g.expected is None or isinstance(g.expected, bool):
            return f"{v} is {c}"
        if type(g.expected) is float and (g.expected != g.expected or g.expected == 0):
            # == cannot tell nan (never equal) or the sign of a zero: compare the bits
            return f"type({v}) is float and ___float_key({v}) == {gen.const(_float_key(g.expected))}"
        return f"type({v}) is {gen.const(type(g.expected))} and {v} == {c}"

    def mismatch(self, g, name, value):
        same = (value is g.expected if g.expected is None or isinstance(g.expected, bool)
                else type(value) is type(g.expected) and _safe_eq(value, g.expected))
        if same:
            return None
        if type(value) is not type(g.expected):
            return (f"{g.source} == {g.expected!r}: expected type of '{name}' to be "
                    f"{type(g.expected).__name__}, but found {type(value).__name__} ({_short(value)})")
        return (f"{g.source} == {g.expected!r}: '{name}' value mismatch. expected {g.expected!r}, "
                f"actual {_short(value)}")

    def describe(self, g):
        return f"CONSTANT_MATCH: {g.source} == {g.expected!r}"

    def implied(self, g, statics):
        ok, v = statics.static_value(g.source)
        if not ok or not statics.immutable(v):
            return False
        if g.expected is None or isinstance(g.expected, bool):
            return v is g.expected
        return type(v) is type(g.expected) and _safe_eq(v, g.expected)


@_kind
class TypeMatch(GuardKind):
    """`expected`: the type (the value's type must be exactly it)."""

    name, order = "TYPE_MATCH", 4

    def condition(self, gen, g, v):
        return f"type({v}) is {gen.const(g.expected)}"

    def mismatch(self, g, name, value):
        return None if type(value) is g.expected else (
            f"type mismatch for '{name}'. expected {_qualname(g.expected)}, actual {_qualname(type(value))}")

    def describe(self, g):
        return f"TYPE_MATCH: ___check_type_id({g.source}, {_qualname(g.expected)})"

    def implied(self, g, statics):
        ok, v = statics.static_value(g.source)
        return ok and type(v) is g.expected and statics.class_fixed(v, g.source)


@_kind
class IdMatch(GuardKind):
    """`expected`: the object itself (kept alive by the guard, so its id cannot be reused)."""

    name, order = "ID_MATCH", 3

    def condition(self, gen, g, v):
        return f"{v} is {gen.const(g.expected)}"

    def mismatch(self, g, name, value):
        return None if value is g.expected else (
            f"identity mismatch for '{name}'. expected the object {_short(g.expected)} "
            f"(id {id(g.expected)}), actual {_short(value)} (id {id(value)})")

    def describe(self, g):
        return f"ID_MATCH: ___check_obj_id({g.source}, {id(g.expected)})  # {_short(g.expected, 40)}"

    def implied(self, g, statics):
        ok, v = statics.static_value(g.source)
        return ok and v is g.expected


@_kind
class LengthCheck(GuardKind):
    """`expected`: the length (int)."""

    name, order = "LENGTH_CHECK", 6

    def condition(self, gen, g, v):
        return f"len({v}) == {int(g.expected)}"

    def mismatch(self, g, name, value):
        try:
            n = len(value)
        except TypeError:
            return f"len({g.source}) == {g.expected}: '{name}' has no len() (found {type(value).__name__})"
        return None if n == g.expected else (
            f"len({g.source}) == {g.expected}: length mismatch for '{name}'. expected {g.expected}, actual {n}")

    def describe(self, g):
        return f"LENGTH_CHECK: len({g.source}) == {g.expected}"

    def implied(self, g, statics):
        ok, v = statics.static_value(g.source)
        return ok and statics.fixed_length(v, g.source) == g.expected


@_kind
class NnModuleTraining(GuardKind):
    """`expected`: bool; the source is the module (or its `.training`)."""

    name, order = "NN_MODULE_TRAINING", 2

    def condition(self, gen, g, v):
        attr = v if g.source.endswith(".training") else f"{v}.training"
        return f"{attr} is {bool(g.expected)}"

    def mismatch(self, g, name, value):
        flag = value if g.source.endswith(".training") else getattr(value, "training", None)
        label = name if g.source.endswith(".training") else f"{name}.training"
        return None if flag is bool(g.expected) else (
            f"'{label}' mismatch (module training flag). expected {bool(g.expected)}, actual {flag}")

    def describe(self, g):
        src = g.source if g.source.endswith(".training") else g.source + ".training"
        return f"NN_MODULE_TRAINING: {src} is {bool(g.expected)}"

    def implied(self, g, statics):
        ok, v = statics.static_value(g.source if g.source.endswith(".training") else g.source + ".training")
        return ok and v is bool(g.expected)


@_kind
class GradMode(GuardKind):
    """`expected`: bool (source ignored)."""

    name, order, reads_source = "GRAD_MODE", 0, False

    def emit(self, gen, g):
        gen.check(f"___is_grad_enabled() is {bool(g.expected)}", g.user_location)

    def explain(self, g, env, globals_):
        actual = torch.is_grad_enabled()
        return None if actual == bool(g.expected) else (
            f"global state changed: grad mode. expected {bool(g.expected)}, actual {actual}")

    def describe(self, g):
        return f"GLOBAL_STATE: torch.is_grad_enabled() is {bool(g.expected)}"


@_kind
class DefaultDtype(GuardKind):
    """`expected`: torch.dtype (source ignored)."""

    name, order, reads_source = "DEFAULT_DTYPE", 1, False

    def emit(self, gen, g):
        gen.check(f"___get_default_dtype() is {gen.const(g.expected)}", g.user_location)

    def explain(self, g, env, globals_):
        actual = torch.get_default_dtype()
        return None if actual is g.expected else (
            f"global state changed: default dtype. expected {g.expected}, actual {actual}")

    def describe(self, g):
        return f"GLOBAL_STATE: torch.get_default_dtype() is {g.expected}"


@_kind
class Symbolic(GuardKind):
    """`expected`: a Python expression over sources (str), a sympy relation whose only symbol
    stands for `source`, or (sympy relation, {symbol name: source})."""

    name, order, reads_source = "SYMBOLIC", 8, False

    def emit(self, gen, g):
        gen.check(symbolic_python(g, gen.scope.translate), g.user_location)

    def explain(self, g, env, globals_):
        text = symbolic_python(g)
        try:
            ok = bool(evaluate_source(text, env, globals_))
        except Exception as e:
            return f"{text} could not be evaluated: {type(e).__name__}: {e}"
        return None if ok else (
            f"symbolic shape guard failed: {pretty_source(text)} ({_symbolic_values(text, env, globals_)})")

    def describe(self, g):
        try:
            return f"SYMBOLIC_SHAPE: {symbolic_python(g)}"
        except Exception:
            return f"SYMBOLIC_SHAPE: {g.expected}"


@_kind
class Ambient(GuardKind):
    """`expected`: the tuple `ambient_state()` returns (autocast per device, deterministic
    algorithms, inference mode; source ignored)."""

    name, order, reads_source = "AMBIENT", 1, False

    def emit(self, gen, g):
        gen.check(f"___ambient_state() == {gen.const(tuple(g.expected))}", g.user_location)

    def explain(self, g, env, globals_):
        actual = ambient_state()
        diff = [f"{n}: expected {e}, actual {a}" for (n, _), e, a
                in zip(AMBIENT_STATE, g.expected, actual) if e != a]
        return None if not diff else "global state changed: " + "; ".join(diff)

    def describe(self, g):
        return "GLOBAL_STATE: " + ", ".join(f"{n}={e}" for (n, _), e in zip(AMBIENT_STATE, g.expected))


KINDS = tuple(GUARD_KINDS)


# ---------------------------------------------------------------------------------------
# sources -> Python expressions
# ---------------------------------------------------------------------------------------
_L_RE = re.compile(r"""L\[(['"])([A-Za-z_][A-Za-z0-9_]*)\1\]""")


def pretty_source(source: str) -> str:
    """L['x'] -> x, L['self'].lin -> self.lin (how messages name values, like Dynamo's)."""
    return _L_RE.sub(lambda m: m.group(2), source)


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
_REF_NAME = re.compile(r"___r\d+")


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

    def tensor_batch(self):
        """The static tensors' metadata, compared in C: one map over the tensors per field
        group and a list comparison, instead of five attribute reads per tensor in bytecode."""
        if not self.batch:
            return
        ts = self.factory_tmp("(" + "".join(f"{t}, " for t, _, _ in self.batch) + ")")
        types_ = [m.type for _, m, _ in self.batch]
        metas = [(m.dtype, m.device, torch.Size(m.shape), m.requires_grad) for _, m, _ in self.batch]
        self.check(f"___list(___map(type, {ts})) == {self.const(types_)}", "static tensors: types")
        self.check(f"___list(___map(___tensor_meta, {ts})) == {self.const(metas)}",
                   "static tensors: dtype, device, shape, requires_grad")
        strided = [i for i, (_, m, _) in enumerate(self.batch) if m.stride is not None]
        if strided:
            sts = ts if len(strided) == len(self.batch) else self.factory_tmp(
                "(" + "".join(f"{self.batch[i][0]}, " for i in strided) + ")")
            self.check(f"___list(___map(___stride, {sts})) == "
                       f"{self.const([tuple(self.batch[i][1].stride) for i in strided])}",
                       "static tensors: strides")


def symbolic_python(g: Guard, translate=lambda s: s) -> str:
    """A SYMBOLIC guard as a Python expression over (translated) sources."""
    exp = g.expected
    if isinstance(exp, str):
        return translate(exp)
    if isinstance(exp, tuple) and len(exp) == 2 and isinstance(exp[1], dict):
        expr, mapping = exp
    else:
        expr = exp
        syms = sorted(expr.free_symbols, key=str)
        if len(syms) != 1:
            raise ValueError(f"SYMBOLIC guard on {g.source!r} over {syms}: pass "
                             "(relation, {symbol: source}) when there is not exactly one symbol")
        mapping = {str(syms[0]): g.source}
    import sympy
    from sympy.printing.pycode import pycode
    subs = {}
    names = {}
    for i, sym in enumerate(sorted(expr.free_symbols, key=str)):
        d = sympy.Symbol(f"___sym{i}", integer=True)
        subs[sym] = d
        names[f"___sym{i}"] = "(" + translate(mapping[str(sym)]) + ")"
    text = pycode(expr.xreplace(subs), fully_qualified_modules=False)
    return re.sub(r"___sym\d+", lambda m: names[m.group(0)], text)


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
                                     if isinstance(kind_of(g), IdMatch)])
        self.source, self.check, self.scope, self.implied = self._generate(statics)
        if statics is not None and statics.deps:
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
        gen = _Codegen(scope, self.guards)
        for g in self.guards:
            gen.guard(g)
        gen.tensor_batch()
        fingerprint = None
        if statics is not None and statics.deps:
            # the resolved references hold while the modules read are unchanged (mutation.py)
            from tracetorch.compiler.frontend import mutation
            fingerprint = mutation.Fingerprint(
                [(d.module, d.path, d.names) for d in statics.deps.values()])
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
                  ___tensor_meta=_TENSOR_META, ___stride=torch.Tensor.stride,
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


def evaluate_source(source: str, env: dict, globals_: dict):
    return eval(source, {"L": env, "G": globals_, "math": math, "___from_numpy": torch.from_numpy}, {})


_DTYPE_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
                torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int",
                torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
                torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}


def _dtype_name(d):
    return _DTYPE_NAMES.get(d, str(d).replace("torch.", ""))


def explain_failure(g: Guard, env: dict, globals_: dict) -> str | None:
    """None if the guard holds, else the reason in words."""
    return kind_of(g).explain(g, env, globals_)


def _symbolic_values(text, env, globals_):
    parts = []
    for src in sorted(set(re.findall(r"""[LG]\[['"]\w+['"]\](?:\.\w+|\[\d+\]|\(\))*""", text))):
        try:
            parts.append(f"{pretty_source(src)} = {evaluate_source(src, env, globals_)!r}")
        except Exception:
            pass
    return ", ".join(parts) or "values unavailable"


def _float_key(x: float):
    """A float's identity for CONSTANT_MATCH: nan equals nan, 0.0 differs from -0.0."""
    return ("nan",) if x != x else (x, math.copysign(1.0, x))


def _safe_eq(a, b):
    if type(a) is float and type(b) is float:
        return _float_key(a) == _float_key(b)
    try:
        return bool(a == b)
    except Exception:
        return False


def _qualname(t):
    return getattr(t, "__qualname__", repr(t))


def _short(v, n=60):
    r = repr(v)
    return r if len(r) <= n else r[:n - 3] + "..."


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
