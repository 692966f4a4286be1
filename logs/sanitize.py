"""Make text from a trace safe to show on a terminal.

A trace is untrusted input: a string in it (a break reason, a guard, a kernel or function name,
a file name, a payload) could carry terminal escape sequences (OSC 52 clipboard writes, OSC 2
title changes, cursor movement that overwrites lines). `clean` replaces every C0 control
character except newline and tab, DEL, every C1 control character (U+0080-U+009F, which some
terminals take as 8-bit CSI/OSC) and the bidirectional overrides (which reorder what is shown)
by a visible escape such as `\\x1b`, so nothing reaches the terminal as a control code and the
user still sees that something was there.
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["clean", "clean_deep", "needs_cleaning", "UNSAFE"]

# C0 but \t and \n, DEL, C1, and the bidi embedding/override/isolate controls.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# The same characters as JSON \u escapes (an envelope or JSON payload decodes them).
# (\b, \f and \r are JSON's short escapes of C0 characters; a false hit only costs a walk.)
_ESCAPED = re.compile(r"\\(?:[bfr]|u(?:00[01][0-9a-fA-F]|007[fF]|00[89][0-9a-fA-F]|202[a-eA-E]|206[6-9]))")


def _visible(m: re.Match) -> str:
    o = ord(m.group())
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def clean(text: str) -> str:
    """`text` with every unsafe control character written as a visible escape."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    return UNSAFE.sub(_visible, text) if UNSAFE.search(text) else text


def needs_cleaning(raw: str) -> bool:
    """Whether decoding `raw` (JSON text) can produce an unsafe character (cheap pre-check)."""
    return bool(UNSAFE.search(raw) or _ESCAPED.search(raw))


def clean_deep(value: Any, _depth: int = 0) -> Any:
    """`clean` applied to every string (keys too) of a decoded JSON value."""
    if isinstance(value, str):
        return clean(value)
    if _depth > 200:   # absurd nesting (damage): nothing under it is shown
        return None
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean_deep(v, _depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [clean_deep(v, _depth + 1) for v in value]
    return value
