"""Helpers for the C++ backend tests: compile a plain function through compiler.backend (graphs
come from torch.fx.symbolic_trace, independent of our frontend) and compare with eager."""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

import tracetorch.compiler.backend as backend
from tracetorch.compiler.backend.compile import CompiledGraph

TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1.6e-2, 1.6e-2)}


def compile_fn(fn, inputs, dynamic=None):
    gm = torch.fx.symbolic_trace(fn)
    return backend(gm, list(inputs), dynamic=dynamic)


def compiled_graph(runtime) -> CompiledGraph:
    assert isinstance(runtime.compiled, CompiledGraph), f"graph ran eagerly: {getattr(runtime.compiled, 'reason', '')}"
    return runtime.compiled


def kernel_count(runtime) -> int:
    return compiled_graph(runtime).code.count('extern "C" int ')


def extern_count(runtime) -> int:
    return compiled_graph(runtime).code.count("# extern kernel")


def fallback_count(runtime) -> int:
    return compiled_graph(runtime).code.count("# fallback:")


def assert_same(out, ref, dtype=None):
    outs, refs = pytree.tree_leaves(out), pytree.tree_leaves(ref)
    assert len(outs) == len(refs)
    for i, (a, b) in enumerate(zip(outs, refs)):
        if not isinstance(b, torch.Tensor):
            assert a == b, (i, a, b)
            continue
        assert a.shape == b.shape, (i, a.shape, b.shape)
        assert a.dtype == b.dtype, (i, a.dtype, b.dtype)
        if b.dtype.is_floating_point:
            atol, rtol = TOL.get(b.dtype, (1e-5, 1e-5))
            torch.testing.assert_close(a, b, atol=atol, rtol=rtol, equal_nan=True, msg=lambda m: f"output {i}: {m}")
        else:
            assert torch.equal(a, b), (i, a, b)


def check(fn, inputs, dynamic=None):
    """Compile fn, run it, compare every output with eager; return the runtime."""
    rt = compile_fn(fn, inputs, dynamic=dynamic)
    compiled_graph(rt)
    ref = fn(*inputs)
    out = rt(*inputs)
    assert_same(out, ref)
    return rt


def check_with_mutations(rt, fn, make, seeds):
    """Run the compiled `rt` and eager `fn` on fresh inputs `make(seed)` for each seed, and compare
    the outputs (None ones left out) and every input afterwards (what an in-place op wrote)."""
    def present(v):
        return [x for x in (v if isinstance(v, (list, tuple)) else [v]) if x is not None]
    for seed in seeds:
        ours, ref = make(seed), make(seed)
        out = rt(*ours)
        expect = fn(*ref)
        assert_same(present(out), present(expect))
        assert_same(ours, ref)            # every mutated input holds eager's value
