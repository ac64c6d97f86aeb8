"""Forwards: sockets of their own, served by this daemon, that give tokens and nothing else.

A forward lets an SSH session, a container or a sandbox have the user's tokens without
a sign-in there and without the refresh token ever leaving: its socket is forwarded
(`ssh -R`, a bind mount), not the daemon's. Each has its own checked server on its
own socket: every connection is the app `forward:<name>` (callers.forwarded), served
the calls the access table (access.py) lets forwards make and refused every other
one, over gRPC and JSON alike; its GetStatus is its own, reduced one. Closing it (by
the person, by its TTL, by the daemon's stop) stops its listener, closes its open
connections and removes its socket at once. Forwards live in the daemon's memory
only: a restart closes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...session.audit_entries import Actor
from ..apps.gate import AppGate
from ..callers.forwarded import ForwardGrant, forward_uids
from ..callers.identity import identify_forwarded
from ..host.forward_sockets import ForwardSocket, default_forward_path
from ..host.memory import FreedMemory
from ..refusals import ForwardExists, ForwardNotFound
from .dispatch import ServiceHandlers
from .json_calls import JsonCalls
from .transport import CheckedServer, ConnectionTable, TransportGate

log = logging.getLogger(__name__)


class LiveForward:
    """One open forward: its grant, its socket and server, and how it is used."""

    def __init__(
        self,
        grant: ForwardGrant,
        *,
        listener: ForwardSocket,
        server: CheckedServer,
        gate: TransportGate,
        expires_at: float,
        tokens_before: int,
    ) -> None:
        self.grant = grant
        self.tokens_before = tokens_before  # the app's count when opened (a name may recur)
        self.listener = listener
        self.server = server
        self.gate = gate
        self.opened_at = time.time()
        self.expires_at = expires_at
        self.expiry: asyncio.TimerHandle | None = None

    def shut(self) -> None:
        """Refuse everything at once: no listener, no connection, no socket file."""
        if self.expiry is not None:
            self.expiry.cancel()
        self.server.close()
        self.gate.close_all()
        self.listener.remove()


Closed = Callable[[LiveForward, str, Actor | None], None]


class Forwards:
    """The open forwards, by name: opened, listed, and closed by the person or their TTL.

    Made before the service's handlers exist (a forward's handlers are built from
    them); `start` gives it those handlers, and what to do when a forward closes.
    Their connections count in the daemon's table (`connections`) beside the main
    socket's, and their ends in its memory given back (`freed`), as the main socket's.
    """

    def __init__(
        self,
        daemon_socket: Path,
        apps: AppGate,
        owner_uid: int,
        *,
        connections: ConnectionTable,
        freed: FreedMemory,
    ) -> None:
        self._connections = connections
        self._freed = freed
        self._handlers: ServiceHandlers | None = None
        self._json = JsonCalls({})
        self._closed: Closed = lambda forward, why, actor: None
        self._uids = forward_uids(owner_uid)
        self._daemon_socket = daemon_socket
        self._apps = apps
        self._open: dict[str, LiveForward] = {}
        self._closing: set[asyncio.Task[Any]] = set()
        self.host = socket.gethostname()

    def start(self, handlers: ServiceHandlers, closed: Closed) -> None:
        """Serve forwards with these handlers; `closed` hears of each forward that closes.

        They are the service's, each guarded by its access entry, with the forward's
        own GetStatus.
        """
        self._handlers = handlers
        self._json = JsonCalls(handlers.unary)
        self._closed = closed

    async def open(
        self, grant: ForwardGrant, ttl: int, path: Path | None, tokens_before: int
    ) -> LiveForward:
        """Open a forward; ForwardSocketError when its socket cannot go where asked."""
        if self._handlers is None:
            raise RuntimeError("Forwards.start() comes before any forward opens")
        if grant.name in self._open:
            raise ForwardExists(
                f"a forward called {grant.name} is open; close it first"
                f" (signin-broker forward --close {grant.name}) or choose another name"
            )
        listener = ForwardSocket(
            path or default_forward_path(self._daemon_socket, grant.name), own_folder=path is None
        )
        identify = functools.partial(identify_forwarded, grant=grant)
        gate = TransportGate(self._uids, self._connections, identify)
        server = CheckedServer([self._handlers], gate, self._json, self._freed)
        try:
            await server.start(sock=listener.listening)
        except OSError:
            listener.listening.close()
            listener.remove()
            raise
        forward = LiveForward(
            grant,
            listener=listener,
            server=server,
            gate=gate,
            expires_at=time.time() + ttl,
            tokens_before=tokens_before,
        )
        forward.expiry = asyncio.get_running_loop().call_later(ttl, self._expire, grant.name)
        self._open[grant.name] = forward
        log.info("forward opened", extra={"forward": grant.name, "socket": str(listener.path)})
        return forward

    async def close(
        self, name: str, why: str = "closed", actor: Actor | None = None
    ) -> LiveForward:
        """Close a forward now; ForwardNotFound when none of that name is open.

        `actor` closed it (None: the daemon itself, `why` says how).
        """
        forward = self._open.pop(name, None)
        if forward is None:
            raise ForwardNotFound(
                f"no forward called {name} is open (signin-broker forward --list)"
            )
        forward.shut()
        self._apps.forward_closed(forward.grant.app)
        self._closed(forward, why, actor)
        await forward.server.wait_closed()
        log.info("forward closed", extra={"forward": name, "why": why})
        return forward

    def get(self, name: str) -> LiveForward | None:
        """The open forward of that name, if any."""
        return self._open.get(name)

    def listed(self) -> list[LiveForward]:
        """The open forwards, by name."""
        return [self._open[name] for name in sorted(self._open)]

    async def close_all(self) -> None:
        """Close every forward (the daemon is stopping)."""
        for name in list(self._open):
            with contextlib.suppress(ForwardNotFound):
                await self.close(name, "the daemon stopped")

    def _expire(self, name: str) -> None:
        """The TTL is up: close the forward."""
        task = asyncio.get_running_loop().create_task(self._close_expired(name))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_expired(self, name: str) -> None:
        with contextlib.suppress(ForwardNotFound):  # the person closed it just now
            await self.close(name, "expired")
