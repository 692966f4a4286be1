"""A few seeded split-reduction programs (fuzz/split_programs.py) in CI: compiled for the Triton
code generator and compared with eager exactly. At scale: scripts/fuzz_split_reductions.py."""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from tests.compiler.backend.fuzz.split_programs import check, generate  # noqa: E402

pytest.importorskip("triton")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_split_reduction_programs_match_eager(seed):
    program = generate(seed)
    why = check(program)
    assert not why, f"seed {seed}: {why}\n{program.source()}"
