"""Guard kinds: what one guard is (`Guard`), and one entry per kind (`GUARD_KINDS`).

Each entry holds its place in the check (`order`), the fast check's code (`condition`, or `emit`
for kinds that read several sources), the failure explanation (`mismatch` / `explain`), the
Dynamo-style description (`describe`), and whether the static module structure implies it
(`implied`, asked by guards.GuardSet when module paths were resolved at build time). guards.py
turns a list of guards into one generated check function per cache entry; it looks the kinds up
here (`kind_of`) and never switches on a kind's name.

`expected` by kind (the contract with frontend-capture, docs/CONTRACTS.md section 6) is
documented on each kind's class.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import torch


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
    and `explain` instead. `gen` is the check being generated (guards._Codegen: `value(source)`,
    `const(obj)`, `check(condition, location)`)."""

    name = "?"
    # Place in the check. Global-state guards are cheapest and most often the cause of a miss:
    # they come first (0, 1); tensors and symbolic shapes last; unknown kinds after everything.
    order = 9
    # False where the source is ignored or the guard reads several sources itself: such a
    # guard names no access chain worth sharing and renders outside the per-source groups.
    reads_source = True

    def emit(self, gen, g: Guard) -> None:
        """Add `g`'s lines to the fast check being generated."""
        gen.check(self.condition(gen, g, gen.value(g.source)), g.user_location)

    def condition(self, gen, g: Guard, v: str) -> str:
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
        ok, v = statics.pinned_value(g.source)
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

    def emit(self, gen, g):
        v = gen.value(g.source)
        if gen.statics is not None and _REF_NAME.fullmatch(v):
            gen.lengths.append((v, int(g.expected)))    # checked with the others at once
            return
        gen.check(self.condition(gen, g, v), g.user_location)

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
class HasAttr(GuardKind):
    """`expected`: (attribute name, whether the object has it)."""

    name, order = "HASATTR", 5

    def condition(self, gen, g, v):
        attr, present = g.expected
        return f"{'' if present else 'not '}hasattr({v}, {attr!r})"

    def mismatch(self, g, name, value):
        attr, present = g.expected
        if hasattr(value, attr) == bool(present):
            return None
        return (f"hasattr({name}, {attr!r}) changed: expected {bool(present)}, "
                f"actual {not present}")

    def describe(self, g):
        attr, present = g.expected
        return f"HASATTR: {'' if present else 'not '}hasattr({g.source}, {attr!r})"

    def implied(self, g, statics):
        ok, v = statics.pinned_value(g.source)
        return ok and statics.attribute_fixed(v, g.expected[0], bool(g.expected[1]), g.source)


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

    @staticmethod
    def flag_source(g) -> str:
        """The source of the flag itself: `<module>.training`."""
        return g.source if g.source.endswith(".training") else g.source + ".training"

    def describe(self, g):
        return f"NN_MODULE_TRAINING: {self.flag_source(g)} is {bool(g.expected)}"

    def implied(self, g, statics):
        ok, v = statics.static_value(self.flag_source(g))
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


_REF_NAME = re.compile(r"___r\d+")


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


def evaluate_source(source: str, env: dict, globals_: dict):
    return eval(source, {"L": env, "G": globals_, "math": math, "___from_numpy": torch.from_numpy}, {})


_DTYPE_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
                torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int",
                torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
                torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}


def _dtype_name(d):
    return _DTYPE_NAMES.get(d, str(d).replace("torch.", ""))


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
