import os
import sys
from pathlib import Path

import torch

# The tests use the installed names (tracetorch.compiler, ...). `python -m pytest` from the
# repository root puts the root on sys.path (tests import tests.* and scripts.* helpers from
# there), where compiler/, logs/, debug/ and tui/ would also import under their bare folder
# names, as a second copy of each module. In the test process those bare names are an error.
_ROOT = str(Path(__file__).resolve().parents[1])


class _NoBareNames:
    """A meta path finder that refuses `import compiler` & co. when it would load our folders."""

    NAMES = ("compiler", "logs", "debug", "tui")

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name in cls.NAMES and os.path.isfile(os.path.join(_ROOT, name, "__init__.py")):
            raise ImportError(f"tests must import tracetorch.{name}, not the bare folder name {name!r}")
        return None


sys.meta_path.insert(0, _NoBareNames)

# Triton kernels for CPU tensors run in Triton's interpreter, which must be switched on before
# triton is first imported (its own @jit helpers are made interpretable at import time).
# On a machine with a GPU the real Triton is used instead.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


# --- backend-core: one compiled-code cache per test session (C++ kernels shared across tests) ---
import pytest as _pytest_backend  # noqa: E402


@_pytest_backend.fixture(scope="session", autouse=True)
def backend_cache_dir(tmp_path_factory):
    """Point compiler.backend's on-disk cache (graphs + C++ shared objects) at a session tmp dir,
    for every test: a test that checks a compile's events must not be served from the cache of an
    earlier run (nor write into the user's ~/.cache/tracetorch)."""
    from tracetorch.compiler import config
    d = tmp_path_factory.mktemp("tracetorch_cache")
    with config.patch(**{"backend.cache_dir": str(d)}):
        yield d


@_pytest_backend.fixture(scope="session", autouse=True)
def _verify_every_schedule():
    """Every schedule compiled in the tests is checked by compiler/backend/scheduler/verify.py."""
    from tracetorch.compiler import config
    with config.patch(**{"backend.verify_schedule": True}):
        yield


@_pytest_backend.hookimpl(trylast=True)
def pytest_configure(config):
    """Nothing written into the repository: pytest-textual-snapshot's HTML report (written by
    the xdist controller, on failures) goes under pytest's base temp, and hypothesis keeps no
    example database in the working directory."""
    if config.getoption("--snapshot-report", default=None) == "snapshot_report.html":
        factory = getattr(config, "_tmp_path_factory", None)
        if factory is not None:
            config.option.snapshot_report = str(factory.getbasetemp() / "snapshot_report.html")
    try:
        from hypothesis import settings
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        return
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:        # its other caches (e.g. constants) under pytest's base temp
        set_hypothesis_home_dir(factory.getbasetemp() / ".hypothesis")
    settings.register_profile("tracetorch-tests", database=None)
    settings.load_profile("tracetorch-tests")
