"""A QR code drawn in the terminal, so a phone can open the device sign-in address.

Two rows of modules per line with Unicode half blocks, in explicit black on white
(ANSI colours), so the code reads the same on a dark and on a light terminal; a
scanner needs dark modules on a light ground, which a terminal's own colours may
invert. Not on a stream that is no terminal, nor with NO_COLOR set (no-color.org):
there the blocks are drawn plain.
"""

from __future__ import annotations

import os
from typing import TextIO

BLACK_ON_WHITE = "\x1b[30;47m"
RESET = "\x1b[0m"


def wants_colour(stream: TextIO) -> bool:
    """Colour escapes only for a terminal, and only when NO_COLOR is not set."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def terminal_qr(text: str, *, colour: bool) -> str:
    """The QR code of text as lines for a terminal (quiet zone included)."""
    from ..tui.qr import half_block_rows  # the TUI draws the same blocks

    rows = half_block_rows(text)
    return "\n".join(f"{BLACK_ON_WHITE}{row}{RESET}" if colour else row for row in rows)
