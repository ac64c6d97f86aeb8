"""The sign-in page, loaded when a browser first connects.

Starlette, uvicorn and the page cost about 3.6 MB of the daemon's memory, and a daemon
that restored its sessions at login may never show the page. Its port is bound from
the start; the first connection waits in the listen backlog while they load (about a
tenth of a second), then is served as any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .site import SignInSite

log = logging.getLogger(__name__)


class PageOnDemand:
    """Watches the page's listening socket and starts the site at the first connection."""

    def __init__(
        self, sock: socket.socket, load: Callable[[], Coroutine[None, None, SignInSite]]
    ) -> None:
        self._sock = sock
        self._load = load
        self._watching = False
        self._loading: asyncio.Task[SignInSite] | None = None

    def start(self) -> None:
        """Wait for a first connection (the socket is readable once one is queued)."""
        asyncio.get_running_loop().add_reader(self._sock.fileno(), self._first_connection)
        self._watching = True

    def _first_connection(self) -> None:
        self._stop_watching()
        self._loading = asyncio.get_running_loop().create_task(self._load())
        self._loading.add_done_callback(_report_failure)

    def _stop_watching(self) -> None:
        if self._watching:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._watching = False

    async def stop(self) -> None:
        """Stop the site if it was loaded; close the port either way."""
        self._stop_watching()
        site = None
        if self._loading is not None:
            with contextlib.suppress(Exception):
                site = await self._loading
        if site is not None:
            await site.stop()
        self._sock.close()


def _report_failure(loading: asyncio.Task[SignInSite]) -> None:
    if not loading.cancelled() and loading.exception() is not None:
        log.error("the sign-in page cannot be served", exc_info=loading.exception())
