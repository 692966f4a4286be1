"""Errors of the capture side of the frontend.

`Unsupported` is raised inside the symbolic evaluator for anything it will not capture; the
evaluator turns it into a graph break (or, with fullgraph=True, into `FullgraphError`, which
the user sees). `RestartAnalysis` makes capture_frame trace the frame again with more
knowledge (where to break), as Dynamo does.
"""
from __future__ import annotations

from typing import NamedTuple

from tracetorch.compiler.errors import GraphBreakError


class UserFrame(NamedTuple):
    """Where in the user's code the evaluator is: one frame of the user stack (pycparser's
    Coord, with the instruction and the columns of the expression being run)."""
    filename: str
    lineno: int
    source_line: str            # stripped
    instruction: str            # the bytecode instruction, formatted
    function: str
    col: int | None = None      # columns of the expression on its line, when known
    end_col: int | None = None

    def __str__(self):
        return f"{self.filename}:{self.lineno} in {self.function}: {self.source_line}"


class Unsupported(Exception):
    """Something the evaluator will not capture; becomes a graph break."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        # the UserFrame of each inlined frame, innermost last, filled in while the exception
        # travels out through inlined calls
        self.user_stack: list[UserFrame] = []


class FinishCapture(Exception):
    """The root tracer reached the end of what this capture takes (a planned break, a stop
    point, the return): its argument says which, capture.py emits the code for it."""


class RestartAnalysis(Exception):
    """Trace the frame again; the evaluator's plan (break_at / stop_at) was updated."""


class FullgraphError(GraphBreakError):
    """A graph break under fullgraph=True: the reason, the instruction, the user's
    file:line, the source line with a caret under the offending expression, and the stack of
    inlined calls that led there."""

    def __init__(self, reason, *, filename=None, lineno=None, source_line=None,
                 instruction=None, user_stack=None, col=None, end_col=None):
        self.col = col
        self.end_col = end_col
        super().__init__(reason, filename=filename, lineno=lineno, source_line=source_line,
                         instruction=instruction, user_stack=user_stack)

    def _format(self) -> str:
        lines = [f"Graph break in user code at {self.location}", f"    Reason: {self.reason}"]
        if self.source_line:
            text = self.source_line.rstrip()
            stripped = text.lstrip()
            lines.append(f"    {stripped}")
            if self.col is not None:
                indent = len(text) - len(stripped)
                start = max(self.col - indent, 0)
                width = max((self.end_col or self.col + 1) - self.col, 1)
                lines.append("    " + " " * start + "^" * min(width, max(len(stripped) - start, 1)))
        if self.instruction:
            lines.append(f"    Instruction: {self.instruction}")
        if len(self.user_stack) > 1:
            lines.append("    User stack (outermost first):")
            for frame in self.user_stack:
                lines.append(f"      {frame}")
        lines.append("fullgraph=True forbids graph breaks: remove the construct above, or "
                     "compile with fullgraph=False to run it eagerly between graphs.")
        return "\n".join(lines)
