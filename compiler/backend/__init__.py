"""tracetorch's backend: post-aot FX graph -> loop IR -> fused kernels (C++ on CPU tensors,
Triton on CUDA tensors) + a Python wrapper.

The package itself is a torch.compile backend: `torch.compile(model, backend=compiler.backend)`
calls `compiler.backend(gm, example_inputs)`, which runs the aot stage (compiler.aot) with our
inner compiler (compiler/backend/compile.py). Stages: lowering/ (aten -> IR), ir.py (every IR
node type), scheduler/ (fusion, memory planning), codegen/ (cpp, triton, wrapper), runtime/
(building/loading kernels), cache.py (on-disk compiled-graph cache).

Modules, in the order data flows through them:
    compile      the inner compiler: graph -> IR -> schedule -> code -> callable
    cache        the on-disk compiled-graph cache
    conv_layout  channels-last activations for convolution graphs
    pad_gemm     matrix products padded to tensor-core-aligned sizes
    lowering     aten -> loop IR
    ir           every IR node type
    ops          the op vocabulary and its handlers
    indexing     sympy index arithmetic
    scheduler    fusion, memory planning, the schedule verifier
    codegen      C++ and Triton kernels, the Python wrapper
    autotune     block size / warp sweeps for Triton kernels
    runtime      building, loading and launching kernels; CUDA graphs
"""

from __future__ import annotations

import sys
import types


def inner_compile(gm, example_inputs):
    """The post-aot compiler (wrapped by compiler.hooks for repro/minifier when available)."""
    from tracetorch.compiler.backend.compile import compile_graph
    return compile_graph(gm, example_inputs)


def compile_fx(gm, example_inputs, *, dynamic=None):
    """Our backend: aot (functionalize, decompose / joint+partition) then the inner compiler."""
    _start_compile_workers(example_inputs)
    from tracetorch.compiler.aot import aot_module
    from tracetorch.compiler import hooks
    inner = hooks.wrap_compiler(inner_compile, "backend")   # repro/minifier wrappers, if any
    from tracetorch.compiler.backend.runtime import cudagraph_training, cudagraphs
    return aot_module(gm, example_inputs, inner, dynamic=dynamic, wrap_inference=cudagraphs.maybe_wrap,
                      wrap_training=cudagraph_training.maybe_wrap)


def _start_compile_workers(example_inputs) -> None:
    """A graph with CUDA inputs will compile Triton kernels: start the compile workers now, so
    that their start-up (importing Triton, a warm-up compile: seconds on a fresh machine)
    overlaps aot, lowering and code generation. Started when the kernels are submitted, the
    workers were still starting when the first launches came, and the main process compiled
    those kernels itself, one after another (GPT-2 on the H100: 28 of them)."""
    import torch
    if not any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs):
        return
    from tracetorch.compiler.backend.runtime import triton_compile
    try:
        if triton_compile.pool_size() > 1:
            triton_compile.get_pool(target=triton_compile.current_target())
    except Exception as e:      # an optimisation only: kernels then compile at their first launch
        from tracetorch import logs
        logs.get_logger(__name__).warning("triton_compile_pool_not_started", error=f"{type(e).__name__}: {e}"[:300])


class _CallableModule(types.ModuleType):
    """Lets the package be used as a backend: compiler.backend(gm, example_inputs)."""

    def __call__(self, gm, example_inputs, **kwargs):
        return compile_fx(gm, example_inputs, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["compile_fx", "inner_compile"]
