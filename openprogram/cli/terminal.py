"""Text from a recording or a file name, made harmless to print on a terminal.

A recording can be edited by hand and a file can be named anything: an ESC sequence in a model
name, an error message or a file name would otherwise reach the terminal raw and could move the
cursor, rewrite earlier lines, retitle the window or hide text. Every command prints such text
through :func:`terminal_safe`, which shows each control character as a visible escape instead.
JSON output is left alone: the encoder already escapes control characters.
"""

from __future__ import annotations

import os
import re

#: C0 controls (ESC among them), DEL, C1 controls, and the Unicode controls that reorder or
#: separate lines (bidirectional overrides and isolates, line and paragraph separators).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_KEEPING_NEWLINES = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: object, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as ``\\xNN`` (or ``\\uNNNN``); with
    ``multiline``, line feeds are kept (conversation content), everything else is escaped."""
    pattern = _UNSAFE_KEEPING_NEWLINES if multiline else _UNSAFE
    return pattern.sub(_escape, os.fspath(text) if isinstance(text, os.PathLike) else str(text))
