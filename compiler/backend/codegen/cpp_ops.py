"""The op vocabulary (ir.OPS_VOCABULARY) as C++: each op becomes one `auto tmpN = ...;` line.

Values are CppVar(name, dtype) where dtype is the *compute* dtype: float16/bfloat16 values are
computed in float and rounded only where the graph converts (to_dtype) or stores.
"""

from __future__ import annotations

import dataclasses
import math

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported, IndexPrinter, compute_dtype
from tracetorch.compiler.backend.codegen.op_tables import TableOpsHandler

CPP_TYPES = {
    torch.float32: "float", torch.float64: "double", torch.float16: "float", torch.bfloat16: "float",
    torch.int8: "int8_t", torch.uint8: "uint8_t", torch.int16: "int16_t", torch.int32: "int32_t",
    torch.int64: "int64_t", torch.bool: "bool",
}
# how each dtype is stored in memory (pointer element type)
CPP_STORAGE = {**CPP_TYPES, torch.float16: "uint16_t", torch.bfloat16: "uint16_t"}

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <vector>
// ---- tracetorch C++ prelude: dtype conversions and ops with torch semantics ----
static inline float tt_bf16_to_float(uint16_t h) {
  uint32_t u = ((uint32_t)h) << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline uint16_t tt_float_to_bf16(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return (uint16_t)(u >> 16);
}
static inline float tt_half_to_float(uint16_t h) { _Float16 v; std::memcpy(&v, &h, 2); return (float)v; }
static inline uint16_t tt_float_to_half(float f) {
  _Float16 v = (_Float16)f; uint16_t h; std::memcpy(&h, &v, 2); return h;
}
static inline float tt_round_bf16(float f) { return tt_bf16_to_float(tt_float_to_bf16(f)); }
static inline float tt_round_half(float f) { return tt_half_to_float(tt_float_to_half(f)); }
// An int -> float conversion goes through TT_OPAQUE: with -fno-trapping-math GCC folds
// (float)(int)x into trunc(x), which keeps -0.0 for x in (-1, 0) where torch's cast gives +0.0.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define TT_OPAQUE(x) __builtin_assoc_barrier(x)
#else
#define TT_OPAQUE(x) (x)
#endif
// float -> integer as ATen's conversion behaves on x86 (where C++ leaves it undefined): NaN and
// out-of-range values give the most negative int32/int64 ("integer indefinite"); uint8 converts
// through int64 (c10's static_cast_with_inter_type does so explicitly), int8/int16 through int32,
// keeping the low bits. GCC otherwise folded inf -> int64 to 0 in loops.
template <typename I, typename F> static inline I tt_ftoi(F x) {
  if constexpr (std::is_same<I, uint8_t>::value) { return static_cast<I>(tt_ftoi<int64_t, F>(x)); }
  else if constexpr (sizeof(I) < 4) { return static_cast<I>(tt_ftoi<int32_t, F>(x)); }
  else {
    using S = typename std::conditional<sizeof(I) == 4, int32_t, int64_t>::type;
    const F lo = static_cast<F>(std::numeric_limits<S>::min());
    if (!(x >= lo && x < -lo)) return static_cast<I>(std::numeric_limits<S>::min());
    return static_cast<I>(static_cast<S>(x));
  }
}
static int tt_div_error = 0;  // set by an integer division by zero (torch raises; C++ would trap)
template <typename T> static inline T tt_den(T b) {
  if constexpr (!std::is_floating_point<T>::value) {
    if (b == 0) { __atomic_store_n(&tt_div_error, 1, __ATOMIC_RELAXED); return 1; }
  }
  return b;
}
template <typename T, typename U> static inline T tt_div(T a, U b_) { return a / tt_den(static_cast<T>(b_)); }
template <typename T, typename U> static inline T tt_max(T a, U b_) {
  T b = static_cast<T>(b_); return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}
template <typename T, typename U> static inline T tt_min(T a, U b_) {
  T b = static_cast<T>(b_); return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
}
template <typename T, typename U> static inline T tt_floordiv(T a, U b_) { T b = tt_den(static_cast<T>(b_));
  if constexpr (std::is_floating_point<T>::value) {
    // torch's rule, from the exact fmod: floor(a / b) rounds a / b first (1.0 // 0.1 would be 10)
    if (b == 0) return a / b;
    T m = std::fmod(a, b), d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return std::copysign(T(0), a / b);
    T f = std::floor(d);
    return (d - f > T(0.5)) ? f + 1 : f;
  } else { T q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1; return q; }
}
template <typename T, typename U> static inline T tt_remainder(T a, U b_) { T b = tt_den(static_cast<T>(b_));
  if constexpr (std::is_floating_point<T>::value) {
    T m = std::fmod(a, b); if (m != 0 && ((m < 0) != (b < 0))) m += b; return m;
  }
  else { T m = a % b; if (m != 0 && ((m < 0) != (b < 0))) m += b; return m; }
}
template <typename T, typename U> static inline T tt_fmod(T a, U b_) { T b = tt_den(static_cast<T>(b_));
  if constexpr (std::is_floating_point<T>::value) { return std::fmod(a, b); } else { return a % b; }
}
// float math in double, rounded once (see _WIDENED below)
template <typename T> static inline auto tt_wide(T x) {
  if constexpr (std::is_same<T, float>::value) return static_cast<double>(x); else return x;
}
template <typename T, typename U> static inline T tt_pow(T a, U b_) { T b = static_cast<T>(b_);
  if constexpr (std::is_floating_point<T>::value) { return static_cast<T>(std::pow(tt_wide(a), tt_wide(b))); }
  else { if (b < 0) return (a == 1) ? 1 : ((a == -1) ? ((b % 2) ? -1 : 1) : 0);
         T r = 1; while (b) { if (b & 1) r *= a; a *= a; b >>= 1; } return r; }
}
// x is +-2^k: multiplying by 1/x is then exactly dividing by x
template <typename T> static inline bool tt_pow2(T x) { int e; return std::abs(std::frexp(x, &e)) == T(0.5); }
template <typename T> static inline T tt_sign(T x) {  // NaN compares false both ways: 0, as ATen on CPU
  return (T)((T(0) < x) - (x < T(0)));
}
static inline int64_t tt_index(int64_t v, int64_t size, int* status) {
  if (v < 0) v += size;
  if (v < 0 || v >= size) { __atomic_store_n(status, 2, __ATOMIC_RELAXED); return 0; }  // torch raises here
  return v;
}
static inline int64_t tt_index_nowrap(int64_t v, int64_t size, int* status) {  // scatter/gather: no wrap
  if (v < 0 || v >= size) { __atomic_store_n(status, 2, __ATOMIC_RELAXED); return 0; }
  return v;
}
// ATen's formula in T (1 + exp(-x) rounds to 1 for x > 16.6 in float: sigmoid is then exactly 1,
// which ndtri/logit of it see), with the exp itself rounded once from double
template <typename T> static inline T tt_sigmoid(T x) { return T(1) / (T(1) + static_cast<T>(std::exp(-tt_wide(x)))); }
// eager's CPU relu keeps x unless x < 0: NaN stays NaN and -0.0 stays -0.0 (signbit, 1 / x and
// atan2 see it: fuzz 340060/340705)
template <typename T> static inline T tt_relu(T x) { return (x < T(0)) ? T(0) : x; }
template <typename T> static inline bool tt_isnan(T x) {
  if constexpr (std::is_floating_point<T>::value) return std::isnan(x); else return false;
}
// signbit through copysign: GCC 12 crashes (internal compiler error) vectorizing std::signbit
template <typename T> static inline bool tt_signbit(T x) {
  if constexpr (std::is_floating_point<T>::value) return std::copysign(T(1), x) < T(0); else return x < T(0);
}
template <typename T> static inline bool tt_isinf(T x) {
  if constexpr (std::is_floating_point<T>::value) return std::isinf(x); else return false;
}
static inline double tt_erfinv(double y) {
  // Giles' approximation refined by two Newton steps
  if (y <= -1) return y == -1 ? -INFINITY : NAN;
  if (y >= 1) return y == 1 ? INFINITY : NAN;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 6.25) {
    w -= 3.125; x = -3.6444120640178196996e-21; x = -1.685059138182016589e-19 + x*w;
    x = 1.2858480715256400167e-18 + x*w; x = 1.115787767802518096e-17 + x*w;
    x = -1.333171662854620906e-16 + x*w; x = 2.0972767875968561637e-17 + x*w;
    x = 6.6376381343583238325e-15 + x*w; x = -4.0545662729752068639e-14 + x*w;
    x = -8.1519341976054721522e-14 + x*w; x = 2.6335093153082322977e-12 + x*w;
    x = -1.2975133253453532498e-11 + x*w; x = -5.4154120542946279317e-11 + x*w;
    x = 1.051212273321532285e-09 + x*w; x = -4.1126339803469836976e-09 + x*w;
    x = -2.9070369957882005086e-08 + x*w; x = 4.2347877827932403518e-07 + x*w;
    x = -1.3654692000834678645e-06 + x*w; x = -1.3882523362786468719e-05 + x*w;
    x = 0.0001867342080340571352 + x*w; x = -0.00074070253416626697512 + x*w;
    x = -0.0060336708714301490533 + x*w; x = 0.24015818242558961693 + x*w; x = 1.6536545626831027356 + x*w;
  }
  else if (w < 16.0) {
    w = std::sqrt(w) - 3.25; x = 2.2137376921775787049e-09; x = 9.0756561938885390979e-08 + x*w;
    x = -2.7517406297064545428e-07 + x*w; x = 1.8239629214389227755e-08 + x*w;
    x = 1.5027403968909827627e-06 + x*w; x = -4.013867526981545969e-06 + x*w;
    x = 2.9234449089955446044e-06 + x*w; x = 1.2475304481671778723e-05 + x*w;
    x = -4.7318229009055733981e-05 + x*w; x = 6.8284851459573175448e-05 + x*w;
    x = 2.4031110387097893999e-05 + x*w; x = -0.0003550375203628474796 + x*w;
    x = 0.00095328937973738049703 + x*w; x = -0.0016882755560235047313 + x*w;
    x = 0.0024914420961078508066 + x*w; x = -0.0037512085075692412107 + x*w; x = 0.005370914553590063617 + x*w;
    x = 1.0052589676941592334 + x*w; x = 3.0838856104922207635 + x*w;
  }
  else {
    w = std::sqrt(w) - 5.0; x = -2.7109920616438573243e-11; x = -2.5556418169965252055e-10 + x*w;
    x = 1.5076572693500548083e-09 + x*w; x = -3.7894654401267369937e-09 + x*w;
    x = 7.6157012080783393804e-09 + x*w; x = -1.4960026627149240478e-08 + x*w;
    x = 2.9147953450901080826e-08 + x*w; x = -6.7711997758452339498e-08 + x*w;
    x = 2.2900482228026654717e-07 + x*w; x = -9.9298272942317002539e-07 + x*w;
    x = 4.5260625972231537039e-06 + x*w; x = -1.9681778105531670567e-05 + x*w;
    x = 7.5995277030017761139e-05 + x*w; x = -0.00021503011930044477347 + x*w;
    x = -0.00013871931833623122026 + x*w; x = 1.0103004648645343977 + x*w; x = 4.8499064014085844221 + x*w;
  }
  x *= y;
  for (int k = 0; k < 2; k++) { double err = std::erf(x) - y; x -= err / (2.0 / std::sqrt(M_PI) * std::exp(-x * x)); }
  return x;
}
"""


@dataclasses.dataclass
class CppVar:
    name: str
    dtype: torch.dtype

    def __str__(self):
        return self.name


def ctype(dtype: torch.dtype) -> str:
    if dtype not in CPP_TYPES:
        raise CodegenUnsupported(f"dtype {dtype} has no C++ mapping")
    return CPP_TYPES[dtype]


def is_float(dtype) -> bool:
    return dtype.is_floating_point


def cpp_constant(value, dtype) -> str:
    t = ctype(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if isinstance(value, float) or is_float(dtype):
        v = float(value)
        if math.isnan(v):
            return f"std::numeric_limits<{t}>::quiet_NaN()"
        if math.isinf(v):
            return f"{'-' if v < 0 else ''}std::numeric_limits<{t}>::infinity()"
        return f"static_cast<{t}>({v!r})"
    return f"static_cast<{t}>({int(value)}LL)"


class CppIndexPrinter(IndexPrinter):
    """sympy index -> C++ int64 expression (indices are non-negative, so `/` and `%` are floor)."""

    floordiv = "/"
    mul = "*"
    max_fn, min_fn = "std::max<int64_t>", "std::min<int64_t>"

    def integer(self, v: int) -> str:
        return f"{v}LL" if abs(v) > 2**31 - 1 else str(v)

    def unsupported(self, e) -> Exception:
        return CodegenUnsupported(f"cannot print index expression {e!r} in C++")


cpp_index = CppIndexPrinter()

_UNARY_FLOAT = {
    "exp": "std::exp({x})", "exp2": "std::exp2({x})", "expm1": "std::expm1({x})", "log": "std::log({x})",
    "log2": "std::log2({x})", "log10": "std::log10({x})", "log1p": "std::log1p({x})", "sqrt": "std::sqrt({x})",
    "rsqrt": "({t}(1) / std::sqrt({x}))", "sin": "std::sin({x})", "cos": "std::cos({x})", "tan": "std::tan({x})",
    "asin": "std::asin({x})", "acos": "std::acos({x})", "atan": "std::atan({x})", "sinh": "std::sinh({x})",
    "cosh": "std::cosh({x})", "tanh": "std::tanh({x})", "asinh": "std::asinh({x})", "acosh": "std::acosh({x})",
    "atanh": "std::atanh({x})", "sigmoid": "tt_sigmoid({x})", "erf": "std::erf({x})", "erfc": "std::erfc({x})",
    "erfinv": "static_cast<{t}>(tt_erfinv({x}))", "lgamma": "std::lgamma({x})", "floor": "std::floor({x})",
    "ceil": "std::ceil({x})", "trunc": "std::trunc({x})", "round": "std::nearbyint({x})",
    "reciprocal": "({t}(1) / {x})",
}
# float32 libm calls are evaluated in double and rounded once: glibc's float versions (and the
# libmvec vector versions that loops call, up to 4 ulp) are less accurate than ATen's Sleef
# kernels (<= 1 ulp), and an exponent amplifies the gap: 1e20 ** atanh(x) ** 2 differed by 5e-6
# relative (fuzz 331012/331155). Double then one rounding is within half an ulp, never farther
# from the exact value than eager's; double loops still vectorize (libmvec's double versions).
_WIDENED = ("exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh "
            "erf erfc").split()
for _name in _WIDENED:
    _fn = _UNARY_FLOAT[_name][:-len("({x})")]
    _UNARY_FLOAT[_name] = f"static_cast<{{t}}>({_fn}(tt_wide({{x}})))"

_UNARY_ANY = {
    "neg": "(-{x})", "abs": "std::abs({x})", "sign": "tt_sign({x})", "square": "({x} * {x})",
    "relu": "tt_relu({x})", "bitwise_not": "(~{x})",
    "logical_not": "(!{x})", "isnan": "tt_isnan({x})", "isinf": "tt_isinf({x})", "signbit": "tt_signbit({x})",
}
_BINARY = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "truediv": "tt_div({a}, {b})",
    "floordiv": "tt_floordiv({a}, {b})", "fmod": "tt_fmod({a}, {b})", "remainder": "tt_remainder({a}, {b})",
    "pow": "tt_pow({a}, {b})", "maximum": "tt_max({a}, {b})", "minimum": "tt_min({a}, {b})",
    "atan2": "static_cast<decltype({a})>(std::atan2(tt_wide({a}), tt_wide({b})))",
    "copysign": "std::copysign({a}, {b})",
    "hypot": "static_cast<decltype({a})>(std::hypot(tt_wide({a}), tt_wide({b})))",
    "bitwise_and": "({a} & {b})", "bitwise_or": "({a} | {b})", "bitwise_xor": "({a} ^ {b})",
    "left_shift": "({a} << {b})", "right_shift": "({a} >> {b})",
}
_LOGICAL = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}


class CppOpsHandler(TableOpsHandler):
    """C++ for the ops: the tables above through the shared dispatcher (op_tables.py), and the
    ops that are more than one expression. Lines go through the CppKernel (`kernel.emit`)."""

    UNARY_FLOAT, UNARY, BINARY, LOGICAL = _UNARY_FLOAT, _UNARY_ANY, _BINARY, _LOGICAL
    RELU_COMPILE_ERROR = "tt_injected_compile_error({x}) +* ;"

    def value(self, expr: str, dtype: torch.dtype, *operands) -> CppVar:
        return self.kernel.emit(expr, dtype)

    def type_name(self, dtype: torch.dtype) -> str:
        return ctype(dtype)

    def report_injected_error(self, x) -> None:
        self.kernel.code.append(f"if ({x} == {x}) {{ __atomic_store_n(&tt_status, 1, __ATOMIC_RELAXED); }}"
                                "  // injected runtime error (testing.inject_relu_bug)")

    def constant(self, value, dtype):
        cdt = compute_dtype(dtype)
        v = CppVar(cpp_constant(value, cdt), cdt)
        self.kernel.invariant.add(v.name)   # fixed for every loop (a divisor may become a reciprocal)
        return v

    def index_expr(self, expr, dtype):
        if ir.has_float_symbols(expr):
            return self._float_scalar(expr, dtype)
        return self.value(f"static_cast<{ctype(dtype)}>({cpp_index(expr)})", dtype)

    def _float_scalar(self, expr, dtype):
        """A runtime float scalar (a double kernel argument) as a value of dtype: converted as
        ops.constant converts a Python float (half/bfloat16 compute in float, as constants do)."""
        if not isinstance(expr, sympy.Symbol):
            raise CodegenUnsupported(f"float scalar expression {expr} (only float symbols reach kernels)")
        if dtype == torch.bool:
            return self.value(f"({expr.name} != 0)", torch.bool)
        cdt = compute_dtype(dtype)
        return self.value(f"static_cast<{ctype(cdt)}>({expr.name})", cdt)

    def to_dtype(self, x, dtype):
        if dtype == torch.bool:
            return self.value(f"({x} != 0)", torch.bool)
        src = f"TT_OPAQUE({x})" if is_float(dtype) and not is_float(x.dtype) else str(x)
        if dtype == torch.float16:
            return self.value(f"tt_round_half(static_cast<float>({src}))", torch.float32)
        if dtype == torch.bfloat16:
            return self.value(f"tt_round_bf16(static_cast<float>({src}))", torch.float32)
        if src != str(x):
            return self.value(f"static_cast<{ctype(dtype)}>({src})", dtype)
        if is_float(x.dtype) and not is_float(dtype):
            return self.value(f"tt_ftoi<{ctype(dtype)}>({x})", dtype)
        return self.value(f"static_cast<{ctype(dtype)}>({x})", dtype)

    def where(self, cond, a, b):
        dt = a.dtype
        return self.value(f"({cond} ? {a} : static_cast<{ctype(dt)}>({b}))", dt)

    def fma(self, a, b, c):
        return self.value(f"std::fma({a}, {b}, {c})", a.dtype)

    def indirect_indexing(self, x, size, wrap_neg=True, check=False):
        # (always checked here: the status word reports an index out of range)
        fn = "tt_index" if wrap_neg else "tt_index_nowrap"
        v = self.value(f"{fn}(static_cast<int64_t>({x}), {cpp_index(size)}, &tt_status)", torch.int64)
        return sympy.Symbol(v.name, integer=True)

    def truediv(self, a, b):
        if (is_float(a.dtype) and getattr(b, "dtype", None) == a.dtype
                and str(a) not in self.kernel.invariant):
            rcp = self.kernel.reciprocal(b)
            if rcp is not None:   # only b is fixed for the reduction loop: multiply instead
                return self.value(f"({rcp[1]} ? {a} * {rcp[0]} : {a} / {b})", a.dtype)
        return self.binary("truediv", a, b)
