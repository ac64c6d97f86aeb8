"""Waits inside request handlers (stalls, delayed responses) that end early when the stub stops.

A test stops the stub from its own thread while the server's event loop is waiting, so
the waits are futures on that loop that `release_all()` settles from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from starlette.types import Receive

_Waiter = tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]


class Pauses:
    """Every wait of one running server; `release_all()` ends them, and any later one, at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._released = False
        self._waiters: set[_Waiter] = set()

    def release_all(self) -> None:
        """End every wait now and skip every later one: the server is stopping."""
        with self._lock:
            self._released = True
            waiters, self._waiters = self._waiters, set()
        for loop, woken in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits
                loop.call_soon_threadsafe(_settle, woken)

    async def pause(self, seconds: float, receive: Receive) -> bool:
        """Wait `seconds`, less if the stub stops or the client leaves; False if it left.

        `receive` must have delivered the whole request body already, so the next thing
        it can give is http.disconnect.
        """
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        waiter = (loop, woken)
        with self._lock:
            if self._released:
                return True
            self._waiters.add(waiter)
        left = asyncio.ensure_future(_client_leaves(receive))
        try:
            done, _ = await asyncio.wait(
                (woken, left), timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            with self._lock:
                self._waiters.discard(waiter)
            woken.cancel()
            left.cancel()
        return left not in done


def _settle(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


async def _client_leaves(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
