"""Screen text of a Textual SVG screenshot, for readable snapshot failures.

A mismatched snapshot otherwise says only `assert False`, and its HTML report stays on the
machine that ran the tests (CI's): the text rows of both screens, diffed, say what changed.
"""

from __future__ import annotations

import difflib
import html
import re

_TEXT = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', re.S)


def screen_lines(svg: str) -> list[str]:
    """The screen's rows, top to bottom, as plain text (styles dropped)."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in _TEXT.finditer(svg):
        x, y, text = m.groups()
        rows.setdefault(float(y), []).append((float(x), html.unescape(text)))
    return ["".join(t for _, t in sorted(cells)).replace("\xa0", " ").rstrip()
            for _, cells in sorted(rows.items())]


def screen_diff(expected_svg: str, actual_svg: str) -> str:
    """The unified diff of two screenshots' text rows."""
    diff = difflib.unified_diff(screen_lines(expected_svg), screen_lines(actual_svg),
                                "expected screen", "actual screen", lineterm="", n=1)
    return "\n".join(diff) or "(same text: the difference is in colours or styles)"
