"""Widgets of tracetui (one per file)."""
