"""The front listener: accepts on the public socket and relays each connection to gRPC.

Why it exists: grpcio cannot tell a servicer which socket a call came in on, so it
cannot ask the kernel who the caller is. The front listener accepts each connection
itself, identifies the caller once (callers.identify_caller), then opens a connection
to the gRPC server's private socket from a socket bound to a fresh abstract address,
registers that address with the caller, and copies bytes both ways. The caller check
around every handler (callers.CallerCheck) maps `context.peer()` back to
the caller. Copying uses asyncio protocols on the daemon's loop: no thread, no extra
process, flow control in both directions, half-closes forwarded.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import socket
from collections.abc import Callable
from typing import cast

from .callers import CallerRegistry, identify_caller

log = logging.getLogger(__name__)

# Each relayed connection holds three descriptors in the daemon: the accepted socket,
# the relay socket and grpcio's end of it.
MAX_CONNECTIONS = 4096
LISTEN_BACKLOG = 1024


class _Pipe(asyncio.Protocol):
    """One end of a relayed connection: what it reads, the partner's transport writes."""

    def __init__(self, on_done: Callable[[], None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.eof = False
        self._partner: _Pipe | None = None
        self._on_done = on_done
        self._early: list[bytes] = []  # read before the partner was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def join(self, partner: _Pipe, partner_transport: asyncio.Transport) -> None:
        """Relay to partner from now on, first handing over what was read while waiting."""
        self._partner = partner
        for chunk in self._early:
            partner_transport.write(chunk)
        self._early.clear()
        if self.eof:
            self.eof_received()

    def data_received(self, data: bytes) -> None:
        partner = self._partner
        if partner is not None and partner.transport is not None:
            partner.transport.write(data)
        else:
            self._early.append(data)

    def eof_received(self) -> bool:
        self.eof = True
        partner = self._partner
        if partner is not None and partner.transport is not None:
            if partner.transport.can_write_eof() and not partner.transport.is_closing():
                partner.transport.write_eof()
            if partner.eof:
                self._on_done()  # both directions are finished
        return True  # keep the other direction open until it finishes too

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_done()

    # Flow control: when this end's outgoing buffer fills, stop reading from the partner.
    def pause_writing(self) -> None:
        if self._partner is not None and self._partner.transport is not None:
            self._partner.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._partner is not None and self._partner.transport is not None:
            self._partner.transport.resume_reading()

    def close(self) -> None:
        """Close this end now (what is buffered is still sent)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class _CallerEnd(_Pipe):
    """The accepted end: pauses at once, then has the connection open its relay."""

    def __init__(self, connection: _RelayedConnection) -> None:
        super().__init__(connection.close)
        self._connection = connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._connection.caller_connected(cast(asyncio.Transport, transport))


class _RelayedConnection:
    """A caller's connection and its relay to the gRPC server, closed together."""

    def __init__(self, front: FrontListener, number: int) -> None:
        self._front = front
        self.number = number
        self.relay_name = f"signin-broker.{secrets.token_hex(16)}"
        self.caller_end = _CallerEnd(self)
        self.relay_end = _Pipe(self.close)
        self._closed = False

    def caller_connected(self, transport: asyncio.Transport) -> None:
        """Hold the caller's bytes until the relay is ready, and open the relay."""
        transport.pause_reading()
        self._front.track(asyncio.get_running_loop().create_task(self._open_relay(transport)))

    def close(self) -> None:
        """Unregister the relay address, then close both ends (in that order, always)."""
        if self._closed:
            return
        self._closed = True
        self._front.registry.unregister(self.relay_name)
        self._front.connections.discard(self)
        self.caller_end.close()
        self.relay_end.close()

    async def _open_relay(self, caller_transport: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        relay = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            caller = identify_caller(caller_transport.get_extra_info("socket"), self.number)
            relay.bind("\0" + self.relay_name)
            relay.setblocking(False)
            await loop.sock_connect(relay, self._front.upstream_path)
            # Registered before the first byte reaches grpcio, so the first call finds it.
            self._front.registry.register(self.relay_name, caller)
            relay_transport, _ = await loop.create_unix_connection(
                lambda: self.relay_end, sock=relay
            )
        except Exception:
            relay.close()
            log.exception("could not relay a new connection", extra={"connection": self.number})
            self.close()
            return
        if self._closed:  # the caller hung up meanwhile
            relay_transport.close()
            return
        self.caller_end.join(self.relay_end, relay_transport)
        self.relay_end.join(self.caller_end, caller_transport)
        caller_transport.resume_reading()


class FrontListener:
    """Accepts callers on the public socket and relays them to the private gRPC socket."""

    def __init__(
        self, listening: socket.socket, upstream_path: str, registry: CallerRegistry
    ) -> None:
        self._listening = listening
        self.upstream_path = upstream_path
        self.registry = registry
        self.connections: set[_RelayedConnection] = set()
        self._numbers = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Begin accepting connections."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(
            self._accept, sock=self._listening, backlog=LISTEN_BACKLOG
        )

    def _accept(self) -> asyncio.Protocol:
        connection = _RelayedConnection(self, next(self._numbers))
        if len(self.connections) >= MAX_CONNECTIONS:
            log.warning(
                "too many connections: refusing a new one",
                extra={"limit": MAX_CONNECTIONS, "connection": connection.number},
            )
            return _Refused()
        self.connections.add(connection)
        return connection.caller_end

    def track(self, task: asyncio.Task[None]) -> None:
        """Keep a reference to a connection's set-up task until it ends."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop_accepting(self) -> None:
        """Accept no more connections; the open ones carry on."""
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        """Stop accepting and close every relayed connection."""
        await self.stop_accepting()
        for connection in list(self.connections):
            connection.close()
        for task in list(self._tasks):
            task.cancel()


class _Refused(asyncio.Protocol):
    """Closes a connection at once; used when the connection limit is reached."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()
