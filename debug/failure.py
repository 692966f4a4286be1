"""What went wrong, in a form that survives a process boundary and can be compared.

A `Failure` records where it happened (`kind`: compile_error, runtime_error, accuracy, crash,
timeout), the exception type and message, and the full text (traceback or mismatch report) that
`--check-str` regexes are matched against. `matches()` decides whether a candidate failure is
"the same bug" as the one being minified: by default same kind and same exception type; with a
check-str, the regex must also match the text, so an accuracy bug is never minified into some
unrelated crash that happens to be easier to trigger.
"""

from __future__ import annotations

import re
import signal
import traceback
from dataclasses import asdict, dataclass

KINDS = ("compile_error", "runtime_error", "accuracy", "crash", "timeout")


@dataclass
class Failure:
    kind: str
    type: str
    message: str
    text: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "Failure | None":
        if not d:
            return None
        return cls(kind=d.get("kind", "runtime_error"), type=d.get("type", ""),
                   message=d.get("message", ""), text=d.get("text", d.get("message", "")))

    def headline(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.kind}: {self.type}: {first}" if self.type else f"{self.kind}: {first}"


def from_exception(kind: str, exc: BaseException) -> Failure:
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ in ("builtins", "__main__") else f"{cls.__module__}.{cls.__qualname__}"
    text = "".join(traceback.format_exception(exc))
    return Failure(kind=kind, type=name, message=str(exc), text=text)


def from_exitcode(exitcode: int, output_tail: str) -> Failure:
    """A worker process that died without reporting: a signal (segfault, abort) or a hard exit."""
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        message = f"process killed by {name}"
    else:
        name = f"exit {exitcode}"
        message = f"process exited with code {exitcode} without reporting a result"
    return Failure(kind="crash", type=name, message=message, text=message + "\n" + output_tail)


def timeout_failure(seconds: float) -> Failure:
    msg = f"candidate did not finish within {seconds:.0f}s (hang or very slow compile)"
    return Failure(kind="timeout", type="Timeout", message=msg, text=msg)


def compile_check_str(pattern: str | None):
    if pattern is None:
        return None
    return re.compile(pattern, re.MULTILINE)


def matches(candidate: Failure | None, target: Failure, check_str=None) -> bool:
    """Is `candidate` the same failure as `target` (the one we are reproducing/minifying)?"""
    if candidate is None:
        return False
    if check_str is not None:
        regex = check_str if hasattr(check_str, "search") else compile_check_str(check_str)
        return regex.search(candidate.text) is not None or regex.search(candidate.message) is not None
    if candidate.kind != target.kind:
        return False
    # Accuracy failures have no exception type worth comparing; others must raise the same class.
    return candidate.kind == "accuracy" or candidate.type == target.type
