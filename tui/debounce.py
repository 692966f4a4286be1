"""Run the latest of a burst of calls once things are quiet (held-down j/k keys): the cursor
moves at once, the costly detail pane renders only where the user stops."""

from __future__ import annotations

from typing import Callable

DELAY_S = 0.08


class Debouncer:
    def __init__(self, widget, delay: float = DELAY_S):
        self.widget, self.delay = widget, delay
        self._timer = None
        self._fn: Callable[[], None] | None = None

    def schedule(self, fn: Callable[[], None]) -> None:
        self._fn = fn
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.widget.set_timer(self.delay, self.flush)

    def flush(self) -> None:
        """Run the pending call now (before anything that depends on its result)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()

    def cancel(self) -> None:
        """Drop the pending call (something newer is about to be shown)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._fn = None
