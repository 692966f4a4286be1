"""tracetui: a Textual terminal browser for tracetorch traces and debug folders.

It reads traces only (ours and PyTorch's TORCH_TRACE logs, through `logs.trace_reader`)
and launches `debug` tools as subprocesses; it never imports the compiler.

    tracetui [PATH]          a debug run folder, a trace file or folder; default ./trace_debug/latest
    tracetui --summary PATH  plain-text overview, every graph break and recompile reason
    tracetui --demo          compile the demo model (tracetorch.debug.demo) and open its debug folder

Layout of the package: `model.py` builds frames/compiles from a trace (`extract.py` reads each
record kind, ours and PyTorch's); `app.py` is the App; `screens/` holds the overview (main),
replay, search, help, problems and minifier screens; `widgets/` the compile tree, the
compile-detail tabs and the replay timeline; `panes/` one file per detail tab.

Modules, in the order data flows through them:
    cli        the tracetui command line
    paths      what PATH means
    demo       runs the demo program
    model      what tracetui shows, built from a trace
    extract    records -> facts
    summary    --summary text
    app        the Textual app
    tabs       the detail tabs in order
    screens    overview, replay, search, help, problems, minify
    widgets    tree, totals, detail tabs, event list
    panes      one pane per detail tab
    debounce   latest-of-a-burst calls
    synthetic  a synthetic trace for tests and benchmarks
"""
