"""Fixtures for the tracetui tests (see tui_trace_fixtures.py)."""

import pickle
from pathlib import Path

import pytest

from svg_text import screen_diff
from tracetorch.tui.synthetic import write_synthetic_trace
from tui_trace_fixtures import (cached_torch_trace, make_our_debug_run, normalized_our_run,
                                shared_fixture_root)


@pytest.fixture
def snap_compare(snap_compare, request):
    """pytest-textual-snapshot's snap_compare; on a mismatch the failure report also gets the
    text diff of the two screens (section "snapshot screen diff", see svg_text.py)."""
    from pytest_textual_snapshot import node_to_report_path

    def compare(*args, **kwargs):
        ok = snap_compare(*args, **kwargs)
        if not ok:
            # the plugin pickles (result, expected svg, actual svg, ...) for its HTML report
            data = pickle.loads(node_to_report_path(request.node).read_bytes())
            request.node.add_report_section("call", "snapshot screen diff",
                                            screen_diff(data[1] or "", data[2] or ""))
        return ok

    return compare


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


@pytest.fixture(scope="session")
def value_recompile_traces(fixture_root) -> dict:
    """{"torch": folder, "ours": folder}: recompiles on a float argument, then on a module
    attribute (issue 18, question 2), from torch.compile and compiler.compile in subprocesses."""
    from tui_trace_fixtures import VALUE_RECOMPILE_PROGRAM, program_trace
    return {w: program_trace(fixture_root, "value_recompile", VALUE_RECOMPILE_PROGRAM, w)
            for w in ("torch", "ours")}


@pytest.fixture(scope="session")
def loop_break_traces(fixture_root) -> dict:
    """A data-dependent branch inside a loop, under both compilers (issue 18 (4))."""
    from tui_trace_fixtures import LOOP_PROGRAM, program_trace
    return {w: program_trace(fixture_root, "loop_break", LOOP_PROGRAM, w, target="f")
            for w in ("torch", "ours")}


@pytest.fixture(scope="session")
def crash_traces(fixture_root) -> dict:
    """A process killed (SIGSEGV) by its backend inside the second compile (issue 18 (9))."""
    from tui_trace_fixtures import crash_trace
    return {w: crash_trace(fixture_root, w) for w in ("torch", "ours")}


@pytest.fixture(scope="session")
def inductor_torch_trace(fixture_root):
    """torch.compile with inductor (C++ kernels on CPU) under TORCH_TRACE (issue 18 (8))."""
    from tui_trace_fixtures import INDUCTOR_PROGRAM, program_trace
    return program_trace(fixture_root, "inductor", INDUCTOR_PROGRAM, "torch_inductor", target="f")


@pytest.fixture(scope="session")
def gpt_traces(fixture_root) -> dict:
    """The issue-18 GPT-style model under both compilers (see gpt_program.py)."""
    from tui_trace_fixtures import gpt_traces as make
    return make(fixture_root)


@pytest.fixture(scope="session")
def inductor_provenance_trace(fixture_root):
    """As inductor_torch_trace, with inductor's provenance tracking on (its mapping records)."""
    from tui_trace_fixtures import INDUCTOR_PROVENANCE_PROGRAM, program_trace
    return program_trace(fixture_root, "inductor_prov", INDUCTOR_PROVENANCE_PROGRAM,
                         "torch_inductor", target="f")
