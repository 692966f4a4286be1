"""The compile-detail tabs: one pane per view of a compile (see tui/widgets/compile_detail.py).

Modules, in the order data flows through them:
    base        shared scrollable body
    summary     Summary tab
    source      Source tab
    breaks      Graph breaks tab
    guards      Guards tab
    recompiles  Recompiles tab
    graphs      FX graph tab
    ir          IR tab
    kernels     Kernels tab
    metrics     Metrics tab
    event       Event tab (replay)
"""
