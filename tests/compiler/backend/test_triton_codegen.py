"""Triton code generator on hand-built KernelGroups, run under the Triton interpreter (CPU).

These tests pin the code generator alone (independent of lowering and scheduling): every result
is compared with eager PyTorch on random inputs, outputs are poisoned with NaN first so an
unwritten element fails, and reductions run both persistent and looped (forced with a small
config.triton.persistent_reduction_max / max_block so the loop runs several iterations).
"""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

pytest.importorskip("triton")

from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend import ir  # noqa: E402
from tracetorch.compiler.backend.codegen.triton import TritonCodegen  # noqa: E402
from tracetorch.compiler.backend.ir import ops  # noqa: E402

F32 = torch.float32
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # CPU: the Triton interpreter


@pytest.fixture(autouse=True)
def default_device():
    with torch.device(DEVICE):
        yield


def lay(size, dtype=F32, stride=None, offset=0):
    if stride is None:
        return ir.Layout.contiguous(size, dtype, DEVICE)
    return ir.Layout(size, stride, dtype, torch.device(DEVICE), offset)


def buf(name, layout, data):
    return ir.ComputedBuffer(name, layout, data)


def group(nodes, kinds, ranges, rranges, inputs, outputs, layouts, internal=(), sizes=()):
    return ir.KernelGroup("triton_kernel0", nodes, ranges, rranges, kinds, list(inputs),
                          list(outputs), list(internal), list(sizes), layouts,
                          provenance=[("add", "test.py:1: y = x + b")])


def run(g, tensors, sizes=None):
    cg = TritonCodegen()
    gen = cg.generate(g)
    ns = {}
    exec(cg.module_prelude([gen]), ns)
    exec(gen.define_code, ns)
    sizes = sizes or {}
    ns[gen.name](*[tensors[a] if a in tensors else sizes[a] for a in gen.call_args])
    return gen


def poison(shape, dtype=F32):
    return torch.full(shape, float("nan"), dtype=dtype) if dtype.is_floating_point else \
        torch.full(shape, -7, dtype=dtype)


# ------------------------------------------------------------------ pointwise

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_pointwise_broadcast_chain(dtype):
    a, b = torch.randn(4, 5).to(dtype), torch.randn(5).to(dtype)
    b0 = buf("buf0", lay([4, 5], dtype), ir.Pointwise(
        [4, 5], lambda i: ops.add(ops.load("arg0_1", 5 * i[0] + i[1]), ops.load("arg1_1", i[1])),
        dtype, DEVICE))
    b1 = buf("buf1", lay([4, 5], dtype), ir.Pointwise(
        [4, 5], lambda i: ops.relu(ops.load("buf0", 5 * i[0] + i[1])), dtype, DEVICE))
    out = poison((4, 5), dtype)
    g = group([b0, b1], {"buf0": "outer", "buf1": "outer"}, [4, 5], [], ["arg0_1", "arg1_1"],
              ["buf1"], {"arg0_1": lay([4, 5], dtype), "arg1_1": lay([5], dtype),
                         "buf0": lay([4, 5], dtype), "buf1": lay([4, 5], dtype)}, internal=["buf0"])
    gen = run(g, {"arg0_1": a, "arg1_1": b, "buf1": out})
    ref = (a.float() + b.float()).to(dtype).float().relu().to(dtype)
    torch.testing.assert_close(out, ref)
    assert "buf0" not in gen.call_args            # internal: stays in registers
    assert "# add: test.py:1: y = x + b" in gen.source   # provenance comment
    assert "tl.load(arg0_1 + (xindex)" in gen.source     # contiguous access is coalesced


def test_pointwise_strided_and_offset_input():
    base = torch.randn(40)
    # a [5, 4] view of `base` with strides (1, 5) and storage offset 3 (a transposed slice)
    src = base.as_strided((5, 4), (1, 5), 3)
    out = poison((5, 4))
    b0 = buf("buf0", lay([5, 4]), ir.Pointwise(
        [5, 4], lambda i: ops.mul(ops.load("arg0_1", 3 + i[0] + 5 * i[1]), ops.constant(2.0, F32)),
        F32, DEVICE))
    g = group([b0], {"buf0": "outer"}, [5, 4], [], ["arg0_1"], ["buf0"],
              {"arg0_1": lay([40]), "buf0": lay([5, 4])})
    run(g, {"arg0_1": base, "buf0": out})
    torch.testing.assert_close(out, src * 2)


@pytest.mark.parametrize("n", [1, 3, 17, 1000])
def test_dynamic_size_one_kernel(n):
    s0 = ir.size_symbol("s0")
    x = torch.randn(n, 3)
    b0 = buf("buf0", lay([s0, 3]), ir.Pointwise(
        [s0, 3], lambda i: ops.index_expr(i[0] * 3 + i[1], F32), F32, DEVICE))
    b1 = buf("buf1", lay([s0, 3]), ir.Pointwise(
        [s0, 3], lambda i: ops.add(ops.load("arg0_1", 3 * i[0] + i[1]), ops.load("buf0", 0)),
        F32, DEVICE))
    out0, out1 = poison((n, 3)), poison((n, 3))
    g = group([b0, b1], {"buf0": "outer", "buf1": "outer"}, [s0, 3], [], ["arg0_1"],
              ["buf0", "buf1"], {"arg0_1": lay([s0, 3]), "buf0": lay([s0, 3]), "buf1": lay([s0, 3])},
              sizes=[s0])
    gen = run(g, {"arg0_1": x, "buf0": out0, "buf1": out1}, {"s0": n})
    idx = torch.arange(n * 3, dtype=F32).view(n, 3)
    torch.testing.assert_close(out0, idx)
    torch.testing.assert_close(out1, x + idx)
    assert "s0" in gen.call_args


def test_masked_indirect_gather():
    x, idx = torch.randn(10), torch.tensor([3, -1, 0, 9, 2, -10])
    b0 = buf("buf0", lay([6]), ir.Pointwise([6], lambda i: ops.masked(
        ops.lt(ops.index_expr(i[0], torch.int64), ops.constant(4, torch.int64)),
        lambda: ops.load("arg0_1", ops.indirect_indexing(ops.load("arg1_1", i[0]), 10)), -1.0),
        F32, DEVICE))
    out = poison((6,))
    g = group([b0], {"buf0": "outer"}, [6], [], ["arg0_1", "arg1_1"], ["buf0"],
              {"arg0_1": lay([10]), "arg1_1": lay([6], torch.int64), "buf0": lay([6])})
    run(g, {"arg0_1": x, "arg1_1": idx, "buf0": out})
    ref = torch.where(torch.arange(6) < 4, x[idx], torch.tensor(-1.0))
    torch.testing.assert_close(out, ref)


# ------------------------------------------------------------------ reductions

def _row_reduction(rt, n, m=5, dtype=F32, out_dtype=None):
    out_dtype = out_dtype or (torch.int64 if rt in ("argmax", "argmin") else
                              torch.bool if rt in ("any", "all") else dtype)
    r = buf("buf0", lay([m], out_dtype), ir.Reduction(
        [m], [n], lambda i, r: ops.load("arg0_1", n * i[0] + r[0]), rt, out_dtype, dtype, DEVICE))
    return group([r], {"buf0": "reduction"}, [m], [n], ["arg0_1"], ["buf0"],
                 {"arg0_1": lay([m, n], dtype), "buf0": lay([m], out_dtype)})


REF = {"sum": lambda x: x.sum(1), "prod": lambda x: x.prod(1), "max": lambda x: x.amax(1),
       "min": lambda x: x.amin(1), "argmax": lambda x: x.argmax(1), "argmin": lambda x: x.argmin(1),
       "any": lambda x: x.any(1), "all": lambda x: x.all(1)}


@pytest.mark.parametrize("looped", [False, True])
@pytest.mark.parametrize("rt", list(REF))
def test_reductions(rt, looped):
    n = 50
    x = torch.randn(5, n) * (0.9 if rt == "prod" else 1.0)
    x[1, 7] = x[1, 30] = x[1].max() + 1   # ties: the first index wins
    if rt in ("any", "all"):
        x = (x > 1.5) if rt == "any" else (x > -1.5)     # bool rows, some all-False/all-True
    out = poison((5,), REF[rt](x).dtype)
    opts = {"triton.persistent_reduction_max": 8, "triton.max_block": 8} if looped else {}
    with config.patch(**opts):
        gen = run(_row_reduction(rt, n, dtype=x.dtype, out_dtype=REF[rt](x).dtype),
                  {"arg0_1": x, "buf0": out})
    assert ("for roffset" in gen.source) == looped
    torch.testing.assert_close(out, REF[rt](x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("looped", [False, True])
def test_max_and_argmax_propagate_nan(looped):
    x = torch.randn(3, 40)
    x[0, 5] = float("nan")
    x[2, 39] = float("nan")
    opts = {"triton.persistent_reduction_max": 8, "triton.max_block": 8} if looped else {}
    for rt in ("max", "argmax", "min", "argmin"):
        out = poison((3,), REF[rt](x).dtype)
        with config.patch(**opts):
            run(_row_reduction(rt, 40, m=3, out_dtype=REF[rt](x).dtype), {"arg0_1": x, "buf0": out})
        torch.testing.assert_close(out, REF[rt](x), equal_nan=True)


def _layernorm_group(n, s0):
    """mean (reduction), var of the centred values (reduction), normalized output (inner)."""
    L = lambda size, dt=F32: lay(size, dt)  # noqa: E731
    x = lambda i, r: ops.load("arg0_1", n * i[0] + r[0])  # noqa: E731
    mean = buf("buf0", L([s0]), ir.Reduction(
        [s0], [n], lambda i, r: ops.truediv(x(i, r), ops.constant(float(n), F32)), "sum", F32, F32, DEVICE))
    var = buf("buf1", L([s0]), ir.Reduction(
        [s0], [n], lambda i, r: ops.square(ops.sub(x(i, r), ops.load("buf0", i[0]))), "sum", F32, F32, DEVICE))
    outb = buf("buf2", L([s0, n]), ir.Pointwise([s0, n], lambda ir_: ops.add(ops.mul(ops.mul(
        ops.sub(ops.load("arg0_1", n * ir_[0] + ir_[1]), ops.load("buf0", ir_[0])),
        ops.rsqrt(ops.add(ops.truediv(ops.load("buf1", ir_[0]), ops.constant(float(n), F32)),
                          ops.constant(1e-5, F32)))), ops.load("arg1_1", ir_[1])),
        ops.load("arg2_1", ir_[1])), F32, DEVICE))
    return group([mean, var, outb], {"buf0": "reduction", "buf1": "reduction", "buf2": "inner"},
                 [s0], [n], ["arg0_1", "arg1_1", "arg2_1"], ["buf2"],
                 {"arg0_1": L([s0, n]), "arg1_1": L([n]), "arg2_1": L([n]), "buf0": L([s0]),
                  "buf1": L([s0]), "buf2": L([s0, n])}, internal=["buf0", "buf1"], sizes=[s0])


@pytest.mark.parametrize("looped", [False, True])
@pytest.mark.parametrize("m", [1, 6])
def test_layernorm_one_kernel_dynamic_rows(looped, m):
    n = 48
    x, w, b = torch.randn(m, n), torch.randn(n), torch.randn(n)
    out = poison((m, n))
    opts = {"triton.persistent_reduction_max": 8, "triton.max_block": 8} if looped else {}
    with config.patch(**opts):
        run(_layernorm_group(n, ir.size_symbol("s0")),
            {"arg0_1": x, "arg1_1": w, "arg2_1": b, "buf2": out}, {"s0": m})
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (n,), w, b), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ relu bug injection

def _relu_group():
    b0 = buf("buf0", lay([8]), ir.Pointwise([8], lambda i: ops.relu(ops.load("arg0_1", i[0])), F32, DEVICE))
    return group([b0], {"buf0": "outer"}, [8], [], ["arg0_1"], ["buf0"],
                 {"arg0_1": lay([8]), "buf0": lay([8])})


def test_inject_relu_bug_accuracy():
    x, out = torch.randn(8), poison((8,))
    with config.patch(**{"testing.inject_relu_bug": "accuracy"}):
        run(_relu_group(), {"arg0_1": x, "buf0": out})
    torch.testing.assert_close(out, x + 1)


def test_inject_relu_bug_compile_error():
    with config.patch(**{"testing.inject_relu_bug": "compile_error"}):
        with pytest.raises(SyntaxError):
            run(_relu_group(), {"arg0_1": torch.randn(8), "buf0": poison((8,))})


def test_inject_relu_bug_runtime_error():
    with config.patch(**{"testing.inject_relu_bug": "runtime_error"}):
        with pytest.raises(Exception, match="injected relu runtime error"):
            run(_relu_group(), {"arg0_1": torch.randn(8), "buf0": poison((8,))})
