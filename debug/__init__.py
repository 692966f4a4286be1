"""Debugging tools built on the compiler's event stream.

TRACE_COMPILE_DEBUG dump folders, the explain report, repro scripts and the minifier.
`debug` imports `compiler` and `logs`; the compiler reaches it only through the hooks
that `debug` registers (the `tracetorch.plugins` entry point), never by importing it.

Modules, in the order data flows through them:
    plugin         installs the debug folder and repro wrappers through compiler.hooks
    run_dir        the per-process run folder
    debug_dir      TRACE_COMPILE_DEBUG: events filed into the folder
    repro_wrapper  TRACE_REPRO_AFTER: catch a stage's failures
    failure        what went wrong, comparable across processes
    inputs         input metadata of repro scripts
    graph_code     FX graphs as standalone source
    repro_writer   writes repro.py
    repro_cli      the repro scripts' command line
    candidate      run one candidate graph and say how it fails
    accuracy       float64-reference accuracy judgement
    minifier       shrink a failing graph
    demo           the demo program of tracetui --demo
"""
