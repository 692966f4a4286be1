"""numpy on tensors, traced into the graph (as Dynamo does, through torch._numpy).

`t.numpy()` / `np.asarray(t)` give an NDArrayVariable: the tensor holding the array's data,
with numpy's semantics for everything done to it. numpy functions (`np.cos`, `np.sum`, ...),
ndarray operators, methods and indexing are recorded as graph calls of a NumpyOp, which runs
the torch._numpy function of the same name on the tensors seen as torch._numpy ndarrays:
torch._numpy reproduces numpy's result dtypes (float32 stays float32, Python floats make
float64, NumPy 2's NEP 50 promotion: numpy 1.x's value-based casting of scalars differs).
`torch.from_numpy(a)` / `torch.as_tensor(a)` turn it back into a tensor. An array that leaves
the graph (returned, or live across a graph break) is rebuilt at runtime as `tensor.numpy()` (a
numpy scalar as `tensor.numpy()[()]`).

Not traced (a graph break with its reason): in-place changes of an array, arrays passed in
from outside the frame, np.random, numpy functions torch._numpy lacks, and anything that
needs the data in Python (item(), tolist(), bool()).
"""
from __future__ import annotations

import operator
import sys

import torch
from tracetorch.compiler.frontend import dispatch, symbolic
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.source import NumpyTensorSource
from tracetorch.compiler.frontend.symbolic import tensor_shape

# functions that give back an array even when it is 0-d (others give a numpy scalar then)
_ARRAY_RESULT = {"array", "asarray", "asanyarray", "ascontiguousarray", "copy", "reshape",
                 "atleast_1d", "atleast_2d", "atleast_3d", "zeros_like", "ones_like",
                 "empty_like", "full_like", "zeros", "ones", "full", "empty"}
# ndarray methods that change the array in place, or need its data in Python
_METHODS_NOT_TRACED = {"fill", "sort", "resize", "put", "itemset", "setflags", "partition",
                       "item", "tolist", "tobytes", "tofile", "dump", "dumps", "__setitem__",
                       "__array__", "__iadd__", "__isub__", "__imul__", "__itruediv__"}


def _np():
    return sys.modules.get("numpy")


def _tnp():
    import torch._numpy as tnp  # imported on first use: it costs ~0.1 s
    return tnp


def is_numpy_callable(value) -> bool:
    """A top-level numpy function or ufunc that torch._numpy implements (np.cos, np.sum, ...).
    Asked of every value capture wraps: the cheap tests come first, torch._numpy (imported on
    first use) only for numpy's own callables."""
    np = _np()
    if np is None or not callable(value) or isinstance(value, type):
        return False
    if not isinstance(value, np.ufunc) and \
            not str(getattr(value, "__module__", None) or "").startswith("numpy"):
        return False
    name = getattr(value, "__name__", None)
    if not isinstance(name, str) or name.startswith("_") or getattr(np, name, None) is not value:
        return False
    return callable(getattr(_tnp(), name, None))


class _Slot:
    """Where a graph value goes in a NumpyOp's argument template."""

    def __init__(self, i):
        self.i = i


class NumpyOp:
    """The graph target: fn(*template with the slots filled by the node's tensors), the tensors
    seen as torch._numpy ndarrays; the result's ndarrays become tensors again. Constants of the
    call (numpy dtypes and scalars, axes, slices) live in the template, not in the FX node."""

    def __init__(self, fn, name, template):
        self.fn = fn
        self.template = template
        self.__name__ = self.__qualname__ = f"numpy_{name}"

    def __call__(self, *values):
        tnp = _tnp()

        def fill(t):
            if isinstance(t, _Slot):
                v = values[t.i]
                return tnp.ndarray(v) if isinstance(v, torch.Tensor) else v
            if isinstance(t, (list, tuple)):
                return type(t)(fill(i) for i in t)
            if isinstance(t, dict):
                return {k: fill(v) for k, v in t.items()}
            np = _np()
            if np is not None and isinstance(t, np.generic):
                return tnp.asarray(t)        # a numpy scalar: a 0-d array of its dtype
            return t
        args, kwargs = fill(self.template)
        return _to_tensors(self.fn(*args, **kwargs))

    def __repr__(self):
        return self.__name__


def _to_tensors(r):
    tnp = _tnp()
    if isinstance(r, tnp.ndarray):
        return r.tensor
    if isinstance(r, (list, tuple)):
        return type(r)(_to_tensors(i) for i in r)
    return r


class _Method:
    """ndarray.name(*args) / ndarray.name (an attribute such as .T) as a NumpyOp fn."""

    def __init__(self, name, attribute=False):
        self.name = name
        self.attribute = attribute

    def __call__(self, arr, *args, **kwargs):
        member = getattr(arr, self.name)
        return member if self.attribute else member(*args, **kwargs)


def _template(tx, value, slots):
    """The NumpyOp template of a Variable argument; graph values become slots."""
    if isinstance(value, V.NDArrayVariable):
        slots.append(value.tensor)
        return _Slot(len(slots) - 1)
    if isinstance(value, V.TensorVariable):
        _check_convertible(value)
        slots.append(value)
        return _Slot(len(slots) - 1)
    if isinstance(value, V.SymNodeVariable):
        # torch._numpy has no symbolic scalars (its weak-scalar promotion asks the Python
        # type): the value now, guarded, as Python needs it elsewhere
        return _template(tx, symbolic.specialize(tx, value), slots)
    if isinstance(value, V.SliceVariable):
        return slice(*[_template(tx, p, slots) for p in value.parts])
    if isinstance(value, V.BaseListVariable):
        return (list if isinstance(value, V.ListVariable) else tuple)(
            _template(tx, i, slots) for i in value.items)
    if value.is_constant():
        c = value.as_constant()
        np = _np()
        if isinstance(c, type) and np is not None and issubclass(c, np.generic):
            return _tnp().dtype(c.__name__)          # np.float32 as a dtype argument
        if np is not None and isinstance(c, np.dtype):
            return _tnp().dtype(c.name)
        return c
    raise Unsupported(f"numpy call with argument {value!r}")


def _check_convertible(t):
    ex = t.example
    if ex.requires_grad:
        raise Unsupported("numpy of a tensor that requires grad (eager raises: use detach())")
    if ex.device.type != "cpu":
        raise Unsupported(f"numpy of a tensor on {ex.device.type} (eager raises)")


def record(tx, fn, name, args, kwargs, array_result=False):
    """Record NumpyOp(fn) on Variable args; the result as NDArrayVariable(s)."""
    slots = []
    template = (tuple(_template(tx, a, slots) for a in args),
                {k: _template(tx, v, slots) for k, v in kwargs.items()})
    result = tx.output.call("call_function", NumpyOp(fn, name, template), tuple(slots), {})
    return _as_arrays(result, array_result)


def _as_arrays(result, array_result):
    if isinstance(result, V.TensorVariable):
        return V.NDArrayVariable(result, scalar=not array_result and result.example.dim() == 0)
    if isinstance(result, V.BaseListVariable):
        return type(result)([_as_arrays(i, array_result) for i in result.items])
    return result


def is_ndarray(value) -> bool:
    np = _np()
    return np is not None and type(value) is np.ndarray


def wrap_ndarray(tx, value, source):
    """An array read from the frame (e.g. one that crossed a graph break into a resume
    function): traced as its tensor view, a graph input read as torch.from_numpy(source)."""
    try:
        tensor = torch.from_numpy(value)
    except (TypeError, ValueError) as e:      # object dtype, negative strides, ...
        raise Unsupported(f"numpy array input that torch.from_numpy rejects ({e})") from None
    return V.NDArrayVariable(tx.output.add_input(tensor, NumpyTensorSource(source)))


def tensor_numpy(tx, t, args, kwargs):
    """Tensor.numpy(): the same data as an ndarray (no copy, as eager)."""
    if args or kwargs:
        raise Unsupported("Tensor.numpy(force=...)")
    _check_convertible(t)
    return V.NDArrayVariable(t)


@dispatch.call_function.register(V.NumpyFunctionVariable)
def _call_numpy_function(tx, fn, args, kwargs):
    return call(tx, fn.fn, args, kwargs)


def call(tx, fn, args, kwargs):
    """np.<name>(...) for a top-level numpy function or ufunc."""
    name = fn.__name__
    graph_args = [a for a in list(args) + list(kwargs.values()) if _has_graph_value(a)]
    if not graph_args:
        try:
            cargs = [_constant(a) for a in args]
            ckwargs = {k: _constant(v) for k, v in kwargs.items()}
        except _NotConstant:
            raise Unsupported(f"np.{name} with arguments {args!r}") from None
        try:
            value = fn(*cargs, **ckwargs)
        except Exception as e:
            raise Unsupported(f"np.{name} raised {type(e).__name__} on constants") from None
        np = _np()
        if not isinstance(value, np.ndarray):
            return V.ConstantVariable(value)        # a numpy scalar or Python value: immutable
        # a new array of constants (np.array([1.0, 2.0])): made in the graph, numpy's dtype
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    if out is not None and not (out.is_constant() and out.as_constant() is None):
        raise Unsupported(f"np.{name}(out=...) writes into an existing array")
    return record(tx, getattr(_tnp(), name), name, args, kwargs, array_result=name in _ARRAY_RESULT)


class _NotConstant(Exception):
    pass


def _constant(v):
    """The Python value of a constant Variable or a list/tuple of them."""
    if isinstance(v, V.BaseListVariable):
        return (list if isinstance(v, V.ListVariable) else tuple)(_constant(i) for i in v.items)
    if v.is_constant():
        return v.as_constant()
    raise _NotConstant


def _has_graph_value(v):
    if isinstance(v, (V.NDArrayVariable, V.TensorVariable, V.SymNodeVariable)):
        return True
    if isinstance(v, V.BaseListVariable):
        return any(_has_graph_value(i) for i in v.items)
    return False


@dispatch.get_attr.register(V.NDArrayVariable)
def get_attr(tx, arr, name):
    np = _np()
    ex = arr.tensor.example
    if name == "shape":
        return V.TupleVariable(tensor_shape(tx, arr.tensor).items)
    if name == "ndim":
        return V.ConstantVariable(ex.dim())
    if name == "size" and isinstance(ex.numel(), int):
        return V.ConstantVariable(ex.numel())
    if name == "dtype":
        return V.ConstantVariable(np.dtype(_tnp().ndarray(ex).dtype.name))
    if name == "itemsize":
        return V.ConstantVariable(ex.element_size())
    if name in ("T", "real", "imag", "mT"):
        return record(tx, _Method(name, attribute=True), name, [arr], {}, array_result=True)
    if name.startswith("_") or name in _METHODS_NOT_TRACED:
        raise Unsupported(f"numpy ndarray.{name} (changes the array in place, or needs its data "
                          "in Python)")
    if callable(getattr(_tnp().ndarray, name, None)):
        return V.MethodVariable(arr, name)
    raise Unsupported(f"numpy ndarray attribute {name} (not in torch._numpy)")


@dispatch.call_method.register(V.NDArrayVariable)
def call_method(tx, arr, name, args, kwargs):
    if name in _METHODS_NOT_TRACED or name.startswith("__") and name not in ("__getitem__",):
        raise Unsupported(f"numpy ndarray.{name}() (changes the array in place, or needs its data "
                          "in Python)")
    return record(tx, _Method(name), name, [arr, *args], kwargs, array_result=name in _ARRAY_RESULT)


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
        "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
        "&": operator.and_, "|": operator.or_, "^": operator.xor, "<": operator.lt,
        "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
        ">=": operator.ge, "neg": operator.neg, "pos": operator.pos, "invert": operator.invert,
        "abs": operator.abs}


def operator_call(tx, symbol, operands):
    """An operator with an ndarray operand; the other a constant or another ndarray."""
    fn = _OPS.get(symbol)
    if fn is None:
        raise Unsupported(f"operator {symbol} on a numpy array (in place, or not modelled)")
    for o in operands:
        if not (isinstance(o, (V.NDArrayVariable, V.SymNodeVariable)) or o.is_constant()):
            raise Unsupported(f"operator {symbol} between a numpy array and {o!r}")
    return record(tx, fn, fn.__name__, operands, {})


@dispatch.get_item.register(V.NDArrayVariable)
def get_item(tx, arr, key):
    return record(tx, operator.getitem, "getitem", [arr, key], {})


def torch_call(tx, fn, args, kwargs):
    """torch.from_numpy(a) / torch.as_tensor(a[, dtype]): the array's tensor (None if fn is
    another torch function: the caller breaks)."""
    if fn is torch.from_numpy and len(args) == 1 and not kwargs:
        arr = args[0]
        if arr.scalar:
            raise Unsupported("torch.from_numpy of a numpy scalar (eager raises TypeError)")
        # from_numpy shares the array's memory: a view of its tensor
        return tx.output.call("call_method", "view_as", (arr.tensor, arr.tensor), {})
    if fn is torch.as_tensor and args and set(kwargs) <= {"dtype"} and len(args) <= 2:
        return dispatch.call_function(tx, V.TorchFunctionVariable(fn), [args[0].tensor, *args[1:]], kwargs)
    return None


def as_ndarray(t):
    """Runtime: the array a traced NDArrayVariable stands for (its tensor's data, shared)."""
    return t.numpy()


def as_numpy_scalar(t):
    """Runtime: the numpy scalar (np.float32(...), ...) a traced 0-d result stands for."""
    return t.numpy()[()]


@dispatch.reconstruct.register(V.NDArrayVariable)
def reconstruct(cg, arr, side_effects):
    """Emit as_ndarray(<tensor>) / as_numpy_scalar(<tensor>)."""
    src = arr.tensor.source
    if isinstance(src, NumpyTensorSource) and arr.tensor.node.op == "placeholder" and not arr.scalar:
        # an array read from the frame, unchanged: the same object, not a new view of it
        src.base.reconstruct(cg)
        return src.base.render()
    helper = as_numpy_scalar if arr.scalar else as_ndarray
    text = []
    cg.call_const(helper, lambda: text.append(cg.reconstruct(arr.tensor, side_effects)), 1)
    return f"{text[0]}.numpy()" + ("[()]" if arr.scalar else "")


__all__ = ["is_numpy_callable", "NumpyOp", "tensor_numpy", "call", "get_attr", "call_method",
           "operator_call", "get_item", "torch_call"]
