"""Loops of all kinds and ifs on constants, shapes and Python values."""
import torch

from tests.compiler.frontend.corpus import KW, D, L, P, STD, T, shapes


def for_range(x):
    for i in range(3):
        x = x + i
    return x
def for_range_step(x):
    for i in range(10, 0, -3):
        x = x * 0.5 + i
    return x
def for_list(x):
    for w in [1.0, 2.0, 3.0]:
        x = x * w
    return x
def for_tuple_of_tensors(x):
    acc = torch.zeros_like(x)
    for t in (x, x.sin(), x.cos()):
        acc = acc + t
    return acc
def for_dict_keys(x):
    d = {"a": 1, "b": 2}
    for k in d:
        x = x + d[k]
    return x
def for_enumerate(x):
    for i, v in enumerate([x, x * 2]):
        x = x + v * i
    return x
def for_zip(x):
    for a, b in zip([1, 2], [3, 4]):
        x = x * a + b
    return x
def for_over_tensor_rows(x):
    acc = x[0] * 0
    for row in x:
        acc = acc + row
    return acc
def for_shape_range(x):
    acc = x[:, 0]
    for j in range(x.shape[1]):
        acc = acc * x[:, j]
    return acc
def nested_loops(x):
    for i in range(2):
        for j in range(2):
            x = x + i * j
    return x
def while_loop(x):
    i = 0
    while i < 3:
        x = x * 2
        i += 1
    return x
def loop_break(x):
    for i in range(10):
        if i == 3:
            break
        x = x + 1
    return x
def loop_continue(x):
    for i in range(5):
        if i % 2:
            continue
        x = x + i
    return x
def for_else(x):
    for i in range(2):
        x = x + 1
    else:
        x = x * 2
    return x
def if_constant(x):
    if True:
        x = x + 1
    if False:
        x = x * 100
    return x
def if_shape(x):
    if x.shape[0] > 4:
        return x.sum(0)
    return x.mean(0)
def if_ndim(x):
    if x.dim() == 2:
        return x.t()
    return x
def if_python_arg(x, flag):
    if flag:
        return x + 1
    return x - 1
def if_int_arg(x, n):
    if n > 2:
        return x * n
    return x
def if_none(x, y=None):
    if y is not None:
        x = x + y
    return x
def if_dtype(x):
    if x.dtype is torch.int64:
        return x * 2
    return x / 2
def if_isinstance_list(x):
    if isinstance(x, (list, tuple)):
        return x[0]
    return x + 1
def elif_chain(x, mode):
    if mode == "a":
        return x + 1
    elif mode == "b":
        return x + 2
    else:
        return x + 3
def loop_accumulate_list(x):
    outs = []
    for i in range(x.shape[0]):
        outs.append(x[i] * i)
    return torch.stack(outs)
def loop_with_if_on_index(x):
    for i in range(4):
        if i % 2 == 0:
            x = x + 1
        else:
            x = x * 2
    return x
def while_shape(x):
    while x.shape[0] > 1:
        x = x[: x.shape[0] // 2] + x[x.shape[0] // 2: 2 * (x.shape[0] // 2)]
    return x
def loop_over_kwargs(x, **kw):
    for k, v in kw.items():
        x = x + v
    return x
def and_or_shapes(x):
    if x.shape[0] > 1 and x.shape[1] > 1:
        return x * 2
    return x
def early_return_in_loop(x):
    for i in range(5):
        if i == 2:
            return x + i
    return x
def loop_range_len(x):
    ws = [0.1, 0.2, 0.3]
    for i in range(len(ws)):
        x = x + ws[i]
    return x

PROGRAMS = [
    P(for_range), P(for_range_step), P(for_list), P(for_tuple_of_tensors), P(for_dict_keys),
    P(for_enumerate), P(for_zip), P(for_over_tensor_rows, shapes((3, 4), (3, 4))),
    P(for_shape_range), P(nested_loops), P(while_loop), P(loop_break), P(loop_continue),
    P(for_else), P(if_constant), P(if_shape, shapes((3, 4), (3, 4), (5, 4), (6, 4))), P(if_ndim),
    P(if_python_arg, [(T(3), True), (T(3), True), (T(3), False)], recompiles=1),
    P(if_int_arg, [(T(3), 3), (T(3), 3), (T(3), 1)], recompiles=1),
    P(if_none, [(T(3),), (T(3),), (T(3), T(3))], recompiles=1),
    P(if_dtype, [(T(3),), (T(3),), (T(3, dtype=torch.int64),)], recompiles=1),
    P(if_isinstance_list, [(T(3),), (T(3),)]),
    P(elif_chain, [(T(3), "a"), (T(3), "b"), (T(3), "c"), (T(3), "a")], recompiles=2),
    P(loop_accumulate_list, shapes((3, 4), (3, 4))), P(loop_with_if_on_index),
    P(while_shape, shapes((4, 3), (4, 3))),
    P(loop_over_kwargs, [(T(3), KW(a=1.0, b=2.0)), (T(3), KW(a=1.0, b=2.0))]), P(and_or_shapes), P(early_return_in_loop),
    P(loop_range_len),
]
