"""Fixtures for the tracetui tests (see tui_trace_fixtures.py)."""

from pathlib import Path

import pytest

from tracetorch.tui.synthetic import write_synthetic_trace
from tui_trace_fixtures import (cached_torch_trace, make_our_debug_run, normalized_our_run,
                                shared_fixture_root)


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory) -> Path:
    """The run's folder for programs and traces (pytest's tmp dirs; shown as /fixtures)."""
    return shared_fixture_root(tmp_path_factory)


@pytest.fixture(scope="session")
def synthetic_trace(tmp_path_factory) -> Path:
    """Our wire format through logs' writer: frames with a break, a recompile, kernels, a failure."""
    return write_synthetic_trace(tmp_path_factory.mktemp("syn") / "trace_1.log", fail=True)


@pytest.fixture(scope="session")
def torch_trace(tmp_path_factory, fixture_root) -> Path:
    """A real PyTorch TORCH_TRACE log (graph break + recompile), normalized for snapshots;
    made by torch.compile in a subprocess (cached per torch version)."""
    return cached_torch_trace(fixture_root, tmp_path_factory.mktemp("torch"))


@pytest.fixture(scope="session")
def our_debug_run(tmp_path_factory, fixture_root) -> Path:
    """A debug run folder written by our compiler (compiler.compile, TRACE_COMPILE_DEBUG=1)."""
    return make_our_debug_run(fixture_root, tmp_path_factory.mktemp("ours") / "trace_debug")


@pytest.fixture(scope="session")
def our_trace(our_debug_run, fixture_root) -> Path:
    """That debug run folder, normalized for snapshots (clock, pid, timings, object ids,
    addresses, module paths, versions, the machine's libmvec declarations)."""
    return normalized_our_run(fixture_root, our_debug_run)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests in this folder with asyncio (no async plugin is installed)."""
    import asyncio
    import inspect

    if inspect.iscoroutinefunction(pyfuncitem.obj):
        names = pyfuncitem._fixtureinfo.argnames
        asyncio.run(pyfuncitem.obj(**{n: pyfuncitem.funcargs[n] for n in names}))
        return True
    return None

