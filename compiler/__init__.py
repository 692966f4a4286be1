"""tracetorch: a legible PyTorch compiler (DESIGN section 2).

    import compiler
    opt = compiler.compile(fn_or_module, backend="default", fullgraph=False, dynamic=None)
    compiler.explain(fn)(*args)      compiler.reset()
    compiler.config                  compiler.backend   (our backend as a torch.compile backend)

`config` and `backend` are imported on first access, so a missing or broken backend package
never breaks `import compiler`.
"""
from __future__ import annotations

import importlib

from compiler import errors
from compiler.api import compile, explain, reset

__all__ = ["compile", "explain", "reset", "config", "backend", "errors"]


def __getattr__(name):
    if name in ("config", "backend", "backends", "hooks", "optim"):
        # importing a submodule also binds it as an attribute of this package
        return importlib.import_module(f"compiler.{name}")
    raise AttributeError(f"module 'compiler' has no attribute {name!r}")
