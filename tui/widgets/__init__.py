"""Widgets of tracetui (one per file).

Modules, in the order data flows through them:
    totals          the overview counts
    compile_tree    frames and compile ids
    compile_detail  the detail tabs
    event_list      the replay timeline
"""
