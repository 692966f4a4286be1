"""Fixtures shared by the compiler tests."""
import logging

import pytest

from tracetorch import compiler, logs


@pytest.fixture
def events():
    """Every event of the test at DEBUG, every artifact's payload built, on a fresh compiler
    cache. Folders and modules that want fewer artifacts define their own `events` (the nearest
    definition wins: tests/compiler/frontend/conftest.py, test_symfloat_inputs.py, ...)."""
    with logs.testing.capture(level=logging.DEBUG) as got:
        compiler.reset()
        yield got
    compiler.reset()
