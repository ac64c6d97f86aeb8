"""The browsers' native messaging frames, as the tests write and read them on the host's pipes."""

from __future__ import annotations

import json
import struct

EXTENSION = "cebidliipbcfhdfgddngepmjegpjahaj"  # the reference extension's
ORIGIN = "http://127.0.0.1:8000"


def frame(message: object) -> bytes:
    """One message as a browser writes it: its length in this machine's byte order, then JSON."""
    body = json.dumps(message).encode()
    return struct.pack("=I", len(body)) + body


def answers(raw: bytes) -> list[dict[str, object]]:
    """Every message the host wrote."""
    found = []
    while raw:
        (length,) = struct.unpack("=I", raw[:4])
        found.append(json.loads(raw[4 : 4 + length]))
        raw = raw[4 + length :]
    return found


def get_token(origin: str = ORIGIN, ident: int = 1, **request: object) -> bytes:
    """A getToken request of the extension's page at `origin`."""
    return frame({"id": ident, "kind": "getToken", "origin": origin, "request": request})
