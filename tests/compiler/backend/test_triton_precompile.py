"""Ahead-of-time Triton compilation (runtime/triton_compile.py): the explicit specialization equals
Triton's JIT's (whole compile keys), the worker pool fills the cache the main process then hits,
failures and timeouts fall back to compiling in the main process, and the interpreter path never
starts a pool.

The GPU-target scenarios run in a child process without TRITON_INTERPRET (precompile_harness.py):
Triton compiles sm_90 binaries without a GPU, so they run on a CPU-only machine too.
"""
import json
import os
import subprocess
import sys

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

pytest.importorskip("triton")

from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend.runtime import triton_compile as TC  # noqa: E402

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "precompile_harness.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run_scenario(name: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET" and not k.startswith("TRACE_")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, HARNESS, name], capture_output=True, text=True, env=env, timeout=600)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, f"harness {name} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_specialization_matches_triton_jit_compile_keys():
    r = run_scenario("spec")
    assert r["checked"] == 16
    assert r["mismatches"] == []
    assert r["ptr_form_equal"]


def test_pool_fills_the_cache_the_main_process_hits():
    r = run_scenario("pool")
    # pointwise default config + the looped reduction's two autotune candidates
    assert r["submitted"] == 3 == r["items"]
    assert r["real_equals_precompiled"] == [True, True, True]
    assert r["hits"] == [True, True, True]            # every main-process compile was a cache hit
    # with 2 workers each distinct launcher signature (types and constexprs: the pointwise kernel and
    # the looped one's two candidates) is built by a request of
    # its own beside the compiles; without the CUDA toolchain the build reports False, not an error
    assert len(r["launcher_results"]) == 3
    assert all(res["ok"] and isinstance(res["launcher"], bool) for res in r["launcher_results"])
    assert r["cache_files"] > 0                       # in the TRITON_CACHE_DIR set after pool start
    (done,) = r["done_events"]
    assert done["kernels"] == 3 and done["ok"] == 3 and done["failed"] == 0 and done["workers"] == 2


def test_knobs_assigned_in_process_reach_the_workers():
    # inductor assigns knobs.nvidia.libdevice_path when it compiles; a worker that did not see it
    # compiled every kernel under another cache key, and the main process compiled them all again
    # (GPT-2's first call after inductor's, in one process on an H100: 9 s more)
    r = run_scenario("knobs")
    assert r["sent"]
    assert r["hits"] == [True] and r["key_mismatch"] == 0
    assert r["libdevice"] == [True]
    assert r["not_submitted"] == 1      # the one specialization compiled without the pool


@pytest.mark.parametrize("order", ["ptxas", "ptxas_stale"])
def test_workers_compile_under_the_main_process_backend_hash(order):
    # Triton caches the ptxas version (part of every compile key) once per process. Inductor set
    # TRITON_PTXAS_PATH after the main process had cached its version and before our workers
    # started: every binary they made missed (ResNet-50's and ViT-B/16's first calls on an H100,
    # 50 and 38 kernels compiled twice). "ptxas": the variable changes after the workers warmed up.
    r = run_scenario(order)
    assert r["items"] >= 1
    assert r["key_mismatch"] == 0, r["examples"]
    assert r["hits"] == [True] * r["items"]


def test_a_key_mismatch_names_the_setting_that_differs():
    # the timm models' first calls on the H100 missed every worker binary (key_mismatch 38 and
    # 50) with nothing known about why; each miss now says which option or variable differed
    r = run_scenario("mismatch")
    assert r["items"] >= 1 and r["key_mismatch"] == r["items"]
    assert len(r["differs"]) == r["items"]
    for differs in r["differs"]:
        assert any(d.startswith("enable_fp_fusion: worker=True main=False") for d in differs), differs
    assert all("enable_fp_fusion" in line for line in r["examples"])


def test_key_differences_show_where_long_values_differ():
    # two ptxas banners agree for their first hundred characters: the release must show
    banner = "ptxas: NVIDIA (R) Ptx optimizing assembler\nCopyright (c) 2005-2025 NVIDIA Corporation\n" \
             "Cuda compilation tools, release 12.8, V12.8.93"
    (line,) = TC.key_differences({"backend_hash": banner, "same": 1},
                                 {"backend_hash": banner.replace("12.8", "13.0"), "same": 1})
    assert "release 12.8" in line.split(" main=")[0] and "release 13.0" in line.split(" main=")[1]
    assert TC.key_differences({"a": 1, "only_worker": 2}, {"a": 1}) == ["only one side has only_worker"]


def test_worker_failure_and_timeout_fall_back_to_main_process():
    r = run_scenario("fallback")
    for mode in ("dies", "hangs", "never_ready"):
        assert r[mode]["compiled"] == "pw_kernel"
        assert r[mode]["hits"] == [False]             # compiled here, not by the worker
    assert r["hangs"]["was_running"] and len(r["hangs"]["fallback_events"]) == 1
    # a worker that dies right after starting: whether it had taken the request (a logged
    # fallback), or the pool saw it die first (the queued request cancelled or failed) depends
    # on scheduling on 2 busy CI cores; every order compiles the kernel here (asserted above)
    # and never logs more than one fallback
    assert len(r["dies"]["fallback_events"]) <= 1
    assert "Timeout" in r["hangs"]["fallback_events"][0]["error"]
    assert r["hangs"]["seconds"] < 60
    # a worker still starting never holds the main process up: the queued request is cancelled
    assert r["never_ready"]["cancelled"] == 1 and r["never_ready"]["fallback_events"] == []


def test_dynamic_sizes_need_hints_and_pick_the_variant():
    r = run_scenario("sizes")
    assert r["without_hints"] == 0
    assert r["small"] == [{"6": 4, "7": 1024}]        # persistent variant, RBLOCK = next_pow2(1000)
    assert len(r["large"]) == 2                       # looped: the two autotune candidates
    assert r["pool_with_1"]


def test_compile_threads_option():
    assert config.triton.compile_threads == 0
    assert 1 <= TC.pool_size() <= 16
    with config.patch({"triton.compile_threads": 3}):
        assert TC.pool_size() == 3
    config.reload({"TRACE_TRITON_COMPILE_THREADS": "1"})
    try:
        assert config.triton.compile_threads == 1 and TC.get_pool() is None
    finally:
        config.reload()


def test_interpreter_path_never_precompiles():
    from tracetorch import compiler
    before = dict(TC.STATS)

    def f(x):
        return (x.sin() * 2).sum(-1)
    x = torch.randn(8, 32)
    with config.patch({"backend.cpu_codegen": "triton", "backend.cache_enabled": False}):
        compiler.reset()
        out = compiler.compile(f)(x)
    torch.testing.assert_close(out, f(x))
    # nothing submitted or compiled ahead for the interpreter (on a GPU machine, a pool that
    # earlier CUDA tests of this process started may exist and finish its own work meanwhile)
    assert TC.STATS["submitted"] == before["submitted"] and TC.STATS["in_process"] == before["in_process"]
    if not torch.cuda.is_available():
        assert not TC._POOL


def test_cuda_launch_path_compiles_explicitly_and_launches_directly():
    r = run_scenario("launch")
    assert r["hits"] == [True] and r["kernels"] == 1
    assert r["n_calls"] == 2                            # first launch, then the plan's fast path
    assert r["grid"] == [[5, 1, 1, 1234]] * 2           # cdiv(5000, 1024) programs, torch's stream
    expected = ["torch.float32", "torch.bfloat16", "torch.bfloat16", 5000, 1024]
    assert r["args"] == [expected, expected]            # signature order, constexpr XBLOCK included
    assert r["packed_is_kernels"] == [True, True]


def test_the_worker_pool_starts_when_a_cuda_graph_arrives(monkeypatch):
    """The pool starts at the backend's entry for a graph with CUDA inputs (its start-up then
    overlaps aot and code generation), not only once the kernels are submitted; CPU graphs never
    start it. Fake CUDA tensors stand in for a GPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from tracetorch.compiler import backend
    from tracetorch.compiler.backend.runtime import triton_compile
    started = []
    monkeypatch.setattr(triton_compile, "pool_size", lambda: 4)
    monkeypatch.setattr(triton_compile, "current_target", lambda device=None: "target")
    monkeypatch.setattr(triton_compile, "get_pool", lambda size=None, target=None: started.append(target))
    backend._start_compile_workers([torch.randn(2), 3])
    assert started == []
    with FakeTensorMode():
        cuda_input = torch.empty(2, device="cuda")
    backend._start_compile_workers([cuda_input, 3])
    assert started == ["target"]
