"""Repro scripts and the minifier against our real backend with config.testing.inject_relu_bug.

For each bug kind, on a model whose post-aot graph has 50+ nodes and one relu deep inside:
the failure writes repro.py, the repro reproduces in a fresh process, `--minify` shrinks it to
at most 3 nodes including the relu, and repro_minified.py reproduces too. A --check-str that
names a different error is never accepted.
"""
import os
import re

import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler import config
from tracetorch.debug import run_dir
from tests.debug.helpers import compute_nodes, is_relu, load_script_graph, run_script
from tests.debug.models import ReluDeep

# What each injected bug looks like in the error text (set by the C++ code generator).
BUG_TEXT = {
    "compile_error": r"tt_injected_compile_error",
    "runtime_error": r"injected relu runtime error",
    "accuracy": r"accuracy mismatch",
}
OTHER_ERROR = r"this text appears in no error at all"


def _notes(exc):
    """Notes of the exception and of everything it was raised from."""
    out = []
    while exc is not None:
        out += getattr(exc, "__notes__", [])
        exc = exc.__cause__ or exc.__context__
    return out


def _trigger(bug, tmp_path):
    """Compile and run the model with the bug injected; return the repro path from the error."""
    run_dir._reset_for_tests()
    compiler.reset()
    torch.manual_seed(0)
    opt = compiler.compile(ReluDeep())
    level = 4 if bug == "accuracy" else 2
    with config.patch(**{"repro.after": "backend", "repro.level": level,
                         "testing.inject_relu_bug": bug, "debug.debug_dir": str(tmp_path)}):
        with pytest.raises(Exception) as info, torch.no_grad():
            opt(torch.randn(8, 8))
    compiler.reset()
    notes = [n for n in _notes(info.value) if "repro script" in n]
    assert notes, f"no repro note on the error: {info.value!r}"
    path = re.search(r"repro script for this failure: (\S+)", notes[0]).group(1)
    assert os.path.isfile(path)
    assert os.path.isfile(os.path.join(os.path.dirname(path), "minifier_launcher.py"))  # level >= 2
    return path


@pytest.mark.parametrize("bug", ["compile_error", "runtime_error", "accuracy"])
def test_repro_reproduces_and_minifies(bug, tmp_path):
    repro = _trigger(bug, tmp_path)
    gm = load_script_graph(repro)
    nodes = compute_nodes(gm)
    assert len(nodes) >= 50
    assert sum(is_relu(n) for n in nodes) == 1

    # A fresh process reproduces it: non-zero exit, the original error on stderr.
    r = run_script(repro)
    assert r.returncode == 1, r.stderr[-3000:]
    assert re.search(BUG_TEXT[bug], r.stderr), r.stderr[-3000:]

    if bug == "compile_error":  # once is enough: the check is the same for every kind
        _check_str_rejects_other_errors(repro)

    r = run_script(repro, "--minify", "--check-str", BUG_TEXT[bug])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[minifier]" in r.stderr and "nodes left" in r.stderr   # the progress line
    minified = os.path.join(os.path.dirname(repro), "repro_minified.py")
    small = compute_nodes(load_script_graph(minified))
    assert 1 <= len(small) <= 3, [n.format_node() for n in small]
    assert any(is_relu(n) for n in small)
    assert os.listdir(os.path.join(os.path.dirname(repro), "checkpoints"))  # checkpoint per success

    r = run_script(minified)
    assert r.returncode == 1, r.stderr[-3000:]
    assert re.search(BUG_TEXT[bug], r.stderr)


def _check_str_rejects_other_errors(repro):
    """A --check-str naming another error is never accepted as the failure to minify: the
    minifier stops after its sanity runs and writes nothing."""
    r = run_script(repro, "--minify", "--check-str", OTHER_ERROR)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "did not reproduce" in r.stderr
    assert not os.path.exists(os.path.join(os.path.dirname(repro), "repro_minified.py"))
