"""Python patterns of Hugging Face model code that issue 17 needed, in isolation (no
transformers): keyword arguments through decorators, dataclass outputs built through a wrapped
__init__, lru_cache helpers, torch.finfo/iinfo. Each is compared with eager, and its graph and
break counts with what it must be (Dynamo's: one graph, no break)."""
import dataclasses
import functools

import torch

from tracetorch import compiler


def _counts(fn, *args, **kwargs):
    report = compiler.explain(fn)(*args, **kwargs)
    return report.graph_count, report.graph_break_count


def _pop_return_dict(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        return_dict = kwargs.pop("return_dict", True)
        out = func(self, *args, **kwargs)
        return out if return_dict else (out,)
    return wrapper


class _Opaque:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


class KwModel(torch.nn.Module):
    @_pop_return_dict
    def forward(self, input_ids=None, attention_mask=None):
        return input_ids * 2 + attention_mask


class KwModelWithBreak(torch.nn.Module):
    @_pop_return_dict
    def forward(self, input_ids=None, attention_mask=None):
        y = input_ids * 2
        torch._dynamo.graph_break()
        return y + attention_mask


def test_keyword_call_through_a_kwargs_popping_decorator():
    """The **kwargs dict the decorator mutates is replayed with contents built before it is
    cleared (they are read from the dict itself)."""
    a, b = torch.randn(3), torch.randn(3)
    for cls in (KwModel, KwModelWithBreak):
        m = cls()
        compiled = compiler.compile(m, backend="eager")
        for kw in ({}, {"return_dict": False}):
            got = compiled(input_ids=a, attention_mask=b, **kw)
            expected = m(input_ids=a, attention_mask=b, **kw)
            torch.testing.assert_close(got, expected)
    assert _counts(KwModel(), input_ids=a, attention_mask=b) == (1, 0)
