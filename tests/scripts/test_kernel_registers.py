"""scripts/kernel_registers.py: generated Triton kernels compiled for sm_90 on a machine without a
GPU, their registers and spills read from the binary. The case is the one that made the script:
an outer reduction (column sums of a row-major matrix) over 2048 rows as one persistent
32x2048 tile spills, the looped kernel the code generator now makes does not; both compiled
graphs agree with eager."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from tracetorch.compiler import config  # noqa: E402
from tests.compiler.backend.cpp_test_utils import assert_same, compile_fn, compiled_graph  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def column_statistics(x, y, z):
    t = x * y - z
    return t.sum(0), (t * t).sum(0)


def write_output_code(tmp_path, name, options):
    torch.manual_seed(0)
    inputs = [torch.randn(2048, 64) for _ in range(3)]
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False, **options}):
        rt = compile_fn(column_statistics, inputs)
    assert_same(rt(*inputs), column_statistics(*inputs))
    folder = tmp_path / name
    folder.mkdir()
    (folder / "output_code.py").write_text(compiled_graph(rt).code)
    return folder


def run_script(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}   # compile for the GPU
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "kernel_registers.py"), *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def kernel_rows(stdout):
    """(kind, registers, spill bytes) of each row of the script's table."""
    rows = []
    for line in stdout.splitlines():
        if line.startswith("kernel") and not line.startswith("kernel "):
            regs, spill = re.search(r"(\d+) +(\d+) +\d+/64  ld \d+v/\d+s st \d+v/\d+s$", line).groups()
            rows.append((" ".join(line[57:73].split()), int(regs), int(spill)))
    return rows


def test_a_wide_outer_reduction_spills_as_one_tile_and_not_when_looped(tmp_path):
    looped = write_output_code(tmp_path, "looped", {})
    tile = write_output_code(tmp_path, "tile", {"triton.persistent_outer_reduction_max": 4096,
                                                "triton.persistent_outer_small_max": 4096})

    ok = run_script(looped, "--fail-on-spill")
    assert ok.returncode == 0, ok.stderr[-2000:]
    rows = kernel_rows(ok.stdout)
    assert rows and all(kind == "looped outer" and regs > 0 and spill == 0 for kind, regs, spill in rows), ok.stdout
    assert "0 kernels spill" in ok.stdout

    bad = run_script(tile, "--fail-on-spill")
    assert bad.returncode == 1, bad.stdout + bad.stderr[-2000:]
    rows = kernel_rows(bad.stdout)
    assert rows and all(kind == "persistent outer" and spill > 0 for kind, _, spill in rows), bad.stdout


def test_bad_arguments_say_what_is_expected(tmp_path):
    empty = run_script(tmp_path)
    assert empty.returncode != 0 and "no output_code.py" in empty.stderr and "Traceback" not in empty.stderr
    neither = run_script()
    assert neither.returncode == 2 and "give either a path or --model" in neither.stderr


def merge_heads(q, k):
    """Attention-shaped values [B, H, T, 64] back to [B, T, H * 64], two of them concatenated (the
    q/k gradients into the fused projection's): each output row of 64 is contiguous in q."""
    b, h, t, d = q.shape
    return torch.cat([q.transpose(1, 2).reshape(b, t, h * d), k.transpose(1, 2).reshape(b, t, h * d) * 2], -1)


def test_a_head_merge_indexes_its_digits_from_the_flat_index_and_loads_vectors(tmp_path):
    """The merged index of the head dim is a div and a mod of one output variable; taken from
    the flat index itself (`xindex % 64`, `(xindex // 64) % 4`) Triton proves 4 contiguous
    elements per load, where the same digits of `xindex % 256` came out as single loads."""
    torch.manual_seed(0)
    inputs = [torch.randn(2, 4, 8, 64) for _ in range(2)]
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False}):
        rt = compile_fn(merge_heads, inputs)
    assert_same(rt(*inputs), merge_heads(*inputs))
    code = compiled_graph(rt).code
    assert "% 64)" in code and "x2_mod64" in code, code
    folder = tmp_path / "heads"
    folder.mkdir()
    (folder / "output_code.py").write_text(code)
    res = run_script(folder)
    assert res.returncode == 0, res.stderr[-2000:]
    loads = [re.search(r"ld (\d+)v/(\d+)s", line) for line in res.stdout.splitlines() if "_cat" in line]
    assert loads and all(m and int(m.group(1)) >= 2 for m in loads), res.stdout


def test_resident_warps_follow_the_register_file():
    """65536 registers per SM, allocated per warp in units of 256: session 22's spilling
    32x1024 tile (255 registers, 8 warps) left one program of 8 warps per SM; the looped kernel
    that replaced it (40 registers, 4 warps) fits 12 programs, 48 warps."""
    sys.path.insert(0, str(ROOT))
    from scripts.kernel_registers import resident_warps
    assert resident_warps(255, 8) == 8
    assert resident_warps(40, 4) == 48
    assert resident_warps(32, 8) == 64
    assert resident_warps(0, 4) == 0
