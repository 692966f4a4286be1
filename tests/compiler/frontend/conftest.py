"""Fixtures shared by the frontend tests."""
import logging

import pytest

from tracetorch import compiler
from tracetorch import logs


@pytest.fixture
def events():
    """Every recompile record, recompiles artifact and guards artifact (and DEBUG log records)
    of the test, on a fresh compiler cache. Test modules that need other artifacts define their
    own `events`."""
    with logs.testing.capture(level=logging.DEBUG, artifacts={"recompiles", "recompile", "guards"}) as got:
        compiler.reset()
        yield got
    compiler.reset()
