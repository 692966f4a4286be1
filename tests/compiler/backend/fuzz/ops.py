"""The fuzzer's op mix: a table of templates, each `fn(rng, pick) -> code or None`.

`pick(pred)` returns the name of a live variable whose current (eager) value satisfies `pred`,
or None. A template returns one Python line: `{out} = <expression>` (the generator fills in the
new variable's name) or an in-place statement on existing variables. Templates need not be
type-correct for every pick: the generator runs each candidate eagerly and drops the ones eager
rejects. Weights say how often each family is drawn.
"""

from __future__ import annotations

import torch

FLOAT = lambda t: t.dtype.is_floating_point  # noqa: E731
INT = lambda t: not t.dtype.is_floating_point and t.dtype != torch.bool  # noqa: E731
BOOL = lambda t: t.dtype == torch.bool  # noqa: E731
ANY = lambda t: True  # noqa: E731
NOT_BOOL = lambda t: t.dtype != torch.bool  # noqa: E731


def rank(k):
    return lambda t: t.dim() >= k


def both(*preds):
    return lambda t: all(p(t) for p in preds)


SCALARS = [2, 3, -1, 0.5, 0.1, 2.5, -3.0, 1e-3, 7, 0, float("inf"), 1e20]
UNARY_FLOAT = ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "erf", "expm1", "log1p", "rsqrt",
               "reciprocal", "floor", "ceil", "round", "trunc", "frac", "exp2", "log2", "sinh", "cosh",
               "atanh", "asinh", "erfc", "lgamma", "atan", "asin"]
UNARY_ANY = ["neg", "abs", "sign", "sgn", "square", "relu"]
ACTIVATIONS = ["F.gelu", "F.silu", "F.softplus", "F.elu", "F.hardtanh", "F.leaky_relu", "F.mish",
               "F.hardswish", "F.logsigmoid"]
BINARY_OPS = ["+", "-", "*", "/", "//", "%"]
BINARY_FNS = ["torch.maximum", "torch.minimum", "torch.fmod", "torch.remainder", "torch.pow",
              "torch.hypot", "torch.atan2", "torch.copysign", "torch.fmax", "torch.fmin"]
COMPARE = ["<", "<=", ">", ">=", "==", "!="]
BITWISE = ["&", "|", "^"]
DTYPE_NAMES = {torch.float32: "torch.float32", torch.float64: "torch.float64", torch.float16: "torch.float16",
               torch.bfloat16: "torch.bfloat16", torch.int64: "torch.int64", torch.int32: "torch.int32",
               torch.uint8: "torch.uint8", torch.bool: "torch.bool", torch.int16: "torch.int16",
               torch.int8: "torch.int8"}
REDUCTIONS = ["sum", "mean", "amax", "amin", "prod", "any", "all", "std", "var", "argmax", "argmin",
              "logsumexp", "nansum", "norm"]


def _dim(rng, t):
    return rng.randrange(-t.dim(), t.dim()) if t.dim() else 0


def unary_float(rng, pick):
    a = pick(FLOAT)
    return a and f"{{out}} = torch.{rng.choice(UNARY_FLOAT)}({a})"


def unary_any(rng, pick):
    a = pick(ANY)
    return a and f"{{out}} = torch.{rng.choice(UNARY_ANY)}({a})"


def activation(rng, pick):
    a = pick(FLOAT)
    return a and f"{{out}} = {rng.choice(ACTIVATIONS)}({a})"


def binary(rng, pick):
    a, b = pick(ANY), pick(ANY)
    return a and b and f"{{out}} = {a} {rng.choice(BINARY_OPS)} {b}"


def binary_fn(rng, pick):
    a, b = pick(ANY), pick(ANY)
    fn = rng.choice(BINARY_FNS)
    if fn == "torch.copysign" and b:
        b = f"torch.nan_to_num({b})"      # (a NaN's sign bit is unspecified)
    return a and b and f"{{out}} = {fn}({a}, {b})"


def scalar_binary(rng, pick):
    a = pick(ANY)
    c = rng.choice(SCALARS)
    op = rng.choice(BINARY_OPS + ["**"])
    if rng.random() < 0.3:
        return a and f"{{out}} = {c!r} {op} {a}"
    return a and f"{{out}} = {a} {op} {c!r}"


def add_alpha(rng, pick):
    a, b = pick(ANY), pick(ANY)
    return a and b and (f"{{out}} = torch.{rng.choice(['add', 'sub'])}({a}, {b}, "
                        f"alpha={rng.choice([2, -1, 0.5, True])!r})")


def div_mode(rng, pick):
    a, b = pick(ANY), pick(ANY)
    return a and b and f"{{out}} = torch.div({a}, {b}, rounding_mode={rng.choice(['floor', 'trunc'])!r})"


def compare(rng, pick):
    a, b = pick(ANY), pick(ANY)
    return a and b and f"{{out}} = {a} {rng.choice(COMPARE)} {b}"


def logical(rng, pick):
    a, b = pick(ANY), pick(ANY)
    fn = rng.choice(["logical_and", "logical_or", "logical_xor"])
    if rng.random() < 0.3:
        return a and f"{{out}} = torch.logical_not({a})"
    return a and b and f"{{out}} = torch.{fn}({a}, {b})"


def bitwise(rng, pick):
    a, b = pick(lambda t: not FLOAT(t)), pick(lambda t: not FLOAT(t))
    if rng.random() < 0.25:
        return a and f"{{out}} = ~{a}"
    return a and b and f"{{out}} = {a} {rng.choice(BITWISE)} {b}"


def predicate(rng, pick):
    a = pick(ANY)
    if rng.random() < 0.25:   # the sign of a NaN is not specified by IEEE (nor the same across kernels)
        return a and f"{{out}} = torch.signbit(torch.nan_to_num({a}))"
    return a and f"{{out}} = torch.{rng.choice(['isnan', 'isinf', 'isfinite'])}({a})"


def where(rng, pick):
    c, a, b = pick(BOOL), pick(ANY), pick(ANY)
    if c is None:
        c = pick(ANY)
        c = c and f"{c} > 0"
    if rng.random() < 0.3:
        return c and a and f"{{out}} = torch.where({c}, {a}, {rng.choice(SCALARS)!r})"
    return c and a and b and f"{{out}} = torch.where({c}, {a}, {b})"


def cast(rng, pick):
    a = pick(ANY)
    dt = rng.choice(list(DTYPE_NAMES.values()))
    form = rng.random()
    if form < 0.15:
        b = pick(ANY)
        return a and b and f"{{out}} = {a}.type_as({b})"
    if form < 0.25:
        return a and f"{{out}} = {a}.{rng.choice(['float', 'double', 'half', 'int', 'long', 'bool'])}()"
    return a and f"{{out}} = {a}.to({dt})"


def clamp(rng, pick):
    a = pick(NOT_BOOL)
    lo, hi = sorted(rng.sample([-2, -0.5, 0, 1, 3, 0.25], 2))
    form = rng.random()
    if form < 0.3:
        return a and f"{{out}} = torch.clamp({a}, min={lo!r})"
    if form < 0.5:
        return a and f"{{out}} = torch.nan_to_num({a})"
    return a and f"{{out}} = torch.clamp({a}, {lo!r}, {hi!r})"


def reduction(rng, pick):
    a = pick(ANY)
    if a is None:
        return None
    red = rng.choice(REDUCTIONS)
    form = rng.random()
    if form < 0.3:
        return f"{{out}} = {a}.{red}()" if red != "logsumexp" else f"{{out}} = {a}.logsumexp(0)"
    keep = rng.random() < 0.3
    return f"{{out}} = {a}.{red}({{dim}}, keepdim={keep})"


def scan_softmax(rng, pick):
    a = pick(rank(1))
    fn = rng.choice(["torch.softmax", "torch.log_softmax", "torch.cumsum", "torch.cumprod"])
    return a and f"{{out}} = {fn}({a}, {{dim}})"


def max_dim(rng, pick):
    a = pick(rank(1))
    return a and f"{{out}} = {a}.{rng.choice(['max', 'min'])}({{dim}})[{rng.choice([0, 1])}]"


def view(rng, pick):
    a = pick(ANY)
    if a is None:
        return None
    forms = ["{a}.t()", "{a}.transpose(0, -1)", "{a}[::2]", "{a}[1:]", "{a}.flip({dim})", "{a}.unsqueeze(0)",
             "{a}.squeeze()", "{a}.reshape(-1)", "{a}.view(-1)", "{a}.expand(2, *{a}.shape)", "{a}.narrow({dim}, 0, 1)",
             "{a}.select({dim}, 0)", "{a}.diagonal()", "{a}.permute(*reversed(range({a}.dim())))", "{a}.contiguous()",
             "{a}[..., None]", "{a}.unflatten(0, (1, -1))", "{a}.flatten()", "{a}.T", "{a}[-1:]", "{a}[:, ::3]",
             "{a}.movedim(0, -1)", "{a}.clone(memory_format=torch.channels_last)", "{a}.split(2)[-1]",
             "{a}.unbind(0)[0]", "{a}.roll(1, 0)", "{a}.repeat(2, *[1] * ({a}.dim() - 1))"]
    return f"{{out}} = {rng.choice(forms).replace('{a}', a)}"


def combine(rng, pick):
    a, b = pick(ANY), pick(ANY)
    if a is None or b is None:
        return None
    form = rng.random()
    if form < 0.4:
        return f"{{out}} = torch.cat([{a}, {b}], {{dim}})"
    if form < 0.6:
        return f"{{out}} = torch.stack([{a}, {b}], {{dim}})"
    if form < 0.8:
        return f"{{out}} = torch.cat([{a}, {a} * 2], 0)"
    return f"{{out}} = torch.cat([{a}.flatten(), {b}.flatten()]).view(-1, 1)[1:].flip(0)"


def matmul(rng, pick):
    a, b = pick(both(FLOAT, rank(2))), pick(both(FLOAT, rank(2)))
    if a is None or b is None:
        return None
    # finite operands: BLAS propagates NaN/inf differently per memory layout (eager against eager
    # with other strides differs too), and matmuls are ATen extern kernels, not generated code
    a, b = f"torch.nan_to_num({a}, 0.0, 1e3, -1e3)", f"torch.nan_to_num({b}, 0.0, 1e3, -1e3)"
    if rng.random() < 0.5:
        return f"{{out}} = {a} @ {b}.transpose(-1, -2)"
    return f"{{out}} = torch.mm({a}.reshape({a}.shape[0], -1), {b}.reshape(-1, {b}.shape[-1]))"


def new_value(rng, pick):
    a = pick(ANY)
    if a is None:
        return None
    forms = ["torch.ones_like({a})", "torch.zeros_like({a}) + 1", "torch.full_like({a}, 3)",
             "torch.arange({a}.numel()).view({a}.shape)",
             "torch.arange({a}.shape[0] if {a}.dim() else 1, dtype=torch.float32)",
             "torch.linspace(0, 1, {a}.numel() + 1)", "{a}.new_zeros({a}.shape[::-1])",
             "torch.tensor(2.5) * {a}", "torch.empty_like({a}).fill_(1.5)", "torch.zeros(3, 1) + {a}.sum()"]
    return f"{{out}} = {rng.choice(forms).replace('{a}', a)}"


def empty_strided_fill(rng, pick):
    a = pick(rank(2))
    if a is None:
        return None
    # column-major strides (the reversed contiguous layout: no two elements share memory)
    return (f"{{out}} = torch.empty_strided({a}.shape, torch.empty({a}.shape[::-1]).permute("
            f"*reversed(range({a}.dim()))).stride(), dtype={a}.dtype); {{out}}[:] = {a}")


def inplace(rng, pick):
    a, b = pick(ANY), pick(ANY)
    if a is None:
        return None
    c = rng.choice(SCALARS[:8])
    forms = [f"{a}.add_({b})", f"{a}.mul_({c!r})", f"{a}.sub_({b}, alpha=2)", f"{a}.zero_()", f"{a}.fill_({c!r})",
             f"{a}.clamp_(-1, 1)", f"{a}.relu_()", f"{a}.neg_()", f"{a}.div_(2)", f"{a}.copy_({b})",
             f"{a}[0] = {c!r}", f"{a}[::2] = {b}[::2]", f"{a}.masked_fill_({a} > 0, {c!r})", f"{a}.abs_()",
             f"{a} += {b}", f"{a} *= {b}", f"{a}.squeeze_()", f"{a}.unsqueeze_(0)", f"{a}.t_()",
             f"{a}.bitwise_and_({b})", f"{a}.floor_divide_({b})", f"{a}.pow_(2)", f"{a}.sqrt_()",
             f"{a}.exp_()", f"{a}.lerp_({b}, 0.5)", f"{a}.addcmul_({b}, {b}, value=0.5)",
             f"{a}.index_fill_(0, torch.tensor([0]), {c!r})", f"{a}.clamp_min_(0)"]
    code = rng.choice(forms)
    if "None" in code:
        return None
    if rng.random() < 0.3 and "=" not in code.replace("==", ""):
        return f"{{out}} = {code}"      # keep the in-place op's result (an alias of a)
    return code


#: (template, weight)
TEMPLATES = [
    (unary_float, 8), (unary_any, 5), (activation, 3), (binary, 10), (binary_fn, 5), (scalar_binary, 8),
    (add_alpha, 2), (div_mode, 2), (compare, 4), (logical, 2), (bitwise, 3), (predicate, 2), (where, 4),
    (cast, 6), (clamp, 3), (reduction, 8), (scan_softmax, 3), (max_dim, 2), (view, 10), (combine, 4),
    (matmul, 2), (new_value, 2), (empty_strided_fill, 1), (inplace, 10),
]
