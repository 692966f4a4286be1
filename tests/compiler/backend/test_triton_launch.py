"""triton_launch + autotune: source files keyed by hash, import, launch under the interpreter,
autotune skipped on the interpreter (default config), decisions logged, disk cache round trip."""
import os


import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

pytest.importorskip("triton")

from tracetorch import logs  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend import autotune  # noqa: E402
from tracetorch.compiler.backend.runtime import triton_launch as tl_launch  # noqa: E402

ADD_SRC = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    a = tl.load(in_ptr0 + xindex, mask=xmask, other=0.0).to(tl.float32)
    b = tl.load(in_ptr1 + xindex, mask=xmask, other=0.0).to(tl.float32)
    tl.store(out_ptr0 + xindex, (a + b).to(out_ptr0.dtype.element_ty), mask=xmask)
'''


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRET = DEVICE == "cpu"


def grid_1d(meta, xnumel):
    return (tl_launch.cdiv(xnumel, meta["XBLOCK"]), 1, 1)


@pytest.fixture
def kdir(tmp_path, monkeypatch):
    monkeypatch.setattr(tl_launch, "kernel_dir", lambda: str(tmp_path))
    autotune.clear_memory_cache()
    yield tmp_path
    autotune.clear_memory_cache()


def test_source_written_once_under_hash(kdir):
    p1 = tl_launch.write_source(ADD_SRC)
    p2 = tl_launch.write_source(ADD_SRC)
    assert p1 == p2 and os.path.exists(p1)
    assert tl_launch.source_hash(ADD_SRC)[:40] in os.path.basename(p1)
    with open(p1) as f:
        assert f.read() == ADD_SRC


@pytest.mark.parametrize("n", [1, 100, 1000, 4097])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_launch_matches_eager(kdir, n, dtype):
    k = tl_launch.TritonKernel("add_kernel", ADD_SRC, grid_1d, interpret=INTERPRET)
    x, y = torch.randn(n, device=DEVICE).to(dtype), torch.randn(n, device=DEVICE).to(dtype)
    out = torch.full((n,), float("nan"), dtype=dtype, device=DEVICE)   # poisoned: all written
    cfgs = autotune.pointwise_configs(n)
    cfg = autotune.choose_config(k, cfgs, [x, y, out], [n])
    k.launch([x, y, out], [n], cfg)
    torch.testing.assert_close(out, x + y)


def test_autotune_decision_logged(kdir):
    """Interpreter: sweep skipped, default config. CUDA: candidates timed, the fastest kept,
    and a second choice for the same size bucket comes from memory without timing again."""
    with logs.testing.capture(artifacts={"autotuning"}) as events:
        k = tl_launch.TritonKernel("add_kernel", ADD_SRC, grid_1d, interpret=INTERPRET)
        n = 5000
        cfgs = autotune.pointwise_configs(n)
        assert len(cfgs) > 1
        x = torch.randn(n, device=DEVICE)
        cfg = autotune.choose_config(k, cfgs, [x, x, torch.empty(n, device=DEVICE)], [n])
        again = autotune.choose_config(k, cfgs, [x, x, torch.empty(n, device=DEVICE)], [n + 1])
    ev = [e for e in events if e.name == "autotuning"]
    assert len(ev) == 1 and ev[0].payload["chosen"] == cfg.key() and again == cfg
    if INTERPRET:
        assert cfg == cfgs[0] and "interpreter" in ev[0].fields["reason"]
    else:
        assert ev[0].fields["reason"] == "benchmarked" and len(ev[0].payload["timings_ms"]) >= 2


def test_disk_cache_round_trip(kdir):
    cfg = tl_launch.LaunchConfig({"XBLOCK": 256}, num_warps=2)
    autotune._store_disk("ab" * 20, (1024,), cfg)
    assert autotune._load_disk("ab" * 20, (1024,)) == cfg
    assert autotune._load_disk("ab" * 20, (2048,)) is None


def test_candidates_respect_config():
    with config.patch(**{"triton.max_block": 256, "triton.num_warps_choices": [2, 4]}):
        for c in autotune.pointwise_configs(1 << 20):
            assert c.meta["XBLOCK"] <= 256 and c.num_warps in (2, 4)
    for c in autotune.reduction_configs(4096, 300, persistent=True):
        assert c.meta["RBLOCK"] == 512
    looped = autotune.reduction_configs(8, 100000, persistent=False)
    for c in looped:      # chunks up to 4 x max_block, at most 16 elements per thread
        assert c.meta["RBLOCK"] <= 4096 and c.meta["XBLOCK"] <= 8
        assert c.meta["RBLOCK"] * c.meta["XBLOCK"] <= 16 * 32 * c.num_warps
    assert looped[0].meta == {"XBLOCK": 1, "RBLOCK": 2048} and looped[0].num_warps == 4
    assert autotune.size_bucket([1, 3, 1000]) == (1, 4, 1024)


def test_outer_reductions_with_few_outputs_spread_their_rows_over_programs():
    """An outer reduction (loads contiguous along the outputs) with many outputs keeps the
    inductor-style blocks (64 outputs x 8 rows first). With few, a split reduction's second pass
    (64 channels over 896 partials), one 64-wide program would loop 112 times. Blocks of 8 outputs
    over 256-row chunks give 8 programs of 4 iterations, 8 contiguous float32 per row; the sweep
    also weighs a wider block."""
    def grid_and_loops(c, xnumel, rnumel):
        return -(-xnumel // c.meta["XBLOCK"]), -(-rnumel // c.meta["RBLOCK"])
    many = autotune.reduction_configs(32768, 784, persistent=False, outer=True)
    assert many[0].meta == {"XBLOCK": 64, "RBLOCK": 8}
    for xnumel, rnumel in ((64, 896), (512, 1568), (1024, 400)):
        few = autotune.reduction_configs(xnumel, rnumel, persistent=False, outer=True)
        programs, loops = grid_and_loops(few[0], xnumel, rnumel)       # the default
        assert few[0].meta["XBLOCK"] == 8 and programs == xnumel // 8 and loops <= 7, (xnumel, rnumel, few[0])
        assert len(few) >= 2                     # a wider block for the sweep to weigh against it
        for c in few:
            assert c.meta["RBLOCK"] * c.meta["XBLOCK"] <= 16 * 32 * c.num_warps


def test_launcher_sweeps_looped_reductions_only_by_default(kdir):
    launcher = tl_launch.TritonLauncher("add_kernel", ADD_SRC, kind="pointwise", n_ptrs=3,
                                        numel=lambda: (10, 1), interpret=INTERPRET)
    assert len(launcher._candidates("pointwise", 1 << 20, 1)) == 1
    assert len(launcher._candidates("persistent", 4096, 1000)) == 1
    assert len(launcher._candidates("looped", 64, 100000)) >= 2   # choose_config keeps the first 2
    with config.patch(**{"triton.autotune_pointwise": True}):
        assert len(launcher._candidates("pointwise", 1 << 20, 1)) >= 2
    x = torch.randn(10, device=DEVICE)
    out = torch.full((10,), float("nan"), device=DEVICE)
    launcher(x, x, out)                         # numel from the lambda, grid from XBLOCK
    torch.testing.assert_close(out, x + x)


def test_launcher_plans_per_size_and_alignment_match_eager(kdir):
    """Steady-state launches reuse a per-size plan and (on CUDA) Triton's compiled kernel directly.
    Misaligned views and new sizes must select other specialisations, never a wrong one."""
    # like generated kernels: the size symbol s0, then xnumel computed from it
    src = ADD_SRC.replace("out_ptr0, xnumel,", "out_ptr0, s0, xnumel,")
    launcher = tl_launch.TritonLauncher("add_kernel", src, kind="pointwise", n_ptrs=3,
                                        numel=lambda s0: (s0, 1), interpret=INTERPRET)
    base = torch.randn(4099, device=DEVICE)
    for n, offset in [(1000, 0), (1000, 0), (1000, 1), (1000, 1), (1000, 0), (4096, 0), (7, 3), (1000, 0)]:
        x = base[offset:offset + n]
        y = base[offset + 1:offset + 1 + n]
        out = torch.full((n,), float("nan"), device=DEVICE)
        launcher(x, y, out, n)
        torch.testing.assert_close(out, x + y)
    assert set(launcher._plans) == {(1000,), (4096,), (7,)}
    if not INTERPRET:   # direct launches were recorded for both alignments of the 1000-element plan
        assert len(launcher._plans[(1000,)].fast) == 2


def test_launch_hooks_pass_empty_chains_as_none():
    """An empty HookChain is passed to the launcher as None (no metadata built, nothing called);
    a profiler's hook is passed on."""
    from triton import knobs
    from tracetorch.compiler.backend.runtime.triton_launch import launch_hooks
    chain = knobs.runtime.launch_enter_hook
    if not hasattr(chain, "add"):         # an older Triton: the knob is a plain callable or None
        assert launch_hooks()[0] is chain
        return
    assert launch_hooks() == (None, None)
    seen = []
    hook = seen.append
    chain.add(hook)
    try:
        enter, _ = launch_hooks()
        assert enter is chain
        enter("metadata")
        assert seen == ["metadata"]
    finally:
        chain.remove(hook)
    assert launch_hooks() == (None, None)


class _StridedWriter:
    """Stands in for a generated kernel that writes its output with the strides it was compiled
    for (a [4, 64] slice of a [4, 128] buffer: row stride 128), whatever tensor it is handed."""
    name = "strided_writer"
    source = "strided writer"

    def __init__(self):
        self.calls = 0

    def launch(self, args, size_args, cfg):
        self.calls += 1
        out = args[1]
        out.as_strided((4, 64), (128, 1), out.storage_offset()).copy_(args[0] * self.calls)


def test_the_sweep_writes_into_a_copy_in_the_outputs_own_layout(monkeypatch):
    """Timing runs must not touch the real output, and a non-dense output (a slice of a bigger
    buffer) must keep its strides in the copy they write: a contiguous clone would be too small
    for the kernel's compiled strides, and its writes would land in other tensors."""
    import triton.testing
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: (fn(), 1.0)[1])
    buffer = torch.zeros(4, 128)
    out = buffer[:, 64:]                        # not dense: clone() would make it [4, 64] contiguous
    kernel = _StridedWriter()
    cfgs = [tl_launch.LaunchConfig({"XBLOCK": 64}, num_warps=4), tl_launch.LaunchConfig({"XBLOCK": 32}, num_warps=2)]
    best, timings = autotune._sweep(kernel, cfgs, [torch.ones(4, 64), out], [256], clone_args=(1,))
    assert kernel.calls == 2 and len(timings) == 2
    assert torch.equal(buffer, torch.zeros(4, 128))     # the real output and its neighbours untouched
    copy = autotune.scratch_copy(out)
    assert (copy.size(), copy.stride(), copy.storage_offset()) == (out.size(), out.stride(), out.storage_offset())
    assert copy.untyped_storage().data_ptr() != out.untyped_storage().data_ptr()


class _PassThroughLauncher:
    """Shaped like Triton's CUDA launcher object: __call__ sets up scratch memory (none here) and
    passes everything on to the compiled `launch`, with the launch flags and scratch pointers
    inserted after the function handle."""

    def __init__(self, global_scratch_size=0):
        self.calls = []
        self.launch = lambda *a: self.calls.append(a)
        self.launch_cooperative_grid, self.launch_pdl = False, True
        self.global_scratch_size, self.profile_scratch_size = global_scratch_size, 0

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        scratch = None if self.global_scratch_size == 0 else "scratch"
        profile = None if self.profile_scratch_size == 0 else "profile"
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    scratch, profile, *args)


class _OtherLauncher(_PassThroughLauncher):
    """A launcher whose call does more than pass its arguments on (another Triton's form)."""

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        self.launch(gridX, gridY, gridZ, stream, function, len(args), *args)


def test_direct_launch_is_taken_only_where_it_does_what_the_launcher_object_does(events):
    """A launch through direct_launch passes the compiled launch function exactly what the
    launcher object's own call passes; launchers of another shape, or with scratch memory, keep
    the call through the object (the decision logged once per launcher class)."""
    for cls in (_PassThroughLauncher, _OtherLauncher):
        tl_launch._PASS_THROUGH.pop(cls, None)
    run = _PassThroughLauncher()
    launch = tl_launch.direct_launch(run)
    assert launch is run.launch
    run(4, 1, 1, "stream", "fn", "packed", None, None, None, 0x1000, 7, 128)
    launch(4, 1, 1, "stream", "fn", run.launch_cooperative_grid, run.launch_pdl, None, None,
           "packed", None, None, None, 0x1000, 7, 128)
    assert run.calls[0] == run.calls[1]
    assert tl_launch.direct_launch(_PassThroughLauncher(global_scratch_size=64)) is None
    assert tl_launch.direct_launch(_OtherLauncher()) is None
    assert tl_launch.direct_launch(lambda *a: None) is None
    decided = {e.fields["launcher"].rsplit(".", 1)[-1]: e.fields["used"]
               for e in events if e.name == "triton_direct_launch"}
    assert decided["_PassThroughLauncher"] is True and decided["_OtherLauncher"] is False


def test_plans_remember_the_direct_launch_with_the_launchers_flags():
    """LaunchPlan.remember keeps the launcher object (hooks need it) and, where allowed, the
    direct launch function with the flags the object would have inserted."""

    class Compiled:
        run = _PassThroughLauncher()
        function, packed_metadata = "fn", "packed"

    plan = tl_launch.LaunchPlan.__new__(tl_launch.LaunchPlan)
    plan.fast = {}
    plan.remember(3, Compiled)
    _, run, function, packed, launch, cooperative, pdl = plan.fast[3]
    assert (run, function, packed, launch, cooperative, pdl) == (
        Compiled.run, "fn", "packed", Compiled.run.launch, False, True)
