"""Pointwise nodes re-nested to join a reduction whose loops run in another order (fusion.py's
_permuted_as, ir.ComputedBuffer.permuted): random memory orders, reduced dims and consumers,
each compiled result compared with eager, on both code generators (Triton through its
interpreter). The split statistics of large reductions (lowering/split_reduction.py) are reached
at test sizes by lowering its thresholds. Re-nesting is forced on (backend.renest_fusion): by default
only C++ kernels re-nest."""
import itertools
import os
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from cpp_test_utils import check  # noqa: E402
from tracetorch import compiler  # noqa: E402
from tracetorch.compiler import config  # noqa: E402


def _in_memory_order(shape, order, gen):
    """A tensor of `shape` whose dims are laid out in memory as `order` (outermost first)."""
    stored = torch.randn([shape[d] for d in order], generator=gen)
    return stored.permute([order.index(d) for d in range(len(shape))])


def _program(case: int):
    rnd = random.Random(case)
    shape = [rnd.choice([2, 3, 4]), rnd.choice([8, 16, 24]), rnd.choice([3, 5, 8]), rnd.choice([4, 6, 8])]
    order = rnd.choice(list(itertools.permutations(range(4))))
    dims = tuple(sorted(rnd.sample(range(4), rnd.choice([1, 2, 3]))))
    gen = torch.Generator().manual_seed(case)
    x, g = _in_memory_order(shape, list(order), gen), _in_memory_order(shape, list(order), gen).abs() + 0.5
    consumer = rnd.choice(["none", "normalize", "scale", "flat"])

    def f(x, g):
        y = torch.nn.functional.gelu(x * g + 1)
        s = y.sum(dims, keepdim=True)
        m = (y * x).amax(dims, keepdim=True)
        if consumer == "normalize":
            return y, s, (y - s / y.numel() * s.numel()) * torch.rsqrt(m.abs() + 1)
        if consumer == "scale":
            return s, m, y * m
        if consumer == "flat":                  # over the flattened leading loops (a bias gradient)
            return y, y.reshape(-1, y.shape[-1]).sum(0), (y * x).reshape(y.shape[0], -1).amax(1)
        return y, s, m
    return f, [x, g]


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
@pytest.mark.parametrize("split", [False, True])
def test_random_memory_orders_and_reduced_dims_match_eager(codegen, split, monkeypatch):
    if codegen == "triton":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if split:
        from tracetorch.compiler.backend.lowering import split_reduction
        monkeypatch.setattr(split_reduction, "_MIN_ELEMENTS_MANY", 1 << 8)
        monkeypatch.setattr(split_reduction, "_MIN_RNUMEL", 64)
        monkeypatch.setattr(split_reduction, "_MIN_CHUNK", 16)
        monkeypatch.setattr(split_reduction, "_MIN_PROGRAM_WORK", 64)
    with config.patch({"backend.cpu_codegen": codegen, "backend.cache_enabled": False,
                       "backend.fallback_on_error": False, "backend.verify_schedule": True,
                       "backend.renest_fusion": "on"}):
        for case in range(10):
            fn, inputs = _program(case)
            compiler.reset()
            check(fn, inputs)
