"""Regression tests of issue 20's root-cause classes: each program once found a wrong result, a
crash or a whole-graph eager run. Every case compares compiled with eager (outputs, the inputs
after the call, the identity of returned inputs) under torch.compile(backend=compiler.backend),
with the C++ code generator and with Triton under the interpreter, and under compiler.compile
(our frontend), and checks that no graph ran
eagerly as a whole (events graph_runs_eagerly / aot_runs_eagerly), except where the Triton
interpreter lacks the function (runtime/triton_interp_libdevice.py, INTERP_MISSING)."""
import logging
import os

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from tracetorch import compiler, logs  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend.codegen.triton_ops import INTERP_MISSING  # noqa: E402


def half_sum_read_twice(x):                 # a float16 sum kept in a local was read unrounded by one
    s = torch.rsqrt(torch.erf(x)).nansum()  # of std's two reads: (s - round(s))^2 / 0 = inf, eager NaN
    return torch.maximum(x, s.std(0)), torch.maximum(x, s.bfloat16().std(0).half())


def write_through_view_of_expand(x):       # a write into a view of an expand of an intermediate was
    v = torch.sqrt(x)                        # reflected into v as v + (new - v): NaN where v was NaN
    t = v.t()
    e = v.expand(4, *v.shape)
    e[1:3][0][0] = 7.0
    e.narrow(0, 2, 1).squeeze(0)[:, 1].mul_(2)
    e.unbind(0)[3].index_fill_(0, torch.tensor([0]), 0.1)
    return t, e + 0


def setitem_then_write_into_expand(a):     # fuzz 3623: the slice assignment was taken for a new view
    v5 = (2.5 * a).logsumexp(0)              # of the expand, rebuilt as setitem's None: the next
    v6 = v5.expand(2, *v5.shape)             # write into the expand failed to trace and the whole
    v6[::2] = v6[::2]                        # graph ran eagerly
    v6.masked_fill_(v6 > 0, 0.1)
    return v6, v5


def product_of_an_empty_slice(a0, a1, a2):   # fuzz 6423: fusion paired loops with a dim of size 0
    v2 = a2[1:] + 1e+20                          # (`n % 0`); the backend raised and the graph ran
    v7 = (v2.prod() != a0) == a1.argmin()        # eagerly as a whole
    return torch.div(v7, 1e+20 + a1, rounding_mode="floor"),


def bf16_subnormals(x, s):                  # the Triton interpreter's bfloat16 casts flushed
    m = F.mish(x)                            # subnormals to 0 (fuzz 370497: mish(-96) is -1.8e-40,
    return m, m.to(torch.bool), s * 0.5, s + 0 # a True where the flushed value gave False)


def float_to_narrow_ints(x):                # ATen casts float -> uint8 through int64: -1.0 is 255
    y = x * 1                                    # (a GPU's direct cast saturates to 0); int8 and
    return y.to(torch.uint8), y.to(torch.int8), y.to(torch.int16)   # int16 wrap through int32


def unbind_of_flattened(x):                  # at dynamic sizes unbind splits s0 * s1 into chunks
    v = (x // 0.001).view(-1)                    # whose size did not simplify to 1, so squeeze kept
    s = x.sum().squeeze(0)                       # the dim and its index ran out (fuzz 430256); a 0-d
    return v.unbind(0)[1] * v.unbind(0)[0] + s,  # tensor's squeeze(0) keeps it (fuzz 440255)


def int_power_of_a_size(x):                  # `n ** 2` of a dynamic size in the graph made the
    n = x.shape[0]                              # whole graph run eagerly (fuzz 430866)
    return x.reshape(-1)[: n ** 2 - 1] * 2,


def clamp_signed_zeros(x):                   # clamp_min(-0.0, 0) is -0.0 in eager (x itself where it
    return 1 / x.clamp_min(0), 1 / x.clamp(0, 1), 1 / x.clamp_max(-0.0), 1 / torch.relu(x)  # equals the
                                                 # bound); maximum gave +0.0: atan2 flipped (fuzz 441355)


def returned_views_of_intermediates(x):      # eager returns views of intermediates with their
    v = 1e20 / (x.reshape(-1) + 1)               # strides: `v[::2]` behind an alias came back dense
    w = (x * 2).t()                              # (fuzz 431942), a split piece along dim 1 too
    return v[::2].transpose(0, -1), w.split(2, 1)[-1]


def fmin_fmax_signed_zeros(a, b):          # fmin/fmax of equal operands give the first (eager), and
    return 1 / torch.fmin(a, b), 1 / torch.fmax(a, b), 1 / torch.fmin(b, a)   # 1 / x shows the sign


def empty_after_matmul(x):                 # at a later call's size 0 the kernel's indices divided by
    return (2.5 - x @ x.transpose(-1, -2)) * 2,  # 0 and could not be printed (fuzz 381656)


def reshape_at_size_zero(x):               # a reshape's index arithmetic divided by a size 0 at a
    v = x.repeat(2, 1, 1, 1).squeeze()       # later call's sizes ("Invalid NaN comparison", fuzz 390068)
    return torch.where(v > 0, v, v.abs()).sinh(),


def writeback_before_reader(a, s):          # 1: the write-back of s ran before a kernel reading old s
    s.add_(s)
    a.add_(s)


def fused_output_overwritten(x):            # 2: the row cache kept v in an output overwritten later
    v = torch.hypot(torch.stack([x, x], 1), torch.ones(()))
    return v.mean() + v, v


def bool_add(a):                            # 3: bool + bool renormalized to bool
    return (a + a).float(), torch.add(a, a, alpha=2).float(), (a * a).float()


def bool_add_alpha(a, b):                   # 3: eager casts alpha to bool first (-1 is True)
    return torch.add(a, b, alpha=-1), torch.add(a, b, alpha=0), torch.add(a, b, alpha=-1).float()


def float_floor_division(a, b):             # 4: fmod-based floor division
    return a // 0.1, torch.div(a, b, rounding_mode="floor"), torch.floor_divide(b, a)


def type_as_mutated(a, b):                  # 5: type_as to the same dtype is an alias
    a.type_as(b).add_(b)
    return a


def type_as_read_after_mutation(a):         # 5
    v = a.type_as(a)
    a.div_(2)
    return v


def fma_log_softmax(x):                     # 7: no FMA contraction in C++
    return torch.log_softmax(x * 0.001, 0)


def negative_zero_through_int(x):           # 8: (float)(int)x is +0.0
    return 1.0 / x.to(torch.int32).to(x.dtype)


def fmod_remainder(a):                      # 9: exact fmod under the interpreter
    return torch.fmod(a, 0.1), torch.remainder(a, 0.1), torch.remainder(-a, 0.3)


def bfloat16_casts(a):                      # 10: round-to-nearest bf16 from float32 and float64
    return a.to(torch.bfloat16).float(), a.double().to(torch.bfloat16).float(), (a * 3).bfloat16()


def std_overflow(a):                        # 11: var/std accumulate in double on CPU
    return a.std(), a.var(), a.var(0, keepdim=True)


def scalar_pointer_block_mask(x):           # 12: a masked load of one element
    x[::3] = 0.5
    return x


def index_select_cat_slice(x, i):           # 12
    return torch.cat([torch.index_select(x, 0, i), x])[:1]


def inplace_on_expanded(x):                 # 13: zero_ on a stride-0 input
    x.zero_()
    return x + 1


def sgn_nan(x):                             # sign(NaN) is 0 on CPU
    return torch.sgn(x), torch.sign(x)


def uint8_negation(x):                      # -x wraps on uint8
    return x < -x, -x


def cat_view_slice_flip(a):                 # index arithmetic stays non-negative at new sizes
    v = (a > 0).to(torch.int16)
    return torch.cat([v.flatten(), v.flatten()]).view(-1, 1)[1:].flip(0)


def zero_size_half_reductions(x):           # an empty fp16 reduction kept its lanes masked
    return x.sum(), x.prod(), x.any()


def inplace_returns_input(x, y):            # x.add_(y) is x
    return x.add_(y)


def strided_slices(x):                      # sizes (s0 + 2) // 3 reach the index printers
    return x[::3] * 2, x[::2].sum(0)


def sym_max_size(x):                        # max(size, 3) in the graph
    return x.new_zeros(max(x.shape[0], 3)) + 1


def half_rounded_before_cast(a):            # a bf16 value is rounded before it becomes an int
    return torch.pow(a, 8).to(torch.int32), (a * 3).sum()


def transpose_input_in_place(a):           # in-place metadata ops run as ATen ops (not the graph)
    a.t_()
    return a + 1


def unsqueeze_input_in_place(a):
    a.unsqueeze_(0)
    return a * 2, a


def returned_views(a):                      # views of computed values keep eager's strides
    return (a * 2).expand(3, *a.shape), (a + 1)[:, ::2], (a - 1).t()


def empty_strided_kept(r):                  # an empty_strided output keeps its requested strides
    e = torch.empty_strided((3, 4), (1, 3))
    e[:] = r
    return e


def channels_last_cat(a, b):                # a cat of channels-last results stays channels-last
    return torch.cat([a * 2, b + 1], 1)


def float_to_int_out_of_range(x):          # NaN/inf/huge -> int as ATen converts on x86
    return x.to(torch.int64), x.to(torch.int32), x.to(torch.int8), x.to(torch.uint8)


def index_fill_input(a):                   # index_fill_ at dynamic sizes traced (not run eagerly)
    return a.index_fill_(0, torch.tensor([0]), 0.001)


def unsigned_clamp_negative_bound(x):      # the bound wraps into uint8 (eager: -2 is 254)
    return torch.clamp(x, min=-2), torch.clamp(x, -2, 3)


def half_scalar_operands(x):               # scalars as eager's CPU kernels take them per op
    return x + 0.1001, x - 0.1001, x % 0.1001, torch.fmod(x, 0.1001), 0.1001 - x, x * 0.1001, x / 0.1001, 1e20 % x


def std_of_huge_values(x):                  # std's root in double: finite where var overflows
    return x.std(), x.std(0), torch.std_mean(x, 0)


def expanded_input_partial_write(a, b):     # a write to one row of an expanded input reaches every row
    a[-1:].fill_(0.5)
    b[0] = -1
    return torch.hypot(a, b.float()), a * 1


def write_into_expanded_view(a, b):         # a write into an expand inside the graph reaches its source once
    v = a.expand(2, *a.shape)
    v.masked_fill_(v > 0, -1)
    w = (b * 2).expand(3, *b.shape)
    w.masked_fill_(w < 0, 0.5)
    return v, w + 1, a


def invariant_divisor_in_reduction(a):     # a / 0.1 inside a reduction loop divides (no reciprocal)
    v = a / 0.1
    return v, v.norm(-3, keepdim=True), 1e20 % v, a / 4.0


def pointwise_keeps_input_order(x):         # results follow a transposed operand's order at dynamic sizes too
    y = x.t() * 2
    return y, (x.t() + 1)[:, ::2], torch.exp(y) + x.t()


def contiguous_eager_kernels(x):           # ATen allocates these contiguous whatever x's order
    return torch.nn.functional.logsigmoid(x.t()), 0.5 ** x.t(), (2 ** x.t()).t()


def mixed_layout_operands(a, b):            # TensorIterator's order where the fake value's differs
    return a // b, b // a, torch.div(a, b, rounding_mode="floor"), torch.copysign(a, b), torch.copysign(b, a)


def mixed_layout_order_carried(a):          # a result in eager's order is read by later pointwise ops
    b = a.abs() + 0.5
    t = torch.empty_strided(a.shape, (1, a.shape[0]))
    t[:] = a
    v = torch.div(t, b, rounding_mode="floor")
    w = v.to(torch.float32)
    v.clamp_min_(0)
    return w, v * 2, torch.copysign(t, b) + 1


def mixed_layout_order_written(a, b):      # eager's order kept through a write into a slice of the result
    v = torch.remainder(a // b, a // b)
    v[1:].addcmul_(v[0] % 0.5, v[0] % 0.5, value=0.5)
    return v.unbind(0)[0], v[1:]


def signed_overflow_wraps(x):               # C++ -fwrapv: GCC took an index (>= 0) to the power 49 to stay
    i = x.argmin()                            # >= 0, and sign(i ^ i ** 49) came out 0 (fuzz 480784)
    return torch.sgn(i ^ torch.pow(i, i)), (i + 2 ** 62) * 4 < 0


def scan_of_zero_length(x):                 # a scan along an empty dim (the sequential scan had no value)
    v = (x * 2).diagonal()
    return torch.cumprod(v, -2), torch.cumsum(v + 1, -2)


def shared_view_returned(a):                # a view read twice is a view of the stored value
    r = torch.nn.functional.leaky_relu(a)
    v = torch.cat([r, r * 2], 0)
    w = v.expand(2, *v.shape)
    return w, torch.cos(w).sum()


def relu_negative_zero(x):                  # relu(-0.0) is -0.0 on CPU (eager keeps x unless x < 0)
    return torch.relu(x), torch.signbit(torch.relu(x)), torch.atan2(torch.relu(x), -torch.ones_like(x))


def linspace_rounding_then_floor(a):         # ATen's linspace rounding, kept: one ulp flips the floor
    v0 = torch.linspace(0, 1, a.numel() + 1)
    v3 = v0 % v0.flip(0)
    return torch.full_like(v0, 1.5) // v3, torch.logspace(-3, 2, a.numel() + 3)


def returned_input_kept_through_no_op_views(a, b):   # contiguous()/flatten() of the input are the input
    a.squeeze_()
    a.div_(2)
    return a.contiguous(), b.flatten()


def inplace_refs_at_dynamic_sizes(a):       # in-place ops whose references fail at symbolic sizes
    v = a * 3
    v.clamp_(-1, 1)
    v.clamp_min_(-0.5)
    v.square_()
    w = a.clone()
    w.nan_to_num_()
    w.floor_divide_(0.3)
    w.masked_fill_(w > 0, v[0, 0])
    return v, w


def scan_overflow_then_zero(x):             # CPU scans accumulate float32 in double (ATen's acc_type)
    return torch.cumprod(x, 0), torch.cumsum(x * 1e19, 0) - torch.cumsum(x * 1e19, 0).flip(0)


def scan_order_under_cancellation(x):      # a short scan combines in eager's order
    return torch.cumsum(x, 0), torch.cumsum(x.half(), 0), torch.cumprod(x[:4], 0)


def empty_integer_softmax(a):               # the decomposition's -inf fill in an integer dtype
    return torch.softmax(a, 0), a * 2


def repeat_of_transposed(x):                # ATen's repeat allocates contiguous (the decomposition kept x's order)
    return torch.clamp(x.t().repeat(2, 1), min=-2), x.t().repeat(1, 2, 1)


def _column_major(x):
    t = torch.empty_strided(x.shape, torch.empty(x.shape[::-1]).permute(*reversed(range(x.dim()))).stride())
    t[:] = x
    return t


def rank_broadcast_order(a):                # a lower-rank operand's new dims do not vote (TensorIterator)
    f = torch.empty_strided((1, 1, 1, a.shape[1]), (1, 1, 1, 1))
    f[:] = a[:1]
    b = a > 0
    return b % f, a * f, torch.where(b, f, a), (f <= a.sum(0)).float()


def strided_slice_at_new_sizes(a):          # a column-major x[::2] keeps its order after the recompile
    return torch.clamp(_column_major(a)[::2], -2, 0), torch.nan_to_num(_column_major(a))[1::3] + 1


def alpha_fused(a, b):                      # a + alpha * b rounds once on CPU (ATen's fma)
    return a.sub(b, alpha=2), (-a).add(b, alpha=2), a.bfloat16().sub(b, alpha=2), a.add(b, alpha=0.1)


CASES = {
    "1_writeback_order": (writeback_before_reader, lambda: [torch.zeros(3), torch.tensor(1.)]),
    "2_output_overwritten": (fused_output_overwritten, lambda: [torch.tensor([1., 2.])]),
    "3_bool_add": (bool_add, lambda: [torch.tensor([True, False, True])]),
    "3_bool_add_alpha": (bool_add_alpha, lambda: [torch.tensor([True, False, True, False]),
                                                  torch.tensor([True, True, False, False])]),
    "4_floor_division": (float_floor_division, lambda: [torch.tensor([1.0, -1.0, 0.3, 7.5, -0.0]),
                                                      torch.tensor([0.1, 0.1, -0.1, 2.0, 3.0])]),
    "5_type_as_mutated": (type_as_mutated, lambda: [torch.randn(3), torch.randn(3)]),
    "5_type_as_read_after": (type_as_read_after_mutation, lambda: [torch.randn(3)]),
    "7_fma": (fma_log_softmax, lambda: [torch.tensor([1e30, 1.0, 2.0])]),
    "8_negative_zero": (negative_zero_through_int, lambda: [torch.tensor([-0.3, 0.3, 2.5, -0.9])]),
    "9_fmod": (fmod_remainder, lambda: [torch.tensor([1.0, -1.0, 0.35, 5.0])]),
    "10_bf16_casts": (bfloat16_casts, lambda: [torch.tensor([1.00390625, 3.14159, 1e-3, 1.01171875, -2.99])]),
    "11_std_overflow": (std_overflow, lambda: [torch.tensor([3e19, 0., 0.])]),
    "12_scalar_pointer": (scalar_pointer_block_mask, lambda: [torch.randn(1)]),
    "12_index_select_cat": (index_select_cat_slice, lambda: [torch.randn(1), torch.tensor([0])]),
    "13_expanded_inplace": (inplace_on_expanded, lambda: [torch.randn(1).expand(4)]),
    "sgn_nan": (sgn_nan, lambda: [torch.tensor([float("nan"), -1.0, 0.0, 2.0])]),
    "uint8_neg": (uint8_negation, lambda: [torch.tensor([1, 0, 200, 255], dtype=torch.uint8)]),
    "cat_view_slice_flip": (cat_view_slice_flip, lambda: [torch.randn(8, 3)]),
    "zero_size_fp16": (zero_size_half_reductions, lambda: [torch.zeros(0, dtype=torch.float16)]),
    "inplace_returns_input": (inplace_returns_input, lambda: [torch.randn(3), torch.randn(3)]),
    "strided_slices": (strided_slices, lambda: [torch.randn(7, 3)]),
    "sym_max": (sym_max_size, lambda: [torch.randn(5)]),
    "half_before_cast": (half_rounded_before_cast, lambda: [torch.tensor([3.3, 4.1, 2.7]).bfloat16()]),
    "returned_views": (returned_views, lambda: [torch.randn(4, 5)]),
    "empty_strided": (empty_strided_kept, lambda: [torch.randn(3, 4)]),
    "channels_last_cat": (channels_last_cat, lambda: [torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last),
                                                      torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)]),
    "float_to_int": (float_to_int_out_of_range, lambda: [torch.tensor([float("inf"), float("-inf"), float("nan"),
                                                                     3e10, -3e10, 2.7, -2.7, 300.5, -129.5, 1e20])]),
    "index_fill_": (index_fill_input, lambda: [torch.randn(4, 3)]),
    "uint8_clamp": (unsigned_clamp_negative_bound, lambda: [torch.tensor([0, 1, 3, 200, 255], dtype=torch.uint8)]),
    "half_scalars": (half_scalar_operands, lambda: [torch.randn(300).half()]),
    "bf16_scalars": (half_scalar_operands, lambda: [torch.randn(300).bfloat16()]),
    "std_huge": (std_of_huge_values, lambda: [torch.tensor([[3.4e38, 0.0], [1.0, -3e38], [2.0, 5.0]])]),
    "t_input": (transpose_input_in_place, lambda: [torch.randn(3, 4)]),
    "unsqueeze_input": (unsqueeze_input_in_place, lambda: [torch.randn(3, 4)]),
    "expanded_partial_write": (expanded_input_partial_write,
                               lambda: [torch.randn(1, 3).expand(4, 3),
                                        torch.tensor([True, False, True]).expand(4, 3)]),
    "expanded_view_write": (write_into_expanded_view, lambda: [torch.randint(-9, 9, (3, 7)), torch.randn(3, 7)]),
    "invariant_divisor": (invariant_divisor_in_reduction,
                          lambda: [torch.tensor([-28006467712617284, 3 ** 39, 7, 123456789123, -3 ** 38,
                                                 5 ** 27, 10 ** 18 + 7, 2 ** 62 - 1])]),
    "pointwise_input_order": (pointwise_keeps_input_order, lambda: [torch.randn(4, 6)]),
    "contiguous_eager_kernels": (contiguous_eager_kernels, lambda: [torch.randn(4, 6)]),
    "mixed_layout_operands": (mixed_layout_operands,
                              lambda: [torch.randn(3, 4, 8), torch.randn(8, 4, 3).permute(2, 1, 0)]),
    "mixed_layout_carried": (mixed_layout_order_carried, lambda: [torch.randn(5, 13)]),
    "signed_overflow": (signed_overflow_wraps, lambda: [torch.ones(60).index_fill_(0, torch.tensor([49]), -1.0)]),
    "mixed_layout_written": (mixed_layout_order_written,                  # fuzz 460345
                             lambda: [torch.randn(2, 6)[:, ::2] + 3, torch.randn(3, 2).t() + 0.1]),
    "scan_zero_length": (scan_of_zero_length, lambda: [torch.randn(13, 3, 5)]),
    "shared_view_returned": (shared_view_returned, lambda: [torch.randn(1, 1, 5).bfloat16()]),
    "relu_negative_zero": (relu_negative_zero, lambda: [torch.tensor([-0.0, 0.0, -1.0, 2.0, float("nan")])]),
    "relu_negative_zero_bf16": (relu_negative_zero, lambda: [torch.tensor([-0.0, 0.0, -1.0, 2.0]).bfloat16()]),
    "linspace_floor": (linspace_rounding_then_floor, lambda: [torch.zeros(36)]),
    "returned_input_no_op_views": (returned_input_kept_through_no_op_views,
                                   lambda: [torch.randn(3, 4, 5), torch.randn(5)]),
    "inplace_dynamic": (inplace_refs_at_dynamic_sizes, lambda: [torch.randn(4, 3)]),
    "scan_overflow": (scan_overflow_then_zero, lambda: [torch.tensor([1e20, 1e20, 1e20, 0.0, 2.0, -1e20, 3e19])]),
    "scan_order": (scan_order_under_cancellation,
                   lambda: [torch.tensor([0.25, 1e30, -1e30, 0.5, 3.0, -1e30, 1e30, 7.0])]),
    "empty_int_softmax": (empty_integer_softmax, lambda: [torch.zeros(0, 3, dtype=torch.int64)]),
    "alpha_fused": (alpha_fused, lambda: [torch.tensor([float("inf"), 3e38, 1.0, -2.5]),
                                          torch.tensor([3.4028234663852886e38, 3e38, 0.3, 7.0])]),
    # float64 has no wider type to hide the product in: a real fma (fuzz 461171: a - 2 * a at 1e308)
    "alpha_fused_float64": (alpha_fused, lambda: [torch.tensor([1e308, -1e308, 3.0, 1.7e308], dtype=torch.float64),
                                                  torch.tensor([1e308, 1.7e308, 0.1, -1e308], dtype=torch.float64)]),
    "repeat_of_transposed": (repeat_of_transposed, lambda: [torch.randn(4, 6)]),
    "rank_broadcast_order": (rank_broadcast_order, lambda: [torch.randn(2, 3)]),
    "strided_slice_new_sizes": (strided_slice_at_new_sizes, lambda: [torch.randn(7, 5, 3, 4)]),
    "half_sum_read_twice": (half_sum_read_twice, lambda: [torch.rand(7, 7).half() + 0.1]),
    "write_through_view_of_expand": (write_through_view_of_expand, lambda: [torch.randn(3, 2)]),
    "setitem_then_write_into_expand": (setitem_then_write_into_expand, lambda: [torch.randn(16, 1, 1, 5)]),
    "fmin_fmax_signed_zeros": (fmin_fmax_signed_zeros,
                               lambda: [torch.tensor([-0.0, 0.0, float("nan"), 1.0, -0.0] * 8),
                                        torch.tensor([0.0, -0.0, -0.0, float("nan"), -0.0] * 8)]),
    "empty_after_matmul": (empty_after_matmul, lambda: [torch.randn(4, 3, 5, 8)]),
    "reshape_at_size_zero": (reshape_at_size_zero, lambda: [torch.randn(1, 3, 7, 13)]),
    "float_to_narrow_ints": (float_to_narrow_ints,
                             lambda: [torch.tensor([-1.0, -2.7, 255.9, 256.5, -129.5, 40000.25, -7e4, 3e9 - 0.5])]),
    "unbind_of_flattened": (unbind_of_flattened, lambda: [torch.randn(2, 13)]),
    "int_power_of_a_size": (int_power_of_a_size, lambda: [torch.randn(3, 5)]),
    "clamp_signed_zeros": (clamp_signed_zeros,
                           lambda: [torch.tensor([-0.0, 0.0, float("nan"), -3.0, 5.0, 0.5, -0.5] * 3)]),
    "returned_views_of_intermediates": (returned_views_of_intermediates, lambda: [torch.randn(5, 7)]),
    "product_of_an_empty_slice": (product_of_an_empty_slice,
                                  lambda: [torch.randn(1, 3), torch.randn(1),
                                           torch.randint(0, 9, (1, 3), dtype=torch.uint8)]),
    "bf16_subnormals": (bf16_subnormals, lambda: [torch.tensor([-96.0, -90.0, 3.0, -1e3]).bfloat16(),
                                                  torch.tensor([1e-39, -5e-40, 2e-40, 1.0]).bfloat16()]),
}
#: cases run again at other sizes (dynamic shapes after the automatic recompile)
RESIZE = {"index_fill_": [(5, 2), (6, 3)], "inplace_dynamic": [(5, 2), (6, 3)], "cat_view_slice_flip": [(3, 5), (9, 2)],
          "strided_slices": [(9, 3), (11, 2)], "pointwise_input_order": [(5, 7), (9, 3)],
          "contiguous_eager_kernels": [(5, 7), (9, 3)],
          "mixed_layout_carried": [(6, 7), (9, 3)],
          "scan_zero_length": [(13, 4, 0)], "sym_max": [(2,), (7,)],
          "repeat_of_transposed": [(5, 7), (9, 3)], "rank_broadcast_order": [(3, 5), (4, 2)],
          "strided_slice_new_sizes": [(13, 7, 3, 2), (5, 2, 3, 3)],
          "empty_after_matmul": [(3, 0, 7, 3), (2, 5, 0, 3)],
          "reshape_at_size_zero": [(1, 0, 7, 13), (1, 5, 0, 16)],
          "unbind_of_flattened": [(3, 3), (4, 7)], "int_power_of_a_size": [(4, 6), (5, 9)]}


def _same(e, c):
    if isinstance(e, (tuple, list)):
        assert isinstance(c, (tuple, list)) and len(e) == len(c)
        for a, b in zip(e, c):
            _same(a, b)
        return
    if not isinstance(e, torch.Tensor):
        assert e == c
        return
    assert c.dtype == e.dtype and c.shape == e.shape
    if e.numel() > 1:   # observable strides as eager's (dims of size 1 carry none)
        assert [st for st, n in zip(c.stride(), c.shape) if n > 1] == \
            [st for st, n in zip(e.stride(), e.shape) if n > 1], (c.stride(), e.stride())
    torch.testing.assert_close(c, e, equal_nan=True, rtol=1.3e-6, atol=1e-6)
    if e.dtype.is_floating_point:   # infinities and signs of zero as eager has them
        assert torch.equal(torch.signbit(c[e == 0]), torch.signbit(e[e == 0]))


def _leaves(x):
    return [y for v in x for y in _leaves(v)] if isinstance(x, (tuple, list)) else [x]


def _clone(x):
    """A copy that keeps expanded (stride-0) dims expanded."""
    shared = [n > 1 and st == 0 for n, st in zip(x.shape, x.stride())]
    if not any(shared):
        return x.clone()
    return x[tuple(slice(0, 1) if sh else slice(None) for sh in shared)].clone().expand(x.shape)


@pytest.mark.parametrize("codegen", ["cpp", "triton", "frontend"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_matches_eager(case, codegen, backend_cache_dir):
    """codegen "frontend": compiler.compile(fn) (our frontend) with the C++ code generator."""
    fn, make = CASES[case]
    torch._dynamo.reset()
    compiled = compiler.compile(fn) if codegen == "frontend" else torch.compile(fn, backend=compiler.backend)
    with logs.testing.capture(names={"graph_runs_eagerly", "aot_runs_eagerly"}, level=logging.WARNING,
                              artifacts=None) as eagerly:
        with config.patch(**{"backend.fallback_on_error": False,
                             "backend.cpu_codegen": "triton" if codegen == "triton" else "cpp"}):
            shapes = [None] + RESIZE.get(case, [])
            for shape in shapes:
                args = make() if shape is None else [torch.randn(shape)] + make()[1:]
                e_in, c_in = [_clone(a) for a in args], [_clone(a) for a in args]
                expected, got = fn(*e_in), compiled(*c_in)
                _same(expected, got)
                _same(e_in, c_in)
                for e_out, c_out in zip(_leaves(expected), _leaves(got)):
                    for e_arg, c_arg in zip(e_in, c_in):
                        if e_out is e_arg:
                            assert c_out is c_arg, "an output that eager returns as an input must be that input"
    events = [str(ev.fields.get("reason")) for ev in eagerly]
    allowed = [e for e in events if codegen == "triton" and any(f"ops.{m} " in e for m in INTERP_MISSING)]
    assert events == allowed, events


class _WithWeight(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 4))
        self.body = body

    def forward(self, a, b):
        return self.body(self.w, a, b)


TRAINING = {   # the training path (a parameter requires grad): returned inputs and in-place aliases
    "type_as_mutated": lambda w, a, b: (a.type_as(b).add_(b), (w * a).sum()),
    "type_as_read_after": lambda w, a, b: (lambda v: (a.div_(2), (v * w).sum()))(a.type_as(a)),
    "inplace_returns_input": lambda w, a, b: (a.add_(b), (w * 2).sum()),
    "contiguous_of_input": lambda w, a, b: (a.contiguous(), (w * b).sum()),
    "unsqueeze_input": lambda w, a, b: (a.unsqueeze_(0), (a * w).sum()),
}


@pytest.mark.parametrize("case", sorted(TRAINING))
def test_training_path_matches_eager(case, backend_cache_dir):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = _WithWeight(TRAINING[case])
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    e_in, c_in = [a.clone(), b.clone()], [a.clone(), b.clone()]
    with config.patch(**{"backend.fallback_on_error": False}):
        expected = m(*e_in)
        expected[-1].backward()
        e_grad, m.w.grad = m.w.grad, None
        got = torch.compile(m, backend=compiler.backend)(*c_in)
        got[-1].backward()
    _same([x.detach() for x in expected], [x.detach() for x in got])
    _same(e_in, c_in)
    torch.testing.assert_close(m.w.grad, e_grad)
    for e_out, c_out in zip(expected, got):
        for e_arg, c_arg in zip(e_in, c_in):
            if e_out is e_arg:
                assert c_out is c_arg, "an output that eager returns as an input must be that input"


FLOAT_MATH = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan",
              "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "atan2", "hypot", "pow"]


@pytest.mark.parametrize("name", FLOAT_MATH)
def test_cpp_float32_math_within_half_ulp(name, backend_cache_dir):
    """float32 math in C++ is the float64 value rounded once (within half an ulp plus the float64
    error), never farther from the exact value than eager's Sleef kernels (<= 1 ulp). glibc's
    vector versions (up to 4 ulp) made `1e20 ** atanh(x) ** 2` differ from eager by 5e-6 relative
    (fuzz 331012/331155): the exponent multiplies the base's relative error by log(1e20)."""
    fn = getattr(torch, name)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4096, generator=g) * 2 - 1
    y = torch.rand(4096, generator=g) * 4
    if name == "acosh":
        x = x.abs() * 8 + 1
    elif name in ("log", "log2", "log10", "pow"):
        x = x.abs() * 10
    elif name not in ("asin", "acos", "atanh"):
        x = x * 6
    two = name in ("atan2", "hypot", "pow")
    torch._dynamo.reset()
    with config.patch(**{"backend.fallback_on_error": False, "backend.cpu_codegen": "cpp"}):
        got = torch.compile((lambda a, b: fn(a, b)) if two else (lambda a, b: fn(a)), backend=compiler.backend)(x, y)
    exact = fn(x.double(), y.double()) if two else fn(x.double())
    ulp = (torch.nextafter(exact.float().abs(), torch.tensor(float("inf"))) - exact.float().abs()).double()
    err = ((got.double() - exact).abs() / ulp)[torch.isfinite(exact) & (exact != 0)]
    assert err.max().item() <= 0.5001, (name, err.max().item())


def test_cpp_sigmoid_is_atens_float_formula(backend_cache_dir):
    """sigmoid is ATen's float formula 1 / (1 + exp(-x)) with a correctly rounded exp: for x >
    16.6, 1 + exp(-x) rounds to 1 and the result is exactly 1 as eager's (ndtri of it is inf)."""
    x = torch.linspace(-40, 40, 801)
    torch._dynamo.reset()
    with config.patch(**{"backend.fallback_on_error": False, "backend.cpu_codegen": "cpp"}):
        got = torch.compile(torch.sigmoid, backend=compiler.backend)(x)
    want = 1 / (1 + torch.exp(-x.double()).float())
    assert torch.equal(got, want)
    assert torch.equal(got == 1, torch.sigmoid(x) == 1)


@pytest.mark.parametrize("dtype", [torch.float64])
@pytest.mark.parametrize("dim", [0, 1])
def test_cpp_product_does_not_depend_on_order(dtype, dim, backend_cache_dir):
    """A product whose partial products leave the dtype's range in some order (tiny * tiny first
    underflows to 0, huge * huge first overflows to inf) is the exact product rounded once, as a
    wider accumulator gives for any order of multiplication (fuzz 360693: a float64 prod of
    2.2e-308, 1e-30 and 1.8e308 among 31 values was 0 in our order; eager's order and the exact
    product give 4.9e237). Eager's lane order can still leave the range, so the exact product,
    not eager, is the reference here; rows along dim 1 run the row loop, along dim 0 the column
    loop."""
    import fractions
    tiny, small, huge = 1e-300, 1e-30, 1e300
    rows = [[tiny, small, huge] + [1.5] * 40, [huge, huge, tiny, tiny] + [0.75] * 61, [small] * 3 + [-2.0] * 7]
    width = max(len(r) for r in rows)
    x = torch.tensor([r + [1.0] * (width - len(r)) for r in rows], dtype=dtype)
    want = []
    for r in x.tolist():
        p = fractions.Fraction(1)
        for v in r:
            p *= fractions.Fraction(v)
        want.append(float(p))
    want = torch.tensor(want, dtype=torch.float64).to(dtype)
    torch._dynamo.reset()
    with config.patch(**{"backend.fallback_on_error": False, "backend.cpu_codegen": "cpp"}):
        got = torch.compile(lambda a: a.prod(dim), backend=compiler.backend)(x if dim == 1 else x.t().contiguous())
    torch.testing.assert_close(got, want, rtol=4 * torch.finfo(dtype).eps, atol=0)
