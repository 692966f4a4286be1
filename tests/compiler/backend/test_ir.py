"""The IR itself: index simplification, layouts, readable printing, dependency collection."""

import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.ir import ops


def test_simplify_index_folds_reshapes():
    i0, i1, i2 = (ir.index_var("i", k) for k in range(3))
    B, C = ir.size_symbol("s0"), ir.size_symbol("s1")
    flat = i0 * B * C + i1 * C + i2
    r = {i0: 4, i1: B, i2: C}
    assert ir.simplify_index(ir.FloorDiv(flat, B * C), r) == i0
    assert ir.simplify_index(ir.ModularIndexing(flat, C, B), r) == i1
    assert ir.simplify_index(ir.ModularIndexing(flat, 1, C), r) == i2
    # not provable from the ranges: kept
    assert ir.simplify_index(ir.FloorDiv(i2, 3), {i2: C}).has(ir.FloorDiv)


def test_layout_index_and_storage():
    L = ir.Layout([2, 3], [1, 2], torch.float32, torch.device("cpu"), offset=5)
    i, j = ir.index_var("i", 0), ir.index_var("i", 1)
    assert L.index([i, j]) == 5 + i + 2 * j
    assert not L.is_contiguous()
    assert L.storage_size() == 5 + 1 + 1 + 4
    assert ir.Layout.contiguous([4, 5], torch.float32, "cpu").stride == [5, 1]


def test_printing_and_dependencies():
    s0 = ir.size_symbol("s0")
    inp = ir.InputBuffer("arg0_1", ir.Layout.contiguous([s0, 8], torch.float32, "cpu"))
    ld = inp.make_loader()
    red = ir.Reduction([s0], [8], lambda i, r: ops.exp(ld([i[0], r[0]])), "sum", torch.float32, torch.float32, "cpu",
                       origins=["sum_1"])
    buf = ir.ComputedBuffer("buf0", ir.Layout.contiguous([s0], torch.float32, "cpu"), red)
    text = buf.to_str()
    assert "Reduction(ranges=[s0], reduction_ranges=[8], reduction_type=sum" in text
    assert "ops.load(arg0_1, 8*i0 + r0)" in text and "ops.exp(tmp0)" in text and "origins: sum_1" in text
    assert buf.read_deps() == [("arg0_1", 8 * ir.index_var("i", 0) + ir.index_var("r", 0))]
    assert buf.size_symbols() == {s0}
    ext = ir.ExternKernel("buf1", inp.layout, "aten.mm.default", [inp, inp], {})
    assert "aten.mm.default(arg0_1, arg0_1)" in ext.to_str() and ext.reads() == ["arg0_1"]


def test_ops_need_a_handler_and_know_the_vocabulary():
    import pytest
    with pytest.raises(RuntimeError):
        ops.sin("x")
    with pytest.raises(AttributeError):
        ops.not_an_op
    h = ir.PrintHandler()
    with ir.set_ops_handler(h):
        ops.add(ops.load("a", 0), ops.constant(1.0, torch.float32))
    assert h.lines == ["tmp0 = ops.load(a, 0)", "tmp1 = ops.constant(1.0, float32)", "tmp2 = ops.add(tmp0, tmp1)"]
