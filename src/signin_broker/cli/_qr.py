"""A QR code drawn in the terminal, so a phone can open the device sign-in address.

Two rows of modules per line with Unicode half blocks, in explicit black on white
(ANSI colours), so the code reads the same on a dark and on a light terminal; a
scanner needs dark modules on a light ground, which a terminal's own colours may
invert. Not on a stream that is no terminal, nor with NO_COLOR set (no-color.org):
there the blocks are drawn plain.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: see signin_broker/__init__.py
if TYPE_CHECKING:
    from typing import TextIO

BLACK_ON_WHITE = "\x1b[30;47m"
RESET = "\x1b[0m"
# (top dark, bottom dark) -> the character that draws them in the foreground colour
_HALVES = {(False, False): " ", (True, False): "▀", (False, True): "▄", (True, True): "█"}


def wants_colour(stream: TextIO) -> bool:
    """Colour escapes only for a terminal, and only when NO_COLOR is not set."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def terminal_qr(text: str, *, colour: bool) -> str:
    """The QR code of text as lines for a terminal (quiet zone included)."""
    import segno  # only for `login --device`

    rows = [
        [bool(module) for module in row]
        for row in segno.make(text, error="m").matrix_iter(scale=1, border=2)
    ]
    if len(rows) % 2:
        rows.append([False] * len(rows[0]))
    lines = []
    for top, bottom in zip(rows[::2], rows[1::2], strict=True):
        drawn = "".join(_HALVES[pair] for pair in zip(top, bottom, strict=True))
        lines.append(f"{BLACK_ON_WHITE}{drawn}{RESET}" if colour else drawn)
    return "\n".join(lines)
