"""tracetui: a Textual terminal browser for tracetorch traces and debug folders.

It reads traces only (ours and PyTorch's TORCH_TRACE logs, through `logs.trace_reader`)
and launches `debug` tools as subprocesses; it never imports the compiler.
"""
