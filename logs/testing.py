"""Helpers for tests and scripts that look at the events a piece of code emits.

    from tracetorch.logs import testing
    with testing.capture(names={"recompile"}) as events:
        opt(x)
    assert [e.fields["reason"] for e in events] == [...]
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from tracetorch.logs.core import add_sink, remove_sink
from tracetorch.logs.events import Event

_FROM_NAMES = object()     # capture()'s default `artifacts`: see its docstring


@contextmanager
def capture(names: Iterable[str] | None = None, *, levels: Iterable[int] | None = None,
            level: int | None = None, artifacts=_FROM_NAMES) -> Iterator[list[Event]]:
    """Collect the events emitted inside the `with` block into the list it yields.

    names: keep only events with these names (artifacts, trace records, log calls' event names);
      None keeps every event the sink receives.
    levels: keep only events at these levels (logging.WARNING, ...); None keeps every level.
    level, artifacts: what the sink asks logs for, as in `logs.add_sink`. `artifacts` defaults to
      `names` when names are given (so no other artifact's payload is built) and to "all" when not.
    The sink is removed when the block exits, also when it raises; the list keeps what it got."""
    wanted = None if names is None else frozenset(names)
    at_levels = None if levels is None else frozenset(levels)
    if artifacts is _FROM_NAMES:
        artifacts = "all" if wanted is None else wanted
    events: list[Event] = []

    # a new function per capture: remove_sink matches by equality, so nested captures (or a
    # test's own sink using events.append) stay separate
    def sink(event: Event) -> None:
        if (wanted is None or event.name in wanted) and (at_levels is None or event.level in at_levels):
            events.append(event)

    add_sink(sink, level=level, artifacts=artifacts)
    try:
        yield events
    finally:
        remove_sink(sink)
