"""Backend lookup: `backend=` names -> the torch.compile backend contract.

Every backend is `backend(gm: torch.fx.GraphModule, example_inputs: list) -> callable`
(docs/CONTRACTS.md section 3). Heavy backends are imported on first use, so a missing or broken
backend package never breaks `import compiler` or the "eager" backend.
"""
from __future__ import annotations

import importlib
from typing import Callable

from tracetorch import logs
from tracetorch.compiler.errors import UnknownBackendError

log = logs.get_logger(__name__)


def eager(gm, example_inputs):
    """Run the captured graph as is (Dynamo's "eager")."""
    return gm.forward


def _run_as_is(gm, example_inputs):
    return gm.forward


def aot_eager(gm, example_inputs):
    """Our aot stage (functionalize + decompose, or joint/partition), then run the graphs as is."""
    from tracetorch.compiler.aot import aot_module
    return aot_module(gm, example_inputs, inner_compile=_run_as_is)


def default(gm, example_inputs):
    """Ours: compiler.backend (C++ on CPU tensors, Triton on CUDA tensors)."""
    backend = importlib.import_module("tracetorch.compiler.backend")
    return backend(gm, example_inputs)


def inductor(gm, example_inputs):
    """PyTorch's TorchInductor, for side-by-side comparison only."""
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


BACKENDS: dict[str, Callable] = {
    "default": default,
    "eager": eager,
    "aot_eager": aot_eager,
    "inductor": inductor,
}


def lookup_backend(name_or_callable) -> Callable:
    """A backend name or callable -> the callable; unknown names get a clear error."""
    if isinstance(name_or_callable, str):
        fn = BACKENDS.get(name_or_callable)
        if fn is None:
            import difflib
            close = difflib.get_close_matches(name_or_callable, BACKENDS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownBackendError(
                f"unknown backend {name_or_callable!r}.{hint} Valid backends: "
                f"{', '.join(repr(b) for b in BACKENDS)}, or any callable "
                "(gm: torch.fx.GraphModule, example_inputs: list) -> callable.")
        return fn
    if callable(name_or_callable):
        return name_or_callable
    raise UnknownBackendError(
        f"backend= must be a name ({', '.join(repr(b) for b in BACKENDS)}) or a callable "
        f"(gm, example_inputs) -> callable; got {type(name_or_callable).__name__}: {name_or_callable!r}")


def backend_name(name_or_callable) -> str:
    if isinstance(name_or_callable, str):
        return name_or_callable
    return getattr(name_or_callable, "__name__", None) or type(name_or_callable).__name__
