"""A QR code as terminal text: half blocks, plain or black on white, so a phone opens a sign-in.

Two rows of modules per line with Unicode half blocks. The TUI's sign-in screen draws
them in its own colours; the CLI's `login --device` (terminal_qr) in explicit black on
white (ANSI colours), so the code reads the same on a dark and on a light terminal: a
scanner needs dark modules on a light ground, which a terminal's own colours may invert.
Not on a stream that is no terminal, nor with NO_COLOR set (no-color.org): there the
blocks are drawn plain.
"""

from __future__ import annotations

import os
from typing import TextIO

import segno

# (top dark, bottom dark) -> the character that draws them in the foreground colour
_HALVES = {(False, False): " ", (True, False): "▀", (False, True): "▄", (True, True): "█"}
BLACK_ON_WHITE = "\x1b[30;47m"
RESET = "\x1b[0m"


def half_block_rows(text: str) -> list[str]:
    """The QR code of text, quiet zone included, as lines of equal width."""
    rows = [
        [bool(module) for module in row]
        for row in segno.make(text, error="m").matrix_iter(scale=1, border=2)
    ]
    if len(rows) % 2:
        rows.append([False] * len(rows[0]))
    return [
        "".join(_HALVES[pair] for pair in zip(top, bottom, strict=True))
        for top, bottom in zip(rows[::2], rows[1::2], strict=True)
    ]


def wants_colour(stream: TextIO) -> bool:
    """Colour escapes only for a terminal, and only when NO_COLOR is not set."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def terminal_qr(text: str, *, colour: bool) -> str:
    """The QR code of text as lines for a terminal (quiet zone included)."""
    rows = half_block_rows(text)
    return "\n".join(f"{BLACK_ON_WHITE}{row}{RESET}" if colour else row for row in rows)
