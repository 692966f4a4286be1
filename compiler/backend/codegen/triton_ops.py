"""The op vocabulary (ir.OPS_VOCABULARY) as Triton: each op becomes one `tmpN = ...` line.

Values are TVar(name, dtype, dims): `dtype` is the compute dtype (float16/bfloat16 are computed
in float32 and rounded only where the graph converts or stores, as Inductor does), `dims` says
which tile axes the value varies along: "x" (outer/parallel), "r" (reduction). Dims decide the
masks of loads and stores (a value that does not vary along r needs no rmask) and where a value
must be broadcast before it is reduced.

Math goes to triton.language where it has the function with torch's accuracy, otherwise to
libdevice (CUDA); kernels for the interpreter import a stand-in libdevice module
(runtime/triton_interp_libdevice.py) that lacks a few functions, listed in INTERP_MISSING.
"""
from __future__ import annotations

import dataclasses
import math

import sympy

import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported

TL_TYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.int16: "tl.int16", torch.int32: "tl.int32", torch.int64: "tl.int64", torch.bool: "tl.int1",
}
INTERP_MISSING = {"asin", "acos", "atan", "atan2", "lgamma", "erfinv"}

# float math: op -> template; {x} the operand. tl.* where Triton has it, libdevice otherwise.
_UNARY_FLOAT = {
    "exp": "tl.exp({x})", "exp2": "tl.exp2({x})", "log": "tl.log({x})", "log2": "tl.log2({x})",
    "sqrt": "tl.sqrt_rn({x})", "rsqrt": "tl.rsqrt({x})", "sin": "tl.sin({x})", "cos": "tl.cos({x})",
    "erf": "tl.erf({x})", "floor": "tl.floor({x})", "ceil": "tl.ceil({x})",
    "sigmoid": "tl.sigmoid({x})", "reciprocal": "(1.0 / {x})",
    "tanh": "libdevice.tanh({x})", "expm1": "libdevice.expm1({x})", "log1p": "libdevice.log1p({x})",
    "log10": "libdevice.log10({x})", "tan": "libdevice.tan({x})", "asin": "libdevice.asin({x})",
    "acos": "libdevice.acos({x})", "atan": "libdevice.atan({x})", "sinh": "libdevice.sinh({x})",
    "cosh": "libdevice.cosh({x})", "asinh": "libdevice.asinh({x})", "acosh": "libdevice.acosh({x})",
    "atanh": "libdevice.atanh({x})", "erfc": "libdevice.erfc({x})", "erfinv": "libdevice.erfinv({x})",
    "lgamma": "libdevice.lgamma({x})", "trunc": "libdevice.trunc({x})",
    "round": "libdevice.nearbyint({x})",
}
_BINARY_FLOAT = {
    "pow": "libdevice.pow({a}, {b})", "atan2": "libdevice.atan2({a}, {b})",
    "copysign": "libdevice.copysign({a}, {b})", "hypot": "libdevice.hypot({a}, {b})",
    "fmod": "libdevice.fmod({a}, {b})", "remainder": "th.float_remainder({a}, {b}, libdevice.fmod({a}, {b}))",
    "floordiv": "th.float_floordiv({a}, {b}, libdevice.fmod({a}, {b}))", "truediv": "({a} / {b})",
}
_BINARY_ANY = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})",
    "maximum": "th.maximum({a}, {b})", "minimum": "th.minimum({a}, {b})",
}
_BINARY_INT = {
    "floordiv": "th.int_floordiv({a}, {b})", "remainder": "th.int_remainder({a}, {b})",
    "pow": "th.int_pow({a}, {b})",
    "fmod": "({a} % {b})", "bitwise_and": "({a} & {b})", "bitwise_or": "({a} | {b})",
    "bitwise_xor": "({a} ^ {b})", "left_shift": "({a} << {b})", "right_shift": "({a} >> {b})",
}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LOGICAL = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def tl_type(dtype: torch.dtype) -> str:
    if dtype not in TL_TYPES:
        raise CodegenUnsupported(f"dtype {dtype} has no Triton mapping")
    return TL_TYPES[dtype]


@dataclasses.dataclass(frozen=True)
class TVar:
    name: str
    dtype: torch.dtype
    dims: frozenset = frozenset()

    def __str__(self):
        return self.name


def _dims(*vals) -> frozenset:
    out = frozenset()
    for v in vals:
        if isinstance(v, TVar):
            out |= v.dims
    return out


def triton_constant(value, dtype) -> str:
    if dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        v = float(value)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("-inf")' if v < 0 else 'float("inf")'
        return repr(v)
    # integers wrap into the dtype as a C cast (and torch) does: clamp(uint8, min=-2) uses 254
    bits = torch.iinfo(dtype).bits
    v = int(value) & ((1 << bits) - 1)
    if torch.iinfo(dtype).min < 0 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return str(v)


class TritonOpsHandler(ir.OpsHandler):
    """Emits Triton for ops through the kernel builder (which owns temporaries, CSE, masks)."""

    def __init__(self, kernel):
        self.kernel = kernel

    def _emit(self, expr, dtype, dims) -> TVar:
        return self.kernel.emit(expr, dtype, dims)

    # memory, constants, conversions ------------------------------------------------------
    def load(self, name, index):
        return self.kernel.load(name, index)

    def store(self, name, index, value):
        self.kernel.store(name, index, value)

    def constant(self, value, dtype):
        cdt = compute_dtype(dtype)
        # rank matches the kernel's tiles ([1] or [1, 1]): Triton broadcasts equal ranks only
        return self._emit(f"tl.full({self.kernel.shape(frozenset())}, {triton_constant(value, cdt)}, "
                          f"{tl_type(cdt)})", cdt, frozenset())

    def index_expr(self, expr, dtype):
        if ir.has_float_symbols(expr):
            return self._float_scalar(expr, dtype)
        idx, dims = self.kernel.index(expr)
        cdt = compute_dtype(dtype)
        if not dims:
            idx = f"(tl.full({self.kernel.shape(frozenset())}, 0, tl.int64) + {idx})"
        return self._emit(f"({idx}).to({tl_type(cdt)})", cdt, dims)

    def _float_scalar(self, expr, dtype):
        """A runtime float scalar (an fp64 kernel argument; a Python float under the interpreter)
        as a value of dtype, converted as ops.constant converts a Python float."""
        if not isinstance(expr, sympy.Symbol):
            raise CodegenUnsupported(f"float scalar expression {expr} (only float symbols reach kernels)")
        shape = self.kernel.shape(frozenset())
        if dtype == torch.bool:
            return self._emit(f"(tl.full({shape}, {expr.name}, tl.float64) != 0)", torch.bool, frozenset())
        cdt = compute_dtype(dtype)
        v = f"tl.full({shape}, {expr.name}, tl.float64)"
        return self._emit(v if cdt == torch.float64 else f"{v}.to({tl_type(cdt)})", cdt, frozenset())

    def to_dtype(self, x, dtype):
        if dtype == torch.bool:
            return self._emit(f"({x} != 0)", torch.bool, _dims(x))
        if dtype in (torch.float16, torch.bfloat16):
            src = x
            if dtype == torch.bfloat16 and self.kernel.interpret and not x.dtype.is_floating_point:
                # Triton's interpreter casts integers and bools to bfloat16 bit-wise wrong (int64 8
                # became 0); through float32 it is right (exact for |v| < 2**24, as small counts are)
                src = f"{x}.to(tl.float32)"
            elif dtype == torch.bfloat16 and self.kernel.interpret:
                # ... and floats: float64 became 0, float32 was truncated (torch rounds to nearest
                # even, from float64 through float32 as ATen's cast does)
                src = f"th.round_to_bf16_bits({x})"
            return self._emit(f"{src}.to({tl_type(dtype)}).to(tl.float32)", torch.float32, _dims(x))
        if x.dtype == dtype:
            return x
        return self._emit(f"{x}.to({tl_type(dtype)})", dtype, _dims(x))

    def where(self, c, a, b):
        return self._emit(f"tl.where({c}, {a}, {b})", a.dtype, _dims(c, a, b))

    def masked(self, mask, body, other):
        return self.kernel.masked(mask, body, other)

    def indirect_indexing(self, x, size, wrap_neg=True):
        size_s = self.kernel.render_plain(size)
        if wrap_neg:
            v = self._emit(f"tl.where({x} < 0, {x} + {size_s}, {x})", x.dtype, _dims(x))
        else:
            v = x
        checks = self.kernel.bounds_checks
        if checks is not None:
            # a scatter kernel (triton_scatter.py): an index out of range must neither read nor
            # write out of bounds; it reads element 0 instead and the kernel flags the error
            inside = f"(({v} >= 0) & ({v} < {size_s}))"
            ok = self._emit(inside, torch.bool, _dims(v))
            v = self._emit(f"tl.where({ok}, {v}, 0)", v.dtype, _dims(v))
            if self.kernel.masks:   # inside ops.masked: lanes masked off hold no index to check
                ok = self._emit(f"({ok} | ~({' & '.join(m.name for m in self.kernel.masks)}))", torch.bool,
                                _dims(ok, *self.kernel.masks))
            checks.append(ok)
        return self.kernel.indirect_symbol(v)

    # math ----------------------------------------------------------------------------------
    def __getattr__(self, name):
        if name == "relu":
            return self._relu
        if name in _UNARY_FLOAT or name in ("neg", "abs", "sign", "square", "logical_not",
                                            "bitwise_not", "isnan", "isinf", "signbit"):
            return lambda x: self._unary(name, x)
        if name in _BINARY_FLOAT or name in _BINARY_ANY or name in _BINARY_INT:
            return lambda a, b: self._binary(name, a, b)
        if name in _COMPARE:
            return lambda a, b: self._emit(f"({a} {_COMPARE[name]} {b})", torch.bool, _dims(a, b))
        if name in _LOGICAL:
            return lambda a, b: self._emit(f"(({a} != 0) {_LOGICAL[name]} ({b} != 0))", torch.bool,
                                           _dims(a, b))
        return super().__getattr__(name)

    def _check_interp(self, name):
        if self.kernel.interpret and name in INTERP_MISSING:
            raise CodegenUnsupported(f"ops.{name} has no implementation in the Triton interpreter")

    def _unary(self, name, x):
        d, fl = _dims(x), x.dtype.is_floating_point
        if name == "neg":
            return self._emit(f"(-{x})", x.dtype, d)
        if name == "abs":
            return x if x.dtype == torch.bool else self._emit(f"tl.abs({x})", x.dtype, d)
        if name == "square":
            return self._emit(f"({x} * {x})", x.dtype, d)
        if name == "sign":
            # NaN compares false both ways, so sign(NaN) is 0, as ATen computes it on CPU
            s = f"(({x} > 0).to({tl_type(x.dtype)}) - ({x} < 0).to({tl_type(x.dtype)}))"
            return self._emit(s, x.dtype, d)
        if name == "logical_not":
            return self._emit(f"({x} == 0)", torch.bool, d)
        if name == "bitwise_not":
            return self._emit(f"({x} == 0)" if x.dtype == torch.bool else f"(~{x})", x.dtype, d)
        if name == "isnan":
            return self._emit(f"({x} != {x})", torch.bool, d)
        if name == "isinf":
            expr = f"(tl.abs({x}) == float(\"inf\"))" if fl else f"({x} != {x})"
            return self._emit(expr, torch.bool, d)
        if name == "signbit":
            return self._emit(f"(libdevice.signbit({x}) != 0)" if fl else f"({x} < 0)", torch.bool, d)
        if not fl:
            if name in ("floor", "ceil", "trunc", "round"):
                return x
            raise CodegenUnsupported(f"ops.{name} on {x.dtype}")
        self._check_interp(name)
        if name == "sqrt" and x.dtype == torch.float64:   # tl.sqrt_rn is fp32-only; fp64 tl.sqrt is IEEE
            return self._emit(f"tl.sqrt({x})", x.dtype, d)
        return self._emit(_UNARY_FLOAT[name].format(x=x), x.dtype, d)

    def _binary(self, name, a, b):
        d = _dims(a, b)
        fl = a.dtype.is_floating_point
        if name in _BINARY_ANY:
            return self._emit(_BINARY_ANY[name].format(a=a, b=b), a.dtype, d)
        if fl and name in _BINARY_FLOAT:
            self._check_interp(name)
            return self._emit(_BINARY_FLOAT[name].format(a=a, b=b), a.dtype, d)
        if not fl and name in _BINARY_INT:
            return self._emit(_BINARY_INT[name].format(a=a, b=b), a.dtype, d)
        if not fl and name == "truediv":
            # integers: C semantics (truncation), as the C++ code generator's `/` (Triton's `//`
            # on integers truncates too)
            return self._emit(f"({a} // {b})", a.dtype, d)
        raise CodegenUnsupported(f"ops.{name} on {a.dtype}")

    def _relu(self, x):
        from tracetorch.compiler import config
        bug = getattr(config.testing, "inject_relu_bug", None)
        d = _dims(x)
        if bug == "compile_error":
            return self._emit(f"tl.injected_relu_compile_error({x}) +* 1", x.dtype, d)
        if bug == "runtime_error":
            # The kernel reports failure through a status word the launcher checks after the
            # launch (device asserts are off in the interpreter and would poison a CUDA context).
            self.kernel.status = True
            shape = self.kernel.shape(d | {"x"})
            mask = self.kernel.mask_for(d | {"x"})
            self.kernel.line(f"tl.store(tt_status + tl.zeros({shape}, tl.int32), "
                             f"tl.full({shape}, 1, tl.int32), ({x} == {x}) & {mask})"
                             f"  # injected relu runtime error")
        if bug == "accuracy":
            return self._emit(f"({x} + 1)", x.dtype, d)
        zero = "0.0" if x.dtype.is_floating_point else "0"
        return self._emit(f"th.maximum({x}, {zero})" if x.dtype.is_floating_point
                          else f"tl.maximum({x}, {zero})", x.dtype, d)
