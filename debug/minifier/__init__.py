"""The minifier: shrink a failing graph while it keeps failing the same way.

Modules, in the order data flows through them:
    search       the search: strategies (truncate, delta debugging, ...) over candidate graphs
    graph_edits  the edits made to a failing graph (each returns a new graph)
    pool         run candidate scripts in isolated processes, several at a time, with timeouts
    warmup       preloaded once by the pool's forkserver: pays the lazy import costs there
    worker       body of one candidate process: run a candidate and report how it failed
"""
