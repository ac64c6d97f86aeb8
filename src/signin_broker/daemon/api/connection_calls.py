"""One connection's gRPC calls, each let go as it ends, and the connection once all have.

grpclib keeps a connection's ended and cancelled calls until it has accepted ten
more, and its server keeps a closed connection's handler until ten more connections
have come, or for good when it never served one (a JSON call, a refused caller). A
cancelled call holds its exception's traceback, and so every frame of the call and
what they hold: its HTTP/2 stream, a watcher's event queue. 500 event streams
dropped at once kept their objects so (their RSS with them), and 5,000 one-shot JSON
calls 3.7 MB of handlers, for good.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from grpclib.server import Handler as ConnectionHandler


class ConnectionCalls(ConnectionHandler):
    """grpclib's handler of one connection, forgetting each call as it ends.

    `gone` hears of the connection once it is closed and its last call has ended.
    """

    def __init__(self, made: ConnectionHandler, gone: Callable[[ConnectionCalls], None]) -> None:
        super().__init__(made.mapping, made.codec, made.status_details_codec, made.dispatch)
        self._gone = gone
        self.cut_off = 0  # calls that ended cancelled: the connection went, or the caller left
        self._reported = False

    def accept(self, stream: Any, headers: Any, release_stream: Callable[[], Any]) -> None:
        super().accept(stream, headers, release_stream)
        self._tasks[stream].add_done_callback(functools.partial(self._ended, stream))

    def cancel(self, stream: Any) -> None:
        if stream in self._tasks:  # else it has ended already
            super().cancel(stream)

    def close(self) -> None:
        super().close()
        self._report_if_gone()

    def _ended(self, stream: Any, task: asyncio.Task[None]) -> None:
        if self._tasks.get(stream) is task:
            del self._tasks[stream]
        if task in self._cancelled:
            self._cancelled.discard(task)
            self.cut_off += 1
        self._report_if_gone()

    def _report_if_gone(self) -> None:
        if self.closing and not self._tasks and not self._cancelled and not self._reported:
            self._reported = True
            self._gone(self)
