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


def test_step_host_profile_says_what_it_needs_without_a_gpu(capsys, monkeypatch):
    """scripts/step_host_profile.py compares host and wall time per step: without a CUDA device it
    stops with a one-line reason (no traceback); an unknown model names the valid ones."""
    import pytest
    from scripts import step_host_profile
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exc:
        step_host_profile.main(["resnet50"])
    assert exc.value.code == 2 and "needs a CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        step_host_profile.main(["no_such_model"])
    assert "invalid choice" in capsys.readouterr().err
