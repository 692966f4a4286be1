"""The program's answer with every op correctly rounded in the program's own dtypes.

The float64 reference (compare's docstring) judges a float by its distance from the exact value,
but an integer test on a half-precision value (`v == trunc(v)`: every float16 above 2048 is an
integer) means something else in float64, and eager's own answer is no judge where its order of
evaluation overflows: ATen's CPU `prod` of float16 accumulates in float16, so 300 * 300 / 300 /
300 is inf there, 1.0 exact (fuzz 390633, where the compiled product was exact and an lgamma,
a trunc and an `==` later the bool differed from both).

`rounded_reference(fn, inputs)` runs the program eagerly with each computing op evaluated on
float64 copies of its float16/bfloat16/float32 operands and its results rounded once to the
dtypes the op gives (those of the same op run as written, which also keeps its aliasing and
in-place effects); sums and products are exact (compare.exact_sums). That is the answer of an
ideal implementation of the program as written, so a compiled value equal to it is right
whatever eager says. View ops run as they are: they compute nothing.
"""

from __future__ import annotations

import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from . import compare
from .values import clone_all

#: the float dtypes computed wider (float64 ops are their own reference)
NARROW = (torch.float16, torch.bfloat16, torch.float32)


def _widen(x):
    if isinstance(x, torch.Tensor) and x.dtype in NARROW:
        return x.detach().to(torch.float64, copy=True)
    return x


def _narrow_float_operand(args, kwargs) -> bool:
    return any(isinstance(x, torch.Tensor) and x.dtype in NARROW for x in tree_flatten((args, kwargs))[0])


class _RoundOnce(TorchDispatchMode):
    """Each computing op with a narrow float operand: run wide for the values, as written for the
    dtypes and aliasing, the wide values copied into the written run's results and mutated
    operands."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.is_view or not _narrow_float_operand(args, kwargs):
            return func(*args, **kwargs)
        wide_args, wide_kwargs = tree_map(_widen, (args, kwargs))
        try:
            wide_out = func(*wide_args, **wide_kwargs)
        except Exception:            # no float64 kernel (or another rule): the op as written
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        for narrow, wide in zip(compare.leaves(out), compare.leaves(wide_out)):
            _take_values(narrow, wide)
        # in-place and out= operands: the op wrote them in both runs
        flat_args = tree_flatten((args, kwargs))[0]
        flat_wide = tree_flatten((wide_args, wide_kwargs))[0]
        for narrow, wide, arg in zip(flat_args, flat_wide, _flat_schema_args(func, args, kwargs)):
            if arg is not None and arg.alias_info is not None and arg.alias_info.is_write:
                _take_values(narrow, wide)
        return out


def _flat_schema_args(func, args, kwargs) -> list:
    """The schema argument of each leaf of tree_flatten((args, kwargs)) (None where unknown)."""
    by_name = {a.name: a for a in func._schema.arguments}
    positional = [a for a in func._schema.arguments if not a.kwarg_only]
    leaves = []
    for i, value in enumerate(args):
        leaves += [positional[i] if i < len(positional) else None] * len(tree_flatten(value)[0])
    for name, value in kwargs.items():
        leaves += [by_name.get(name)] * len(tree_flatten(value)[0])
    return leaves


def _take_values(narrow, wide) -> None:
    if isinstance(narrow, torch.Tensor) and isinstance(wide, torch.Tensor) and narrow.dtype.is_floating_point \
            and narrow.shape == wide.shape and narrow is not wide:
        with torch.no_grad():
            narrow.copy_(wide.to(narrow.dtype))


def rounded_reference(fn, inputs) -> list | None:
    """Output leaves, then the inputs after the call, of `fn` with every op rounded once (module
    docstring); None if that run fails."""
    args = clone_all(inputs)
    try:
        with warnings.catch_warnings(), _RoundOnce(), compare.exact_sums():
            warnings.simplefilter("ignore")
            return compare.leaves(fn(*args)) + args
    except Exception:
        return None
