"""Which tensor dimensions a capture should treat as symbolic (`dynamic_dims` of capture_frame).

dynamic=None (automatic, Dynamo's default): every dimension starts static. When a frame
recompiles because a tensor's size changed, the dimensions that changed are marked dynamic
(per source and dim) and the recompile captures them as SymPy-backed sizes, so later sizes need
no further recompile. dynamic=True: every dim of every tensor argument is symbolic from the first
capture. dynamic=False: never symbolic. With dynamic=None, config.frontend.automatic_dynamic_shapes
=False turns the marking off and assume_static_by_default=False starts as dynamic=True does.

The marks live per frame cache (one code object under one compile() call) and only grow.
"""
from __future__ import annotations

import torch

import logs
from compiler.frontend.guards import Guard, evaluate_source, tensor_meta

log = logs.get_logger(__name__)


def _option(name: str, default):
    try:
        from compiler import config
        return getattr(config.frontend, name)
    except (ImportError, AttributeError):
        return default


class DynamicDims:
    def __init__(self, mode: bool | None):
        if mode not in (None, True, False):
            raise ValueError(f"dynamic= must be None (automatic), True or False, got {mode!r}")
        self.mode = mode
        self.marked: dict[str, set[int]] = {}

    def for_capture(self, env: dict) -> dict[str, set[int]]:
        """The `dynamic_dims` argument of the next capture_frame call."""
        if self.mode is False:
            return {}
        if self.mode is True or not _option("assume_static_by_default", True):
            dims = {}
            for name, value in env.items():
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                    dims[f"L['{name}']"] = set(range(value.dim()))
            return dims
        return {src: set(d) for src, d in self.marked.items()}

    def update(self, entries, env: dict, globals_: dict, func_name: str) -> list[tuple[str, int]]:
        """After a miss: mark every dim whose size differs from what a cache entry expected."""
        if self.mode is not None or not _option("automatic_dynamic_shapes", True):
            return []
        new = []
        for entry in entries:
            for g in entry.guards:
                if g.kind != "TENSOR_MATCH":
                    continue
                new += self._compare(g, env, globals_, func_name)
        return new

    def _compare(self, g: Guard, env, globals_, func_name):
        try:
            value = evaluate_source(g.source, env, globals_)
        except Exception:
            return []
        if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
            return []  # parameters stay static, as in Dynamo
        meta = tensor_meta(g.expected)
        if value.dim() != len(meta.shape) or value.dtype is not meta.dtype:
            return []  # a rank or dtype change is not a size change
        new = []
        for i, (want, got) in enumerate(zip(meta.shape, value.shape)):
            if want is None or want == got or i in self.marked.get(g.source, ()):
                continue
            self.marked.setdefault(g.source, set()).add(i)
            new.append((g.source, i))
            log.info("automatic_dynamic", function=func_name, source=g.source, dim=i,
                     expected=want, actual=int(got),
                     reason=f"automatic dynamic {g.source} size({i}) {want} != {int(got)}")
        return new
