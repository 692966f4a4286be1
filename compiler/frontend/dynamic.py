"""Which tensor dimensions and Python scalars a capture should treat as symbolic (`dynamic_dims`
of capture_frame).

dynamic=None (automatic, Dynamo's default): every dimension starts static. When a frame
recompiles because a tensor's size changed, the dimensions that changed are marked dynamic
(per source and dim) and the recompile captures them as SymPy-backed sizes, so later sizes need
no further recompile. dynamic=True: every dim of every tensor argument is symbolic from the first
capture. dynamic=False: never symbolic. With dynamic=None, config.frontend.automatic_dynamic_shapes
=False turns the marking off and assume_static_by_default=False starts as dynamic=True does.

Python scalars follow the same rule (Dynamo's automatic dynamic for int and, with
specialize_float off as in Dynamo 2.x, float): an int/float read from the frame's locals (an
argument, or a value that crossed a graph break into a resume function; `L['n']`, `L['xs'][0]`,
never a global or a module attribute, which Dynamo specializes) is first a constant under
CONSTANT_MATCH; when that guard fails on a new value of the same type the source is marked
dynamic and the recompile makes it a SymInt/SymFloat graph input guarded by its type (plus the
ShapeEnv's guards on how the graph used it). dynamic=True makes such arguments symbolic from the
first capture; dynamic=False keeps them constant. NaN and infinities stay constant (ShapeEnv
cannot reason about them), as in Dynamo.

The marks live per frame cache (one code object under one compile() call) and only grow.
"""
from __future__ import annotations

import math
import re

import torch

from tracetorch import logs
from tracetorch.compiler.frontend.guards import Guard, evaluate_source, tensor_meta

log = logs.get_logger(__name__)


def _option(name: str, default):
    try:
        from tracetorch.compiler import config
        return getattr(config.frontend, name)
    except (ImportError, AttributeError):
        return default


class DynamicSpec(dict):
    """`dynamic_dims` of capture_frame: {source: dims} for tensors, plus `scalars`, the sources
    of int/float values to capture as symbolic graph inputs. A plain dict where no scalar is
    dynamic (what stand-ins and older callers pass) means the same with no scalars."""

    def __init__(self, dims=(), scalars=()):
        super().__init__(dims)
        self.scalars = frozenset(scalars)


# Sources whose scalars may become dynamic: rooted at a frame local, reached only through
# subscripts (L['n'], L['args'][1], L['cfg']['lr']), and floats of globals the same way
# (G['SCALE']: Dynamo does not specialize floats); attribute chains (module hyper-parameters,
# object fields) and ints of globals stay specialized, as Dynamo's is_int_specialization_case.
_LOCAL_SCALAR_SOURCE = re.compile(r"^L\[('[^']*'|\d+)\](\[('[^']*'|-?\d+)\])*$")
_GLOBAL_SCALAR_SOURCE = re.compile(r"^G\[('[^']*'|\d+)\](\[('[^']*'|-?\d+)\])*$")


# a value a graph break left on the stack for the resume function (resume.STACK_ARG)
_RESUME_STACK_SOURCE = re.compile(r"^L\['___stack'\]\[\d+\]$")


def scalar_source_ok(source: str, value=None) -> bool:
    if _LOCAL_SCALAR_SOURCE.match(source):
        return True
    return type(value) is float and bool(_GLOBAL_SCALAR_SOURCE.match(source))


def dynamic_scalar_value(value) -> bool:
    """A value that may be captured as a symbolic scalar (exact int or finite float; no bool)."""
    if type(value) is int:
        return True
    return type(value) is float and math.isfinite(value)


class DynamicDims:
    def __init__(self, mode: bool | None):
        if mode not in (None, True, False):
            raise ValueError(f"dynamic= must be None (automatic), True or False, got {mode!r}")
        self.mode = mode
        self.marked: dict[str, set[int]] = {}
        self.scalars: set[str] = set()      # sources of int/float values marked dynamic

    def clear(self) -> None:
        self.marked.clear()
        self.scalars.clear()

    def for_capture(self, env: dict) -> DynamicSpec:
        """The `dynamic_dims` argument of the next capture_frame call."""
        if self.mode is False:
            return DynamicSpec()
        if self.mode is True or not _option("assume_static_by_default", True):
            dims, scalars = {}, set(self.scalars)
            for name, value in env.items():
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                    dims[f"L['{name}']"] = set(range(value.dim()))
                elif dynamic_scalar_value(value):
                    scalars.add(f"L['{name}']")
            return DynamicSpec(dims, scalars)
        return DynamicSpec({src: set(d) for src, d in self.marked.items()}, self.scalars)

    def update(self, entries, env: dict, globals_: dict, func_name: str) -> list[tuple[str, int]]:
        """After a miss: mark every dim whose size differs from what a cache entry expected."""
        if self.mode is not None or not _option("automatic_dynamic_shapes", True):
            return []
        new = []
        for entry in entries:
            for g in entry.guards:
                if g.kind == "TENSOR_MATCH":
                    new += self._compare(g, env, globals_, func_name)
                elif g.kind == "CONSTANT_MATCH":
                    new += self._compare_scalar(g, env, globals_, func_name)
        return new

    def _compare_scalar(self, g: Guard, env, globals_, func_name):
        """A local int/float whose value changed (same type): mark its source dynamic."""
        if type(g.expected) is str:
            return self._compare_str(g, env, globals_, func_name)
        if g.source in self.scalars or not dynamic_scalar_value(g.expected) \
                or not scalar_source_ok(g.source, g.expected):
            return []
        try:
            value = evaluate_source(g.source, env, globals_)
        except Exception:
            return []
        if type(value) is not type(g.expected) or not dynamic_scalar_value(value) \
                or value == g.expected:
            return []
        self.scalars.add(g.source)
        kind = type(value).__name__
        log.info("automatic_dynamic_scalar", function=func_name, source=g.source, type=kind,
                 expected=g.expected, actual=value,
                 reason=f"automatic dynamic {kind} {g.source} {g.expected!r} != {value!r}: "
                        f"recompiling it as a symbolic graph input (Sym{kind.capitalize()})")
        return [(g.source, None)]

    def _compare_str(self, g: Guard, env, globals_, func_name):
        """A str on a resume function's saved stack (computed eagerly at the graph break, e.g.
        f"{tensor}": data, so it changes every call) whose value changed: left unspecialized
        from now on (RuntimeStrVariable), instead of one recompile per value. Strs of the
        user's own locals and arguments stay constants (code branches on them)."""
        if g.source in self.scalars or not _RESUME_STACK_SOURCE.match(g.source):
            return []
        try:
            value = evaluate_source(g.source, env, globals_)
        except Exception:
            return []
        if type(value) is not str or value == g.expected:
            return []
        self.scalars.add(g.source)
        log.info("automatic_dynamic_scalar", function=func_name, source=g.source, type="str",
                 expected=g.expected, actual=value,
                 reason=f"automatic dynamic str {g.source} {g.expected!r} != {value!r}: a str "
                        "computed at a graph break, recompiling with its value unguarded")
        return [(g.source, None)]

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
