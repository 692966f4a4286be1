"""Tensor operators, methods, torch.* and torch.nn.functional.* calls."""
import torch
import torch.nn.functional as F

from tests.compiler.frontend.corpus import P, STD, STD2, T, shapes


def add(x, y): return x + y
def sub_mul(x, y): return (x - y) * y
def div(x, y): return x / (y.abs() + 1)
def floordiv_mod(x): return (x * 10) // 3 + (x * 10) % 3
def pow_neg(x): return -(x ** 2) + x.pow(3)
def matmul_op(x): return x @ x.t()
def compare(x, y): return (x > y).float() + (x <= 0).float()
def bitwise_bool(x): return ((x > 0) & (x < 1)) | ~(x > -1)
def sin_cos(x): return torch.sin(x) + torch.cos(x)
def exp_log(x): return torch.log(torch.exp(x) + 1)
def methods_chain(x): return x.relu().sigmoid().tanh()
def clamp(x): return x.clamp(min=-0.5, max=0.5)
def where(x): return torch.where(x > 0, x, torch.zeros_like(x))
def reductions(x): return x.sum() + x.mean() + x.amax()
def reduce_dim(x): return x.sum(dim=1, keepdim=True) - x.mean(-1, keepdim=True)
def argmax(x): return x.argmax(dim=1)
def softmax(x): return F.softmax(x, dim=-1)
def log_softmax(x): return torch.log_softmax(x, dim=1)
def gelu_silu(x): return F.gelu(x) + F.silu(x)
def layer_norm(x): return F.layer_norm(x, (4,))
def dropout_eval(x): return F.dropout(x, p=0.5, training=False)
def linear_fn(x, w): return F.linear(x, w)
def view_reshape(x): return x.reshape(-1).view(x.shape[0], -1)
def permute(x): return x.unsqueeze(0).permute(2, 0, 1).contiguous()
def transpose(x): return x.transpose(0, 1) * 2
def flatten(x): return torch.flatten(x.unsqueeze(0), 1)
def cat(x, y): return torch.cat([x, y], dim=0)
def stack(x, y): return torch.stack((x, y), dim=1)
def split(x): return torch.split(x, 2, dim=1)[0] * 3
def chunk(x): a, b = x.chunk(2, dim=1); return a - b
def index_int(x): return x[0] + x[-1]
def index_slice(x): return x[1:, ::2]
def index_tensor(x): return x[x > 0].sum()
def index_none(x): return x[None, :, None]
def setitem(x): y = x.clone(); y[0] = 0; return y
def inplace(x): y = x.clone(); y.add_(1); y.mul_(2); return y
def mutate_input(x): x.add_(1); return x * 2
def zeros_ones(x): return torch.zeros(3, 4) + torch.ones_like(x) + torch.full((3, 4), 2.0)
def arange(x): return x + torch.arange(4)
def expand(x): return x[:, :1].expand(-1, 4) + x
def dtype_cast(x): return x.to(torch.float64).sum().float() + x.int().float().sum()
def type_as(x, y): return x.type_as(y) + y
def masked_fill(x): return x.masked_fill(x < 0, 0.0)
def cumsum(x): return torch.cumsum(x, dim=1)
def topk(x): return torch.topk(x, 2, dim=1).values
def sort(x): v, i = torch.sort(x, dim=1); return v, i
def einsum(x): return torch.einsum("ij,kj->ik", x, x)
def bmm(x): return torch.bmm(x.unsqueeze(0), x.t().unsqueeze(0))
def conv1d(x): return F.conv1d(x.unsqueeze(0), torch.ones(2, 3, 2))
def pad(x): return F.pad(x, (1, 1))
def norm(x): return torch.linalg.vector_norm(x, dim=1)
def int_tensors(x): return (x * 2) // 3
def bool_tensors(x): return x.logical_not() | x
def mse(x, y): return F.mse_loss(x, y)
def cross_entropy(x): return F.cross_entropy(x, torch.zeros(x.shape[0], dtype=torch.long))
def scalar_tensor_mix(x): return x * 2.5 + 1 - torch.tensor(3.0)
def sum_requires_grad(x): return (x * x).sum()

PROGRAMS = [
    P(add, STD2), P(sub_mul, STD2), P(div, STD2), P(floordiv_mod), P(pow_neg), P(matmul_op),
    P(compare, STD2), P(bitwise_bool), P(sin_cos), P(exp_log), P(methods_chain), P(clamp),
    P(where), P(reductions), P(reduce_dim), P(argmax), P(softmax), P(log_softmax), P(gelu_silu),
    P(layer_norm), P(dropout_eval),
    P(linear_fn, [(T(3, 4), T(5, 4)), (T(3, 4), T(5, 4)), (T(6, 4), T(5, 4)), (T(7, 4), T(5, 4))], recompiles=1),
    P(view_reshape), P(permute), P(transpose), P(flatten), P(cat, STD2), P(stack, STD2), P(split),
    P(chunk), P(index_int), P(index_slice), P(index_tensor), P(index_none), P(setitem), P(inplace),
    P(mutate_input), P(zeros_ones, shapes((3, 4), (3, 4))), P(arange), P(expand), P(dtype_cast),
    P(type_as, [(T(3, 4, dtype=torch.int64), T(3, 4))] * 3), P(masked_fill), P(cumsum), P(topk),
    P(sort), P(einsum), P(bmm), P(conv1d, shapes((3, 5), (3, 5), (3, 8), (3, 9))), P(pad),
    P(norm), P(int_tensors, [(T(3, 4, dtype=torch.int64),)] * 3),
    P(bool_tensors, [(T(3, 4, dtype=torch.bool),)] * 3), P(mse, STD2), P(cross_entropy),
    P(scalar_tensor_mix), P(sum_requires_grad, [(T(3, 4, requires_grad=True),)] * 3),
]
