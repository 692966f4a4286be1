"""numpy on tensors, traced into the graph (frontend/numpy_calls.py), as Dynamo traces it through
torch._numpy: Tensor.numpy() / np.asarray, ufuncs and reductions, ndarray operators, methods,
attributes and indexing, then torch.from_numpy / torch.as_tensor back. Results (values and
numpy's dtypes: float32 stays float32, Python floats make float64) must equal eager's."""
import numpy as np
import torch

from tests.compiler.frontend.corpus import In, P, T


def ufuncs(x):
    a = x.numpy()
    b = np.exp(np.sin(a)) + np.sqrt(np.abs(a)) - np.tanh(a) * np.log(np.abs(a) + 1)
    return torch.from_numpy(np.add(np.multiply(b, 2), a))


def reductions(x):
    a = np.asarray(x)
    return torch.as_tensor(np.sum(a, axis=0) + np.mean(a) + np.max(a) - np.min(a, axis=1, keepdims=True))


def python_float_makes_float64(x):
    a = x.numpy()
    consts = np.array([0.5, 1.5, 2.5, 3.5])          # float64, as numpy makes it
    return torch.from_numpy(a * 2.0 + consts)


def ndarray_methods_and_attrs(x):
    a = x.numpy()
    b = a.T.reshape(a.shape[1], -1).astype(np.float64)
    n = a.ndim + a.shape[0]
    return torch.from_numpy(b.sum(axis=1) * n), a.dtype == np.float32, a.size


def where_and_compare(x):
    a = x.numpy()
    return torch.from_numpy(np.where(a > 0, a, -a * 0.5))


def matmul_and_index(x):
    a = x.numpy()
    g = a @ a.T
    return torch.from_numpy(np.matmul(g, a)[1:, :2] + a[0, :2])


def numpy_scalar_result(x):
    s = np.sum(x.numpy())              # a numpy scalar (np.float32), as eager
    return x * torch.as_tensor(s), s.dtype == np.float32


def array_returned(x):
    return np.cos(x.numpy()) * 2


def ndarray_argument(a, x):
    b = np.tanh(a) * 2                 # an ndarray passed in: traced as torch.from_numpy(a)
    return torch.from_numpy(b) + x, b


def _array(*shape):
    return In(lambda: torch.randn(*shape).numpy())


PROGRAMS = [
    P(ufuncs),
    P(reductions),
    P(python_float_makes_float64),
    P(ndarray_methods_and_attrs, breaks=0, recompiles=2,
      note="recompiles 2 (Dynamo 1): the symbolic size n in `b.sum(axis=1) * n` is specialized (torch._numpy has no symbolic scalars), so each new size recompiles once more. Dynamo breaks (1 site) at comparing the array's numpy dtype with np.float32; the dtype "
           "is a constant of the traced array here, so the comparison folds (0 breaks)"),
    P(where_and_compare),
    P(matmul_and_index),
    P(numpy_scalar_result, breaks=0,
      note="Dynamo breaks (1 site) at comparing the array's numpy dtype with np.float32; the dtype "
           "is a constant of the traced array here, so the comparison folds (0 breaks)"),
    P(array_returned),
    P(ndarray_argument, [(_array(3, 4), T(3, 4)), (_array(3, 4), T(3, 4)), (_array(5, 4), T(5, 4)),
                         (_array(6, 4), T(6, 4))]),
]
