"""tracetorch: a legible PyTorch compiler (DESIGN section 2).

    from tracetorch import compiler
    opt = compiler.compile(fn_or_module, backend="default", fullgraph=False, dynamic=None)
    compiler.explain(fn)(*args)      compiler.reset()
    compiler.config                  compiler.backend   (our backend as a torch.compile backend)

`config` and `backend` are imported on first access, so a missing or broken backend package
never breaks `from tracetorch import compiler`.

Modules, in the order data flows through them:
    api       compile(), explain(), reset(): the public entry points
    config    every option and its layers (defaults, YAML, environment, patch)
    backends  backend= names -> the torch.compile backend contract
    hooks     plugin loading and the compiler wrappers debug registers
    frontend  capture: bytecode -> FX graphs + guards
    aot       functionalize, decompose, joint forward/backward, partition
    backend   loop IR, fusion, C++/Triton code generation, runtime
    optim     compiled optimizer steps
    native_checks  per-call checks over many tensors and dict entries in one C++ call
    errors    the public error classes
"""
from __future__ import annotations

import importlib

from tracetorch.compiler import errors
from tracetorch.compiler.api import compile, explain, reset

__all__ = ["compile", "explain", "reset", "config", "backend", "errors"]


def __getattr__(name):
    if name in ("config", "backend", "backends", "hooks", "optim"):
        # importing a submodule also binds it as an attribute of this package
        return importlib.import_module(f"tracetorch.compiler.{name}")
    raise AttributeError(f"module 'tracetorch.compiler' has no attribute {name!r}")
