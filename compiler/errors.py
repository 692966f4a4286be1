"""Public error classes of tracetorch.

Every error a user can see from `compiler.compile` derives from `CompilerError`, so
`except compiler.errors.CompilerError` catches all of them. Messages say what was wrong and
what is valid; the frontend raises them without a chained internal traceback where the
traceback would only show our own code.

frontend-capture may subclass these (e.g. a more specific `GraphBreakError`).
"""
from __future__ import annotations


class CompilerError(Exception):
    """Base class of every error raised by tracetorch on purpose."""


class InvalidUsageError(CompilerError, TypeError):
    """The public API was called with something it cannot work with (e.g. a non-callable)."""


class UnknownBackendError(CompilerError, ValueError):
    """`backend=` named a backend that does not exist."""


class GraphBreakError(CompilerError):
    """A graph break happened while `fullgraph=True` forbids them.

    Carries the same information as the `graph_breaks` log: the reason, the instruction and
    the user's file:line with its source line.
    """

    def __init__(self, reason: str, *, filename: str | None = None, lineno: int | None = None,
                 source_line: str | None = None, instruction: str | None = None,
                 user_stack: list | None = None):
        self.reason = reason
        self.filename = filename
        self.lineno = lineno
        self.source_line = source_line
        self.instruction = instruction
        self.user_stack = user_stack or []
        super().__init__(self._format())

    @property
    def location(self) -> str:
        if self.filename is None:
            return "<unknown location>"
        return f"{self.filename}:{self.lineno}"

    def _format(self) -> str:
        lines = [f"Graph break in user code at {self.location}", f"    Reason: {self.reason}"]
        if self.source_line:
            lines.append(f"    Code: {self.source_line.strip()}")
        if self.instruction:
            lines.append(f"    Instruction: {self.instruction}")
        lines.append("fullgraph=True forbids graph breaks: remove the construct above, or "
                     "compile with fullgraph=False to run it eagerly between graphs.")
        return "\n".join(lines)

    def __reduce__(self):
        return (_rebuild_graph_break, (self.reason, self.filename, self.lineno,
                                       self.source_line, self.instruction))


def _rebuild_graph_break(reason, filename, lineno, source_line, instruction):
    return GraphBreakError(reason, filename=filename, lineno=lineno,
                           source_line=source_line, instruction=instruction)


class BackendCompilerFailed(CompilerError):
    """The backend raised while compiling a captured graph."""

    def __init__(self, backend_name: str, inner: BaseException):
        self.backend_name = backend_name
        self.inner = inner
        super().__init__(f"backend {backend_name!r} raised {type(inner).__name__}: {inner}")
        # notes added to the backend's error (e.g. the repro script path) stay the last lines
        for note in getattr(inner, "__notes__", []):
            self.add_note(note)


class RecompileLimitError(CompilerError):
    """The recompile limit was hit while `fullgraph=True` (no eager fallback allowed)."""


class PluginLoadError(CompilerError, RuntimeError):
    """A plugin that provides a feature the user switched on (e.g. TRACE_COMPILE_DEBUG=1 needs
    the debug plugin) could not be loaded: going on would silently drop that feature."""
