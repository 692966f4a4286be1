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
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported, compute_dtype
from tracetorch.compiler.backend.codegen.op_tables import TableOpsHandler

TL_TYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.int16: "tl.int16", torch.int32: "tl.int32", torch.int64: "tl.int64", torch.bool: "tl.int1",
}
#: libdevice functions with no stand-in under the interpreter (runtime/triton_interp_libdevice.py
#: has one for every function this module emits; a kernel using a missing one is unsupported)
INTERP_MISSING: set[str] = set()

# float math: op -> template; {x} the operand. tl.* where Triton has it, libdevice otherwise.
_UNARY_FLOAT = {
    "exp": "tl.exp({x})", "exp2": "tl.exp2({x})", "log": "tl.log({x})", "log2": "tl.log2({x})",
    # tl.sqrt_rn is fp32-only; fp64 tl.sqrt is IEEE
    "sqrt": lambda x: f"tl.sqrt({x})" if x.dtype == torch.float64 else f"tl.sqrt_rn({x})",
    "rsqrt": "tl.rsqrt({x})", "sin": "tl.sin({x})", "cos": "tl.cos({x})",
    "erf": "tl.erf({x})", "floor": "tl.floor({x})", "ceil": "tl.ceil({x})",
    "sigmoid": "tl.sigmoid({x})", "reciprocal": "(1.0 / {x})",
    "tanh": "libdevice.tanh({x})", "expm1": "libdevice.expm1({x})", "log1p": "libdevice.log1p({x})",
    "log10": "libdevice.log10({x})", "tan": "libdevice.tan({x})", "asin": "libdevice.asin({x})",
    "acos": "libdevice.acos({x})", "atan": "libdevice.atan({x})", "sinh": "libdevice.sinh({x})",
    "cosh": "libdevice.cosh({x})", "asinh": "libdevice.asinh({x})", "acosh": "libdevice.acosh({x})",
    "atanh": "libdevice.atanh({x})", "erfc": "libdevice.erfc({x})", "erfinv": "libdevice.erfinv({x})",
    "lgamma": "libdevice.lgamma({x})", "trunc": "libdevice.trunc({x})",
    "round": "libdevice.nearbyint({x})",
    "relu": "tl.where({x} < 0, 0.0, {x})", "isinf": '(tl.abs({x}) == float("inf"))',
    "signbit": "(libdevice.signbit({x}) != 0)",
}
_UNARY_INT = {"relu": "tl.maximum({x}, 0)", "isinf": "({x} != {x})", "signbit": "({x} < 0)"}
_UNARY_ANY = {
    "neg": "(-{x})", "abs": "tl.abs({x})", "square": "({x} * {x})",
    # NaN compares false both ways, so sign(NaN) is 0, as ATen computes it on CPU
    "sign": "(({x} > 0).to({t}) - ({x} < 0).to({t}))",
    "logical_not": "({x} == 0)", "bitwise_not": "(~{x})", "isnan": "({x} != {x})",
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
    # integers: C semantics (truncation), as the C++ code generator's `/` (Triton's `//` on
    # integers truncates too)
    "truediv": "({a} // {b})",
    "fmod": "({a} % {b})", "bitwise_and": "({a} & {b})", "bitwise_or": "({a} | {b})",
    "bitwise_xor": "({a} ^ {b})", "left_shift": "({a} << {b})", "right_shift": "({a} >> {b})",
}
_LOGICAL = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}


def tl_type(dtype: torch.dtype) -> str:
    if dtype not in TL_TYPES:
        raise CodegenUnsupported(f"dtype {dtype} has no Triton mapping")
    return TL_TYPES[dtype]


#: float -> narrow integer casts as ATen converts: uint8 through int64 (c10's
#: static_cast_with_inter_type, on CPU and CUDA: -1.0 is 255, where a direct cast saturates to 0
#: on a GPU); under the interpreter (CPU tensors) int8/int16 also through int32 as x86 code does
#: (a direct numpy cast of 1.3e16 to uint8 gave 0 where eager gives its low byte, 126: fuzz 421129)
_FLOAT_TO_INT_VIA_GPU = {torch.uint8: torch.int64}
_FLOAT_TO_INT_VIA = {torch.uint8: torch.int64, torch.int8: torch.int32, torch.int16: torch.int32}


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


class TritonOpsHandler(TableOpsHandler):
    """Triton for the ops: the tables above through the shared dispatcher (op_tables.py), and
    the ops that are more than one expression, through the kernel builder (which owns
    temporaries, CSE, masks)."""

    UNARY_FLOAT, UNARY_INT, UNARY = _UNARY_FLOAT, _UNARY_INT, _UNARY_ANY
    BINARY_FLOAT, BINARY_INT, BINARY = _BINARY_FLOAT, _BINARY_INT, _BINARY_ANY
    LOGICAL = _LOGICAL
    RELU_COMPILE_ERROR = "tl.injected_relu_compile_error({x}) +* 1"

    def value(self, expr: str, dtype: torch.dtype, *operands) -> TVar:
        return self.kernel.emit(expr, dtype, _dims(*operands))

    def type_name(self, dtype: torch.dtype) -> str:
        return tl_type(dtype)

    def check_float_op(self, name: str) -> None:
        if self.kernel.interpret and name in INTERP_MISSING:
            raise CodegenUnsupported(f"ops.{name} has no implementation in the Triton interpreter")

    def report_injected_error(self, x) -> None:
        # The kernel reports failure through a status word the launcher checks after the
        # launch (device asserts are off in the interpreter and would poison a CUDA context).
        d = _dims(x)
        self.kernel.status = True
        shape = self.kernel.shape(d | {"x"})
        mask = self.kernel.mask_for(d | {"x"})
        self.kernel.line(f"tl.store(tt_status + tl.zeros({shape}, tl.int32), "
                         f"tl.full({shape}, 1, tl.int32), ({x} == {x}) & {mask})"
                         f"  # injected relu runtime error")

    # constants, conversions ------------------------------------------------------------------
    def constant(self, value, dtype):
        cdt = compute_dtype(dtype)
        # rank matches the kernel's tiles ([1] or [1, 1]): Triton broadcasts equal ranks only
        return self.value(f"tl.full({self.kernel.shape(frozenset())}, {triton_constant(value, cdt)}, "
                          f"{tl_type(cdt)})", cdt)

    def index_expr(self, expr, dtype):
        if ir.has_float_symbols(expr):
            return self._float_scalar(expr, dtype)
        idx, dims = self.kernel.index(expr)
        cdt = compute_dtype(dtype)
        if not dims:
            idx = f"(tl.full({self.kernel.shape(frozenset())}, 0, tl.int64) + {idx})"
        return self.kernel.emit(f"({idx}).to({tl_type(cdt)})", cdt, dims)

    def _float_scalar(self, expr, dtype):
        """A runtime float scalar (an fp64 kernel argument; a Python float under the interpreter)
        as a value of dtype, converted as ops.constant converts a Python float."""
        if not isinstance(expr, sympy.Symbol):
            raise CodegenUnsupported(f"float scalar expression {expr} (only float symbols reach kernels)")
        shape = self.kernel.shape(frozenset())
        if dtype == torch.bool:
            return self.value(f"(tl.full({shape}, {expr.name}, tl.float64) != 0)", torch.bool)
        cdt = compute_dtype(dtype)
        v = f"tl.full({shape}, {expr.name}, tl.float64)"
        return self.value(v if cdt == torch.float64 else f"{v}.to({tl_type(cdt)})", cdt)

    def to_dtype(self, x, dtype):
        if dtype == torch.bool:
            return self.value(f"({x} != 0)", torch.bool, x)
        if dtype == torch.bfloat16 and self.kernel.interpret:
            # Triton's interpreter casts to bfloat16 wrong: integers and bools bit-wise (int64 8
            # became 0), float64 to 0, float32 truncated, subnormals flushed to 0. Rounded here
            # instead (to nearest even, from float32, as ATen's cast goes), kept as float32
            src = x if x.dtype == torch.float32 else f"{x}.to(tl.float32)"
            return self.value(f"th.round_to_bf16_bits({src})", torch.float32, x)
        if dtype in (torch.float16, torch.bfloat16):
            return self.value(f"{x}.to({tl_type(dtype)}).to(tl.float32)", torch.float32, x)
        if x.dtype == dtype:
            return x
        if x.dtype.is_floating_point and not dtype.is_floating_point:
            via = _FLOAT_TO_INT_VIA.get(dtype) if self.kernel.interpret else _FLOAT_TO_INT_VIA_GPU.get(dtype)
            if via is not None:
                return self.value(f"{x}.to({tl_type(via)}).to({tl_type(dtype)})", dtype, x)
        return self.value(f"{x}.to({tl_type(dtype)})", dtype, x)

    def where(self, cond, a, b):
        return self.value(f"tl.where({cond}, {a}, {b})", a.dtype, cond, a, b)

    def fma(self, a, b, c):
        # tl.fma, not libdevice's: the interpreter runs it as a true fma too (fma_fp32/fp64)
        return self.value(f"tl.fma({a}, {b}, {c})", a.dtype, a, b, c)

    def indirect_indexing(self, x, size, wrap_neg=True, check=False):
        size_s = self.kernel.render_plain(size)
        if wrap_neg:
            v = self.value(f"tl.where({x} < 0, {x} + {size_s}, {x})", x.dtype, x)
        else:
            v = x
        checks = self.kernel.bounds_checks
        if checks is not None or check:
            # a scatter kernel (triton_scatter.py) or a checked index (check=True): an index out
            # of range must neither read nor write out of bounds; it reads element 0 instead
            # and the kernel flags the error (collected by the scatter, else flagged here)
            inside = f"(({v} >= 0) & ({v} < {size_s}))"
            ok = self.value(inside, torch.bool, v)
            v = self.value(f"tl.where({ok}, {v}, 0)", v.dtype, v)
            if self.kernel.masks:   # inside ops.masked: lanes masked off hold no index to check
                ok = self.value(f"({ok} | ~({' & '.join(m.name for m in self.kernel.masks)}))", torch.bool,
                                ok, *self.kernel.masks)
            if checks is not None:
                checks.append(ok)
            else:
                self.kernel.flag_out_of_bounds(ok)
        return self.kernel.indirect_symbol(v)
