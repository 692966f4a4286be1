"""Issue 18 (10): at repro level 4 (accuracy checks), repro.py is not rewritten before every
compile: it is written for a failure only, and a later passing compile leaves it alone."""
import os

import torch
import torch.fx as fx

from tracetorch.compiler import config
from tracetorch.debug import accuracy, repro_wrapper, run_dir
from models import relu_chain  # tests/debug (on sys.path: no __init__)
from standin_backend import buggy_compile


def _compile(tmp_path, level, bug, blocks=4):
    gm = fx.symbolic_trace(lambda x, w: relu_chain(x, w, blocks, 1))
    with config.patch(**{"repro.after": "backend", "repro.level": level,
                         "testing.inject_relu_bug": bug, "debug.debug_dir": str(tmp_path)}):
        wrapped = repro_wrapper.wrap(buggy_compile, "backend")
        try:
            wrapped(gm, [torch.randn(8, 8), torch.randn(8, 8)])
        except accuracy.AccuracyError:
            pass
        # inside the patch: the run folder lives under tmp_path, not the working directory
        return os.path.join(run_dir.get_run_dir(), "repro", "repro.py")


def test_level_4_writes_no_repro_for_passing_compiles(tmp_path):
    run_dir._reset_for_tests()
    path = _compile(tmp_path, 4, None)
    _compile(tmp_path, 4, None, blocks=5)
    assert not os.path.exists(path)


def test_level_4_keeps_the_failure_repro_across_later_compiles(tmp_path):
    run_dir._reset_for_tests()
    path = _compile(tmp_path, 4, "accuracy")
    first = open(path).read()
    assert "ACCURACY = True" in first
    _compile(tmp_path, 4, None, blocks=5)            # a later compile that passes
    assert open(path).read() == first


def test_level_3_still_writes_before_every_compile(tmp_path):
    run_dir._reset_for_tests()
    path = _compile(tmp_path, 3, None)
    assert os.path.isfile(path)
