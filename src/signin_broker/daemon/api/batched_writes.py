"""An HTTP/2 connection's writes in one turn of the event loop, sent as one.

grpclib writes each frame of an answer as soon as it is made: HEADERS, DATA, then the
trailing HEADERS, three sends and three wake-ups of the reader for one GetToken. The
frames of one turn go out together instead, as grpcio's C core sends them; nothing
waits longer than the turn it was written in.
"""

from __future__ import annotations

import asyncio
from typing import Any


class BatchedWrites(asyncio.Transport):
    """A transport whose writes are joined until the event loop's next turn."""

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._transport = transport
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(bytes(data))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(b"".join(pending))

    def close(self) -> None:
        """Send what was written (a GOAWAY, say), then close."""
        self._flush()
        self._transport.close()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        """Send what was written, then the end of the stream (the socket's SHUT_WR)."""
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()
