"""Python patterns of Hugging Face model code that issue 17 needed, in isolation (no
transformers): keyword arguments through decorators, dataclass outputs built through a wrapped
__init__, lru_cache helpers, torch.finfo/iinfo. Each is compared with eager, and its graph and
break counts with what it must be (Dynamo's: one graph, no break)."""
import collections.abc
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


def _check(fn, *args):
    assert _counts(fn, *args) == (1, 0), compiler.explain(fn)(*args)
    compiled = compiler.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(*args), fn(*args))


def test_finfo_iinfo_are_folded():
    def f(x):
        return x.clamp(min=torch.finfo(x.dtype).min / 2) + torch.iinfo(torch.int8).max
    _check(f, torch.randn(4))


@functools.lru_cache
def _cached_scale(n):
    return n * 0.5


def test_lru_cache_wrapper_is_traced_through():
    def f(x):
        return x * _cached_scale(3)
    _check(f, torch.randn(4))


def _marked_constant(fn):
    fn._dynamo_marked_constant = True       # torch._dynamo.assume_constant_result's mark
    return fn


_PROBES = []


@functools.lru_cache
@_marked_constant
def _probe_available():
    _PROBES.append(1)
    return True


def test_constant_result_function_is_called_at_trace_time():
    def f(x):
        return x + 1 if _probe_available() else x - 1
    _check(f, torch.randn(4))


class _View(collections.abc.Sequence):
    """A per-layer view built in forward (Sequence mixin: __iter__ via __getitem__)."""

    def __init__(self, n):
        self._n = n

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if i >= self._n:
            raise IndexError(i)
        return i + 1


class _Cache:
    def __init__(self, view):
        self.layers = [v * 2 for v in view]
        self.size = len(view)


def test_objects_built_in_forward_sequence_view_len_hasattr_is_none():
    def f(x):
        cache = _Cache(_View(3))
        if cache is None or not hasattr(cache, "layers") or hasattr(cache, "missing"):
            return x
        return x * sum(cache.layers) + cache.size
    _check(f, torch.randn(4))


_MOD_SRC = '''
SCALE = {"a": 2.0}

class Helper:
    def __init__(self):
        self.scale = SCALE["a"]
'''


def test_globals_of_another_module_through_a_new_object_are_guarded():
    import sys
    import types
    mod = types.ModuleType("_tt_hf_foreign")
    exec(_MOD_SRC, mod.__dict__)
    sys.modules[mod.__name__] = mod
    Helper = mod.Helper
    try:
        def f(x):
            return x * Helper().scale
        x = torch.randn(4)
        _check(f, x)
        compiled = compiler.compile(f, backend="eager")
        compiled(x)
        mod.SCALE["a"] = 3.0                 # guarded: the change recompiles
        torch.testing.assert_close(compiled(x), x * 3.0)
    finally:
        del sys.modules[mod.__name__]


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight          # tied input/output embeddings

    def forward(self, ids):
        return self.head(self.emb(ids)).logsumexp(-1).mean()


def test_tied_weights_are_one_graph_input_and_get_one_gradient():
    import copy
    for backend in ("eager", "aot_eager"):
        torch.manual_seed(0)
        m = _Tied()
        ref = copy.deepcopy(m)
        ids = torch.randint(0, 10, (2, 5))
        ref(ids).backward()
        compiler.compile(m, backend=backend)(ids).backward()
        torch.testing.assert_close(m.emb.weight.grad, ref.emb.weight.grad)


class _GeluFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(1.702 * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0 + x      # deliberately not the derivative: the Function's own is used


def test_autograd_function_forward_inlined_without_grad_one_node_with_grad():
    def f(x):
        return _GeluFn.apply(x) + x[..., [0], :]
    x = torch.randn(2, 3, 4)
    with torch.no_grad():
        _check(f, x)
    for backend in ("eager", "aot_eager"):
        xg, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
        assert _counts(f, xg) == (1, 0)
        compiler.compile(f, backend=backend)(xg).sum().backward()
        f(xe).sum().backward()
        torch.testing.assert_close(xg.grad, xe.grad)


class _Cfg:
    """A config: plain data behind a Python __getattribute__ (aliases)."""
    attribute_map = {"layers": "decoder_layers"}

    def __init__(self):
        self.decoder_layers = 2
        self.scale = 0.5
        self.kinds = ["full", "sliding"]

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


_CFG = _Cfg()


def test_deepcopy_of_a_config_is_made_at_trace_time_and_guarded_on_the_original():
    import copy

    def f(x):
        c = copy.deepcopy(_CFG)
        c.num_hidden_layers = c.layers + 1
        delattr(c, "decoder_layers")
        if hasattr(c, "decoder_layers"):
            return x
        return x * c.num_hidden_layers * c.scale + len(c.kinds)
    x = torch.randn(4)
    _check(f, x)
    compiled = compiler.compile(f, backend="eager")
    compiled(x)
    _CFG.decoder_layers = 5                 # read through the copy: guarded on the original
    try:
        torch.testing.assert_close(compiled(x), f(x))
    finally:
        _CFG.decoder_layers = 2


import logging  # noqa: E402

_LOGGER = logging.getLogger("tracetorch_test_hf_semantics")


@functools.lru_cache(None)
def _warning_once(self, *args, **kwargs):
    self.warning(*args, **kwargs)


logging.Logger.tt_warning_once = _warning_once       # as transformers installs warning_once


def test_logging_calls_are_deferred_after_the_graph_and_once_stays_once(caplog):
    def f(x):
        _LOGGER.tt_warning_once(f"unrecognized {3}: using the default")
        _LOGGER.info("step")
        return x * 2
    x = torch.randn(4)
    _check(f, x)
    _warning_once.cache_clear()
    caplog.clear()
    compiled = compiler.compile(f, backend="eager")
    with caplog.at_level(logging.INFO, logger=_LOGGER.name):
        for _ in range(3):
            torch.testing.assert_close(compiled(x), x * 2)
    messages = [r.getMessage() for r in caplog.records if r.name == _LOGGER.name]
    assert messages.count("unrecognized 3: using the default") == 1
    assert messages.count("step") == 3


def test_constant_empty_tuple_accumulates_symbolic_items():
    def f(x):
        hidden = ()
        for i in range(3):
            x = x + i
            hidden += (x,)
        return torch.stack(hidden).sum(0)
    _check(f, torch.randn(4))


import typing  # noqa: E402

_VALIDATORS = {typing.Union: lambda v: 2.0, list: lambda v: 3.0}


def test_registry_dict_keyed_by_types_and_typing_forms():
    def f(x):
        validator = _VALIDATORS.get(list)
        return x * validator(x) if validator is not None else x
    x = torch.randn(4)
    _check(f, x)
    compiled = compiler.compile(f, backend="eager")
    compiled(x)
    _VALIDATORS[list] = lambda v: 5.0        # guarded: the new entry is used
    try:
        torch.testing.assert_close(compiled(x), x * 5.0)
    finally:
        _VALIDATORS[list] = lambda v: 3.0
