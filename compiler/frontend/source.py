"""Sources: where a value the traced code reads came from, in Dynamo's notation.

A source names a value in terms of the frame it was read from: `L['x']` (a local or argument),
`G['w']` (a global), `L['self'].layer.weight` (attribute chain), `L['xs'][0]` (subscript).
Guards are keyed by a source's name (frontend-runtime evaluates these strings with the call's
arguments as `L` and the function's globals as `G`), and the code generator reloads an
unchanged value straight from its source instead of passing it through a graph.
"""
from __future__ import annotations

import dataclasses
import functools

import torch
from torch._guards import GuardSource
from torch._guards import Source as _TorchSource


class Source:
    """Base class; subclasses are small frozen dataclasses."""

    def name(self) -> str:
        raise NotImplementedError

    def reconstruct(self, cg) -> None:
        """Emit bytecode that pushes the value of this source."""
        raise NotImplementedError

    def render(self) -> str:
        """The value as a Python expression in the transformed code (for the readable source)."""
        raise NotImplementedError

    def __str__(self):
        return self.name()


@dataclasses.dataclass(frozen=True)
class LocalSource(Source):
    local_name: str
    is_cell: bool = False     # a cell/free variable of the frame (LOAD_DEREF)

    def name(self):
        return f"L[{self.local_name!r}]"

    def reconstruct(self, cg):
        cg.emit("LOAD_DEREF" if self.is_cell else "LOAD_FAST", self.local_name)

    def render(self):
        return self.local_name


@dataclasses.dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str

    def name(self):
        return f"G[{self.global_name!r}]"

    def reconstruct(self, cg):
        cg.load_global(self.global_name)

    def render(self):
        return self.global_name


@dataclasses.dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def name(self):
        return f"{self.base.name()}.{self.attr}"

    def reconstruct(self, cg):
        self.base.reconstruct(cg)
        cg.load_attr(self.attr)

    def render(self):
        return f"{self.base.render()}.{self.attr}"


@dataclasses.dataclass(frozen=True)
class GetItemSource(Source):
    base: Source
    index: object        # a constant key (int or str)

    def name(self):
        return f"{self.base.name()}[{self.index!r}]"

    def reconstruct(self, cg):
        self.base.reconstruct(cg)
        cg.emit("LOAD_CONST", self.index)
        cg.emit("BINARY_SUBSCR")

    def render(self):
        return f"{self.base.render()}[{self.index!r}]"


@dataclasses.dataclass(frozen=True)
class CallSource(Source):
    """base() -- the referent of a weakref read from the frame."""
    base: Source

    def name(self):
        return f"{self.base.name()}()"

    def reconstruct(self, cg):
        cg.emit("PUSH_NULL")
        self.base.reconstruct(cg)
        cg.call(0)

    def render(self):
        return f"{self.base.render()}()"


@dataclasses.dataclass(frozen=True)
class LenSource(Source):
    """len(base): the length of a runtime str, a symbolic graph input (dynamic.py)."""
    base: Source

    def name(self):
        return f"len({self.base.name()})"

    def reconstruct(self, cg):
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", len)
        self.base.reconstruct(cg)
        cg.call(1)

    def render(self):
        return f"len({self.base.render()})"


@dataclasses.dataclass(frozen=True)
class NumpyTensorSource(Source):
    """torch.from_numpy(base): the tensor view of a numpy array read from the frame (numpy
    arrays are traced as tensors, numpy_calls.py); guards evaluate it with ___from_numpy."""
    base: Source

    def name(self):
        return f"___from_numpy({self.base.name()})"

    def reconstruct(self, cg):
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", torch.from_numpy)
        self.base.reconstruct(cg)
        cg.call(1)

    def render(self):
        return f"torch.from_numpy({self.base.render()})"


@dataclasses.dataclass(frozen=True)
class DefaultSource(Source):
    """A default argument value of a function that was inlined (guarded by the function's id)."""
    fn_source: Source
    index: int
    kw: str | None = None

    def name(self):
        if self.kw is not None:
            return f"{self.fn_source.name()}.__kwdefaults__[{self.kw!r}]"
        return f"{self.fn_source.name()}.__defaults__[{self.index}]"

    def reconstruct(self, cg):
        self.fn_source.reconstruct(cg)
        if self.kw is not None:
            cg.load_attr("__kwdefaults__")
            cg.emit("LOAD_CONST", self.kw)
        else:
            cg.load_attr("__defaults__")
            cg.emit("LOAD_CONST", self.index)
        cg.emit("BINARY_SUBSCR")

    def render(self):
        return self.name()


@dataclasses.dataclass(frozen=True)
class DictValueSource(Source):
    """The value at a position of a dict whose keys cannot be written in a guard (types,
    typing forms: a validator registry); the key order is guarded with the dict."""
    base: Source
    position: int

    def name(self):
        return f"list({self.base.name()}.values())[{self.position}]"

    def reconstruct(self, cg):
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", list)
        self.base.reconstruct(cg)
        cg.load_attr("values")
        cg.call(0)
        cg.call(1)
        cg.emit("LOAD_CONST", self.position)
        cg.emit("BINARY_SUBSCR")

    def render(self):
        return f"list({self.base.render()}.values())[{self.position}]"


class _CallableStr(str):
    """torch's Source.name is a method in older versions and a property in newer ones: a str
    that returns itself when called satisfies both."""

    def __call__(self):
        return str(self)


@dataclasses.dataclass(frozen=True)
class ShapeEnvSource(_TorchSource):
    """A torch._guards.Source wrapper so that ShapeEnv names symbols after our sources."""
    text: str

    @property
    def name(self):  # noqa: D401 - property on purpose, see _CallableStr
        return _CallableStr(self.text)

    @property
    def _name_template(self):
        return self.text

    @property
    def guard_source(self):
        return GuardSource.LOCAL

    def is_ephemeral(self):
        return False


@functools.lru_cache(maxsize=None)
def shape_env_source(text: str) -> ShapeEnvSource:
    return ShapeEnvSource(text)


def is_torch_object(value) -> bool:
    mod = getattr(value, "__module__", None) or ""
    return mod == "torch" or mod.startswith("torch.") or value is torch
