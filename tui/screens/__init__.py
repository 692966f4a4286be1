"""Screens of tracetui (one per file).

Modules, in the order data flows through them:
    main      the overview
    replay    the event timeline
    search    the search dialog
    help      F1 help
    problems  what the reader could not use
    minify    the minifier, after confirmation
"""
