"""The compile-detail tabs by id and title, in order (keys 1-9 pick the first nine, 0 the tenth).

Apart from the pane classes (widgets/compile_detail.py) so that the overview's key bindings and
the command palette do not import every pane before the first paint."""

TAB_TITLES = [("summary", "Summary"), ("source", "Source"), ("breaks", "Breaks"),
              ("guards", "Guards"), ("recompiles", "Recompiles"), ("graphs", "FX graph"),
              ("ir", "IR"), ("kernels", "Kernels"), ("metrics", "Metrics"), ("event", "Event")]
TAB_IDS = [tab_id for tab_id, _ in TAB_TITLES]
