"""The compile-detail tabs: one pane per view of a compile (see tui/widgets/compile_detail.py)."""
