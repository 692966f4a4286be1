"""Debugging tools built on the compiler's event stream.

TRACE_COMPILE_DEBUG dump folders, the explain report, repro scripts and the minifier.
`debug` imports `compiler` and `logs`; the compiler reaches it only through the hooks
that `debug` registers (the `tracetorch.plugins` entry point), never by importing it.
"""
