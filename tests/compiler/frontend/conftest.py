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
    got = []
    sink = logs.add_sink(got.append, level=logging.DEBUG,
                         artifacts={"recompiles", "recompile", "guards"})
    compiler.reset()
    yield got
    logs.remove_sink(sink)
    compiler.reset()
