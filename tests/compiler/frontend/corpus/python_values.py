"""Constants, Python arithmetic, globals, tensor attributes, isinstance/len/getattr/hasattr, f-strings."""
import math

import torch

from tests.compiler.frontend.corpus import P, T

SCALE = 3.0
OFFSETS = (1.0, 2.0)
CONFIG = {"alpha": 0.5, "mode": "sum"}
W = torch.randn(4)


class Cfg:
    eps = 1e-5
    depth = 2


def const_arith(x): return x * (2 + 3 * 4) / 7
def float_math(x): return x * math.sqrt(2.0) + math.pi
def int_ops(x): n = 7; return x * (n // 2) + (n % 3) + abs(-n) + max(n, 3) + min(1, 2)
def global_scalar(x): return x * SCALE
def global_tuple(x): return x + OFFSETS[0] - OFFSETS[1]
def global_dict(x): return x * CONFIG["alpha"] if CONFIG["mode"] == "sum" else x
def global_tensor(x): return x * W
def global_class_attr(x): return x / (x.abs() + Cfg.eps) * Cfg.depth
def shape_attr(x): return x * x.shape[0] + x.shape[1]
def size_method(x): return x.reshape(x.size(0) * x.size(1))
def ndim_dim(x): return x * x.ndim + x.dim()
def dtype_attr(x): return x.to(torch.float64) if x.dtype == torch.float32 else x
def device_attr(x): return x + 1 if x.device.type == "cpu" else x
def numel(x): return x.sum() / x.numel()
def is_floating(x): return x * 2 if x.is_floating_point() else x
def requires_grad_attr(x): return x + 1 if x.requires_grad else x - 1
def isinstance_tensor(x): return x + 1 if isinstance(x, torch.Tensor) else x
def isinstance_int(x, n): return x * n if isinstance(n, int) else x
def len_tensor(x): return x * len(x)
def getattr_builtin(x): return getattr(torch, "relu")(x)
def hasattr_check(x): return x * 2 if hasattr(x, "shape") else x
def fstring_const(x): name = f"layer_{2}_{'a'}"; return x * len(name)
def fstring_shape(x): s = f"{x.shape[1]}"; return x + len(s)
def str_ops(x, mode): return x * 2 if mode.upper() == "DOUBLE" else x
def bool_logic(x, a, b): return x + 1 if (a and not b) or (b and not a) else x - 1
def none_default(x, bias=None): return x if bias is None else x + bias
def tensor_dtype_arg(x): return torch.zeros(x.shape, dtype=x.dtype) + x
def python_float_arg(x, s): return x * s
def int_arg(x, n): return x.repeat(n, 1)
def ternary(x): k = 2 if x.shape[1] > 3 else 3; return x * k
def comparison_chain(x): n = x.shape[0]; return x * 2 if 1 < n < 10 else x
def math_on_shape(x): return x / math.sqrt(x.shape[-1])
def type_call(x): return x * 2 if type(x) is torch.Tensor else x
def id_builtin_call(x): return x + float(int(2.7)) + round(2.4)

PROGRAMS = [
    P(const_arith), P(float_math), P(int_ops), P(global_scalar), P(global_tuple), P(global_dict),
    P(global_tensor), P(global_class_attr), P(shape_attr), P(size_method), P(ndim_dim), P(dtype_attr),
    P(device_attr), P(numel), P(is_floating), P(requires_grad_attr), P(isinstance_tensor),
    P(isinstance_int, [(T(3, 4), 2), (T(3, 4), 2), (T(3, 4), 3)], recompiles=1),
    P(len_tensor), P(getattr_builtin), P(hasattr_check), P(fstring_const), P(fstring_shape),
    P(str_ops, [(T(3, 4), "double"), (T(3, 4), "double"), (T(3, 4), "single")], recompiles=1),
    P(bool_logic, [(T(3, 4), True, False), (T(3, 4), True, False), (T(3, 4), True, True)], recompiles=1),
    P(none_default, [(T(3, 4),), (T(3, 4),), (T(3, 4), T(3, 4))], recompiles=1),
    P(tensor_dtype_arg), P(python_float_arg, [(T(3, 4), 2.0), (T(3, 4), 2.0)]),
    P(int_arg, [(T(3, 4), 2), (T(3, 4), 2)]), P(ternary), P(comparison_chain), P(math_on_shape),
    P(type_call), P(id_builtin_call),
]
