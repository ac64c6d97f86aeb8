"""QR codes as images, for TV apps (GetSignInQr) and the loopback dashboard."""

from __future__ import annotations

import io


def qr_image(text: str, svg: bool) -> bytes:
    """A QR code of text, as SVG or PNG (segno loads on first use: few daemons need it)."""
    import segno

    buffer = io.BytesIO()
    segno.make(text, error="m").save(buffer, kind="svg" if svg else "png", scale=8, border=2)
    return buffer.getvalue()


def qr_svg_markup(text: str) -> str:
    """A QR code of text as an <svg> element to put in a page."""
    import segno

    markup: str = segno.make(text, error="m").svg_inline(scale=4, border=2)
    return markup
