"""Graph inputs that share memory with an input the graph writes to (aot synthetic bases,
compiler.aot.overlapping_inputs). Found by the fuzzer (seed 450944): after a graph break the
resumed graph took `v = a.unbind(0)[0]` and `a` as two inputs, wrote `v`, then read `a`, and the
compiled graph read `a` as it entered.

Differential: each program runs eagerly and compiled on copies of the inputs that keep their
sharing (views of one cloned buffer); outputs and the whole buffer afterwards must match, on
aot_eager and on the default backend (our generated code)."""
import torch

import pytest

from tracetorch import compiler

#: events that say a whole graph ran eagerly
WHOLE_GRAPH_EAGER = {"compiled_graph_skipped", "aot_runs_eagerly", "graph_runs_eagerly"}


def write_row_read_all(v, a):              # the fuzzer's program, after its graph break
    v.zero_()
    return ~a if a.dtype == torch.uint8 else a * 2


def write_both_ways(v, a):                 # writes through the view, then through the base
    v.mul_(3)
    a.add_(1)
    return v + a.sum()


def write_base_read_view(v, a):            # the written input is the larger one
    a.sub_(2)
    return v * 10


def _inputs(kind, n, gen):
    if kind == "row_of_3d":
        a = torch.randint(0, 255, (1, n, 5), dtype=torch.uint8, generator=gen)
        return [a.unbind(0)[0], a], a
    if kind == "strided_slice":
        a = torch.randn(3 * n, generator=gen)
        return [a[1::3], a], a
    a = torch.randn(n, 4, generator=gen)
    return [a.t(), a], a        # the same memory, another layout


def _copies(inputs, base):
    """Inputs laid out as before over a clone of their shared buffer."""
    b = base.clone()
    return [b.as_strided(t.shape, t.stride(), t.storage_offset()) for t in inputs], b


CASES = [(write_row_read_all, "row_of_3d"), (write_row_read_all, "strided_slice"),
         (write_both_ways, "strided_slice"), (write_both_ways, "transposed"),
         (write_base_read_view, "strided_slice"), (write_base_read_view, "transposed")]


@pytest.mark.parametrize("backend", ["aot_eager", "default"])
@pytest.mark.parametrize("fn,kind", CASES, ids=[f"{f.__name__}-{k}" for f, k in CASES])
def test_written_input_sharing_memory_matches_eager(fn, kind, backend, events, backend_cache_dir):
    compiled = compiler.compile(fn, backend=backend)
    gen = torch.Generator().manual_seed(0)
    for n in (4, 4, 6, 9):
        inputs, base = _inputs(kind, n, gen)
        e_in, e_base = _copies(inputs, base)
        c_in, c_base = _copies(inputs, base)
        torch.testing.assert_close(compiled(*c_in), fn(*e_in))
        torch.testing.assert_close(c_base, e_base)
    eager = [(e.name, e.fields) for e in events if e.name in WHOLE_GRAPH_EAGER]
    assert not eager, eager
    assert [e for e in events if e.name == "aot_synthetic_base_compiled"]


def test_inputs_without_shared_memory_take_the_compiled_graph(events, backend_cache_dir):
    compiled = compiler.compile(write_both_ways, backend="aot_eager")
    a, b = torch.randn(6), torch.randn(6)
    ea, eb = a.clone(), b.clone()
    torch.testing.assert_close(compiled(a, b), write_both_ways(ea, eb))
    torch.testing.assert_close((a, b), (ea, eb))
    assert not [e for e in events if e.name == "aot_synthetic_base"]


def test_same_tensor_passed_twice(events, backend_cache_dir):
    compiled = compiler.compile(write_both_ways, backend="aot_eager")
    x = torch.randn(5)
    ex = x.clone()
    torch.testing.assert_close(compiled(x, x), write_both_ways(ex, ex))
    torch.testing.assert_close(x, ex)


def test_sharing_across_dtypes_runs_that_pattern_eagerly_and_says_why(events, backend_cache_dir):
    def fn(a, bits):
        a.add_(1)
        return bits + 1
    compiled = compiler.compile(fn, backend="aot_eager")
    a = torch.randn(6)
    ea = a.clone()
    torch.testing.assert_close(compiled(a, a.view(torch.int32)), fn(ea, ea.view(torch.int32)))
    torch.testing.assert_close(a, ea)
    why = [e.fields.get("reason") for e in events if e.name == "aot_runs_eagerly"]
    assert why == ["inputs sharing memory have different dtypes"]


def test_after_a_graph_break_in_our_frontend(events, backend_cache_dir):
    def fn(a):
        v = a.unbind(0)[0]
        if a.sum().item() > -1e9:          # data-dependent: a graph break
            v.zero_()
        return ~a
    compiled = compiler.compile(fn)
    gen = torch.Generator().manual_seed(1)
    for n in (16, 3, 4):
        a = torch.randint(0, 255, (1, n, 5), dtype=torch.uint8, generator=gen)
        ea = a.clone()
        torch.testing.assert_close(compiled(a), fn(ea))
        torch.testing.assert_close(a, ea)


def test_variant_returns_the_callers_tensors_and_views(events, backend_cache_dir):
    def fn(v, a):
        v.abs_()
        return v, a.t(), a.sum()
    compiled = compiler.compile(fn, backend="aot_eager")
    a = torch.randn(4, 6)
    ea = a.clone()
    ev, v = ea[1:3], a[1:3]
    expected, got = fn(ev, ea), compiled(v, a)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(a, ea)
    assert got[0] is v, "eager returns the input itself"
    assert got[1].untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert (got[1].shape, got[1].stride()) == (expected[1].shape, expected[1].stride())
    assert [e for e in events if e.name == "aot_synthetic_base_compiled"]


def test_overlap_groups_finds_shared_storages_at_any_offset():
    """The runtime's per-call test: the written inputs whose storage another input also uses, at
    the storage's start or anywhere in it (a view's data pointer is past the start)."""
    from tracetorch.compiler.aot.overlapping_inputs import overlap_groups
    a, b = torch.randn(4, 6), torch.randn(6)
    assert overlap_groups([a, b, a.sum()], mutated=[0, 1]) == ()          # all apart, all at offset 0
    assert overlap_groups([a, a.view(24)], mutated=[0]) == ((0, 1),)        # same start
    assert overlap_groups([a, b, a[2]], mutated=[0]) == ((0, 2),)           # a view past the start
    assert overlap_groups([a[1], b, a[3]], mutated=[2]) == ((0, 2),)        # two views, neither at the start
    assert overlap_groups([a, b, a[2]], mutated=[1]) == ()                  # the shared storage is not written
