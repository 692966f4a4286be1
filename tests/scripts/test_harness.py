"""scripts/harness.py: the benchmarks' cold-cache folders (a first call measured inside them is a
cold compile) leave nothing behind: environment, our config and the folder are restored."""
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scripts import harness  # noqa: E402
from tracetorch import compiler  # noqa: E402
from tracetorch.compiler import config  # noqa: E402


def test_cold_caches_compile_into_an_empty_folder_and_restore_everything(monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/else")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = (config.backend.cache_dir, config.triton.kernel_dir)
    x = torch.randn(8, 8)
    with harness.cold_caches() as root:
        assert os.environ["TRITON_CACHE_DIR"].startswith(root)
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(root)
        assert config.backend.cache_dir.startswith(root)
        compiler.reset()
        fn = compiler.compile(lambda a: (a * 2).relu() + 1)
        torch.testing.assert_close(fn(x), (x * 2).relu() + 1)
        # our compiled graph went into the new folder, not the user's cache
        assert any(files for _, _, files in os.walk(os.path.join(root, "tracetorch")))
    assert not os.path.exists(root)
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/else"
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert (config.backend.cache_dir, config.triton.kernel_dir) == before



def test_native_checks_ready_reports_the_extension_status():
    # the timing scripts wait for the native checks before steady-state timing and report it
    from tracetorch.compiler import native_checks
    status = harness.native_checks_ready(timeout=600)
    assert status == native_checks._NATIVE.status
    assert status in ("loaded", "unavailable")
    assert (status == "loaded") == (native_checks.native() is not None)
