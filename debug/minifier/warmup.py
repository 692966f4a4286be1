"""Imported once by the minifier's forkserver (a preload module): pay the lazy costs there.

Every candidate process is forked from the forkserver, so whatever is warmed here is free for
each of them: the configuration module (and yaml), FX's tracer caches (the first symbolic trace
computes torch's table of overridable methods, ~30 ms), the repro loader. Only tracing runs
here, never tensor kernels, so forking stays safe for OpenMP thread pools.
"""

import os

import torch
import torch.fx

import tracetorch.compiler.config  # noqa: F401  (lazy in `compiler`, needed by every candidate)
import tracetorch.debug.candidate  # noqa: F401
import tracetorch.debug.graph_code  # noqa: F401


class _Tiny(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + x.sum()


torch.fx.symbolic_trace(_Tiny())

# Our compiler's own modules, and, when candidates will run the aot stage (frontend-stage
# repros), the fake-tensor machinery it uses: its first construction imports a large part of
# torch, seconds per candidate if left to each one, wasted startup time if never needed.
for _name in ("tracetorch.compiler.backend", "tracetorch.compiler.backend.compile", "tracetorch.compiler.aot",
              "tracetorch.compiler.backends"):
    try:
        __import__(_name)
    except Exception:  # a part under construction must not break the minifier
        pass
if os.environ.get("TRACETORCH_MINIFY_WARM_FAKE") == "1":  # set by the pool for frontend-stage repros
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode

        FakeTensorMode()
    except Exception:
        pass
