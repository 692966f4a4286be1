"""Screens of tracetui (one per file)."""
