"""The Python patterns Hugging Face model code relies on, in isolation (no transformers needed).

Each is captured as one graph with no break, and gives the eager result; where a value read at
trace time is guarded, changing it gives the eager answer again (a recompile, not a stale one).
"""
import collections.abc
import contextlib
import enum
import inspect
import os

import torch

from tracetorch import compiler


def _counts(fn, *args):
    report = compiler.explain(fn)(*args)
    return report.graph_count, report.graph_break_count


def _check(fn, *args):
    assert _counts(fn, *args) == (1, 0), compiler.explain(fn)(*args)
    compiled = compiler.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(*args), fn(*args))
    return compiled


class Config:
    """PretrainedConfig-style: aliases resolved in a Python __getattribute__."""
    attribute_map = {"hidden": "hidden_size"}

    def __init__(self):
        self.hidden_size = 3
        self.scale = 2.0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


CONFIG = Config()


def config_reads(x):
    if "_secret" in CONFIG.__dict__:
        return x
    return x[..., :CONFIG.hidden] * CONFIG.scale


def test_config_attribute_access_is_guarded():
    x = torch.randn(2, 5)
    compiled = _check(config_reads, x)
    CONFIG.scale = 3.0
    try:
        torch.testing.assert_close(compiled(x), config_reads(x))
    finally:
        CONFIG.scale = 2.0


class Mode(enum.Enum):
    OFF = 0
    ON = 1


class Registry(collections.abc.MutableMapping):
    """transformers' GeneralInterface: a Mapping with a Python __getitem__."""
    _global = {"double": lambda t: t * 2}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __setitem__(self, key, value):
        self._local[key] = value

    def __delitem__(self, key):
        del self._local[key]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(set(self._global) | set(self._local))


REGISTRY = Registry()


class Table(dict):
    def get(self, key):
        return super().get(str(key)) or {}


TABLE = Table(linear={"a": 1})


def python_helpers(x):
    import math                                    # an already-imported module
    fn = REGISTRY.get("double", None) if "double" in REGISTRY else None
    if os.environ.get("TRACETORCH_TEST_UNSET_VAR", "0") == "1":
        x = x + 100
    n = len(inspect.signature(python_helpers).parameters)
    if not torch.compiler.is_compiling():
        print("eager", end="\r")        # a break, unless capture answers True as Dynamo does
    if Mode.ON.value == 1 and TABLE.get("linear")["a"] == 1:
        x = x * math.pi
    with contextlib.nullcontext():
        y = fn(x) + n
    try:
        y = y + 1
    finally:
        y = y * 2
    return y


def test_registry_environ_signature_import_enum_nullcontext_try():
    _check(python_helpers, torch.randn(4))


class CheckpointLayer(torch.nn.Module):
    """transformers' GradientCheckpointingLayer: a Python __call__ calling super().__call__."""
    checkpointing = False

    def __call__(self, *args, **kwargs):
        if self.checkpointing and self.training:
            raise RuntimeError("not in this test")
        return super().__call__(*args, **kwargs)


class Block(CheckpointLayer):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block() for _ in range(3)])
        self.used = 2

    def forward(self, x):
        for layer in self.layers[: self.used]:      # a slice of a ModuleList
            if type(layer).forward is Block.forward and layer.__class__ is Block:
                x = layer(x, scale=2.0)
        return x


def test_module_call_override_and_module_list_slice():
    torch.manual_seed(0)
    model = Stack()
    compiled = _check(model, torch.randn(2, 3))
    model.used = 3
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), model(x))
