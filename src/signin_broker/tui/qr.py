"""A QR code as terminal text: two rows of modules per line with Unicode half blocks.

The CLI's `login --device` and the TUI's sign-in screen both draw it; each adds its own
colours (a scanner needs dark modules on a light ground, whatever the terminal's theme).
"""

from __future__ import annotations

# (top dark, bottom dark) -> the character that draws them in the foreground colour
_HALVES = {(False, False): " ", (True, False): "▀", (False, True): "▄", (True, True): "█"}


def half_block_rows(text: str) -> list[str]:
    """The QR code of text, quiet zone included, as lines of equal width."""
    import segno  # only when a device sign-in is shown

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
