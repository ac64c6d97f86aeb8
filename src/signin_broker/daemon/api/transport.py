"""The gRPC transport: one server on the public socket that knows who each connection is.

Why not grpcio: grpcio does not give a servicer the connection's socket, so it cannot
ask the kernel who called; earlier versions relayed every connection through a
private socket and named the relay by an abstract address, which a process in
another network namespace could bind too. grpclib is an asyncio gRPC server whose
connections are ordinary asyncio transports, so here each accepted connection is
checked before a byte is read (the way ssh-agent does): a caller of another uid is
closed at once, and every other connection carries its verified caller for its whole
life, set as the current caller of each call it makes. There is no second socket and
no address to borrow.

Also here: the connection limits that keep one caller from locking the others out,
sized from the descriptors the process may open, and what a caller may send before
the daemon reads it. What a call does once its connection is in is dispatch.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import resource
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from grpclib.protocol import Connection, EventsProcessor, H2Protocol
from grpclib.server import Handler as ConnectionHandler
from grpclib.server import Server
from h2.connection import H2Connection
from h2.settings import SettingCodes, Settings

from ..callers.identity import Caller, identify_caller
from ..host.instance import LISTEN_BACKLOG
from ..host.memory import FreedMemory
from ..logs import Throttled
from .connection_calls import ConnectionCalls
from .json_calls import JsonCalls, JsonConnection

log = logging.getLogger(__name__)

# h2 remembers the ids of a connection's closed streams, to tell a late frame from a
# protocol error: 65,536 of them by default. An app that keeps one connection for
# thousands of calls then holds megabytes in the daemon, which the allocator seldom
# gives back once it closes (8 processes x 25,000 GetToken calls: RSS up 27 MB and
# staying). Local unary calls finish in a millisecond: a few hundred is plenty.
H2Connection.MAX_CLOSED_STREAMS = 512
# Callers decide how often these happen, so they are logged a few times a minute at most.
_BUSY = Throttled(log, "a process holds too many busy connections: refusing another")
_OTHER_UID = Throttled(log, "refused a caller of another user")
_UNTOLD = Throttled(log, "refused a connection whose caller the kernel cannot tell")
_FULL = Throttled(log, "connection limit reached: closing one to make room")
_NO_DESCRIPTORS = Throttled(
    log, "out of file descriptors: new connections wait in the kernel's queue until some close"
)

# All callers together, on every socket, however many descriptors: one person's apps
# need far fewer, and each connection may hold up to ~300 KB (16 calls at once:
# benchmarks/bench_floods.py), so this bounds the daemon's memory under any flood to
# about 350 MB (the unit's MemoryHigh; 1.25 GB at 4,096).
MAX_CONNECTIONS = 1024
MAX_CONNECTIONS_PER_PROCESS = 64  # one process: a few channels are plenty
# The daemon's own descriptors, beside its callers': its listeners, the page's 64
# connections, a provider's pool of 100, the audit DB, the key store, state files
# (about 30 of them at rest).
OWN_DESCRIPTORS = 256
H2_PREFACE_START = b"PRI * HTTP/2.0"  # how every HTTP/2 client opens (RFC 9113 3.4)
# What a caller may send on a connection before the daemon reads it: HTTP/2's initial
# window (grpclib's own is 4 MiB on each connection and each call). A request is at
# most bounds.MAX_REQUEST_BYTES and is read as it comes.
RECEIVE_WINDOW_BYTES = 2**16 - 1
# Calls at once on one connection (h2's default is 100): a call waiting for its request
# or its answer holds some 19 KB. A client queues more until one ends.
MAX_CALLS_PER_CONNECTION = 16


@dataclass(frozen=True)
class DescriptorBudget:
    """How the process's open-file limit is shared, so that accept() never runs out.

    asyncio accepts up to `backlog` waiting connections at once, before any is checked
    or makes room: those, and the daemon's own, are kept aside, and the connections of
    every socket (the main one and the forwards') share the rest. At 4096 descriptors,
    70 processes of 64 idle connections otherwise took them all: accept() failed, and
    a token request waited 5 s.
    """

    connections: int
    backlog: int  # connections accepted at once, and the kernel's queue of them

    @classmethod
    def of_this_process(cls) -> DescriptorBudget:
        """The budget of the soft limit on open files (main raised it to the hard one)."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            soft = 2**20
        backlog = min(LISTEN_BACKLOG, soft // 8)
        own = min(OWN_DESCRIPTORS, soft // 2)
        return cls(max(1, min(MAX_CONNECTIONS, soft - own - backlog)), max(1, backlog))


class CallerConnection:
    """One accepted connection: its verified caller, and how busy it is."""

    def __init__(self, caller: Caller, transport: asyncio.BaseTransport) -> None:
        self.caller = caller
        self.active_calls = 0
        self.receiving = 0  # bytes of larger requests being read (dispatch)
        self._transport = transport

    def close(self) -> None:
        """Close the connection now."""
        if not self._transport.is_closing():
            self._transport.close()


class ConnectionTable:
    """The connections of every socket, with limits that keep any one caller from starving the rest.

    Over a limit, the newest connection still gets in and an older one is closed for
    it: over the process's own limit, its oldest idle connection (if all are busy, the
    new one is refused); over the total, the oldest idle connection of anyone, else
    the newest of the process holding the most. A gRPC client reconnects by itself if
    one of its idle connections is closed.
    """

    def __init__(
        self, limit: int = MAX_CONNECTIONS, per_process: int = MAX_CONNECTIONS_PER_PROCESS
    ) -> None:
        self._limit = limit
        self._per_process = per_process
        self._open: dict[CallerConnection, None] = {}  # insertion order: oldest first
        self._per_pid: Counter[int] = Counter()

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, connection: CallerConnection) -> bool:
        """Record a new connection, making room if need be; False when it must be refused."""
        pid = connection.caller.pid
        if self._per_pid[pid] >= self._per_process:
            idle = next(
                (c for c in self._open if c.caller.pid == pid and c.active_calls == 0), None
            )
            if idle is None:
                _BUSY.warn(caller_pid=pid, limit=self._per_process)
                return False
            self._close(idle)
        elif len(self._open) >= self._limit:
            victim = self._victim()
            _FULL.warn(limit=self._limit, closed_pid=victim.caller.pid)
            self._close(victim)
        self._open[connection] = None
        self._per_pid[pid] += 1
        return True

    def _close(self, connection: CallerConnection) -> None:
        self.remove(connection)
        connection.close()

    def remove(self, connection: CallerConnection) -> None:
        """Forget a closed connection."""
        if connection not in self._open:
            return  # closed to make room, and now reported lost
        del self._open[connection]
        pid = connection.caller.pid
        self._per_pid[pid] -= 1
        if self._per_pid[pid] <= 0:
            del self._per_pid[pid]

    def active_calls(self) -> int:
        """Calls being served right now, on all connections."""
        return sum(connection.active_calls for connection in self._open)

    def close_all(self) -> None:
        """Close every connection (the daemon is stopping)."""
        for connection in list(self._open):
            connection.close()

    def _victim(self) -> CallerConnection:
        for connection in self._open:
            if connection.active_calls == 0:
                return connection
        heaviest, _ = self._per_pid.most_common(1)[0]
        return next(c for c in reversed(self._open) if c.caller.pid == heaviest)


class CheckedProtocol(H2Protocol):
    """grpclib's HTTP/2 protocol, behind a kernel check of the caller at accept.

    The first bytes tell gRPC (the HTTP/2 preface) from a JSON call (HTTP/1.1,
    json_calls); the server speaks only once it knows which, so an HTTP/1.1 client
    never sees HTTP/2 frames.
    """

    def __init__(
        self, *args: Any, gate: TransportGate, json_calls: JsonCalls, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._gate = gate
        self._json_calls = json_calls
        self._connection: CallerConnection | None = None
        self._transport: asyncio.Transport | None = None
        self._first = b""  # bytes read before the protocol is known
        self._json: JsonConnection | None = None
        self._h2 = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Each frame goes out as grpclib writes it: joining an answer's frames into one
        # send per turn of the event loop cost GetToken 5-7 % at p50 and 11-19 % of the
        # daemon's CPU per call (benchmarks/bench_compare.py), for no steady gain in
        # throughput.
        plain = cast(asyncio.Transport, transport)
        connection = self._gate.check(plain)
        if connection is None:
            plain.abort()  # nothing of the caller's is read
            return
        self._connection = connection
        self._transport = plain

    def data_received(self, data: bytes) -> None:
        if self._connection is None or self._transport is None:
            return
        # Calls start as tasks in here, and each task copies the context: its connection.
        token = _CURRENT_CONNECTION.set(self._connection)
        try:
            self._route(data)
        finally:
            _CURRENT_CONNECTION.reset(token)

    def _route(self, data: bytes) -> None:
        assert self._transport is not None and self._connection is not None  # noqa: S101 - data_received checked
        if self._h2:
            super().data_received(data)
        elif self._json is not None:
            self._json.data_received(data)
        elif len(self._first + data) < len(H2_PREFACE_START):
            self._first += data
        else:
            data, self._first = self._first + data, b""
            if data.startswith(H2_PREFACE_START):
                self._h2 = True
                self._speak_http2(self._transport)
                super().data_received(data)
            else:
                self._json = JsonConnection(
                    self._transport, self._json_calls, active_call, self._connection.caller
                )
                self._json.data_received(data)

    def _speak_http2(self, transport: asyncio.Transport) -> None:
        """Start HTTP/2 as grpclib's H2Protocol does, with the daemon's limits in its settings.

        A setting sent later binds only a caller that acknowledges it.
        """
        http = H2Connection(config=self.h2_config)
        http.local_settings = Settings(
            client=False,
            initial_values={
                SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CALLS_PER_CONNECTION,
                SettingCodes.INITIAL_WINDOW_SIZE: RECEIVE_WINDOW_BYTES,
                SettingCodes.MAX_HEADER_LIST_SIZE: http.DEFAULT_MAX_HEADER_LIST_SIZE,
            },
        )
        http.initiate_connection()  # the connection's own window is HTTP/2's initial one too
        self.connection = Connection(http, transport, config=self.config)
        self.connection.flush()
        self.connection.initialize()
        self.processor = EventsProcessor(self.handler, self.connection)

    # Flow control: the transport pauses writing when an answer outgrows its buffer. An
    # HTTP/2 connection waits for the reader then; a JSON call has written its one
    # answer already, and grpclib's handlers would find no HTTP/2 connection.
    def pause_writing(self) -> None:
        if self._h2:
            super().pause_writing()

    def resume_writing(self) -> None:
        if self._h2:
            super().resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._connection is not None:
            self._gate.forget(self._connection)
            if self._h2:
                super().connection_lost(exc)  # cancels its calls
            elif self._json is not None:
                self._json.connection_lost()
        if not self._h2:  # grpclib never saw it: its handler was never used, nor closed
            self.handler.close()


Identify = Callable[[socket.socket, int], Caller]


class TransportGate:
    """Identifies each new connection and admits it, or not.

    The main socket admits the daemon's user only, each caller identified by its
    program; a forward's socket (forwards.py) admits the uids forwarded.forward_uids
    names, each caller being the forward itself.
    """

    def __init__(
        self,
        allowed_uids: frozenset[int],
        table: ConnectionTable,
        identify: Identify = identify_caller,
    ) -> None:
        self._allowed_uids = allowed_uids
        self._table = table  # the daemon's: shared by every socket
        self._identify = identify
        self._numbers = itertools.count(1)
        self._open: set[CallerConnection] = set()  # this socket's
        self.admitted = 0  # connections let in so far

    def __len__(self) -> int:
        return len(self._open)

    def check(self, transport: asyncio.BaseTransport) -> CallerConnection | None:
        """The new connection, admitted with its caller; None when it must be closed unread."""
        number = next(self._numbers)
        try:
            caller = self._identify(transport.get_extra_info("socket"), number)
        except OSError as error:
            _UNTOLD.warn(connection=number, reason=error.strerror)
            return None
        if caller.uid not in self._allowed_uids:
            _OTHER_UID.warn(caller_uid=caller.uid, caller_pid=caller.pid, connection=number)
            return None
        connection = CallerConnection(caller, transport)
        if not self._table.admit(connection):
            return None
        self._open.add(connection)
        self.admitted += 1
        return connection

    def forget(self, connection: CallerConnection) -> None:
        """A connection of this socket closed."""
        self._open.discard(connection)
        self._table.remove(connection)

    def close_all(self) -> None:
        """Close every connection of this socket now."""
        for connection in list(self._open):
            connection.close()


_CURRENT_CONNECTION: contextvars.ContextVar[CallerConnection] = contextvars.ContextVar("connection")


def current_caller() -> Caller:
    """The verified caller of the call being served."""
    return _CURRENT_CONNECTION.get().caller


def current_connection() -> CallerConnection:
    """The connection of the call being served."""
    return _CURRENT_CONNECTION.get()


class CheckedServer(Server):
    """grpclib's server whose every connection goes through the gate first.

    A caller may send no more than RECEIVE_WINDOW_BYTES ahead of what it reads, and make
    MAX_CALLS_PER_CONNECTION calls at once (CheckedProtocol). Each connection's calls are
    handled by ConnectionCalls, forgotten as soon as the connection is gone and its
    calls have ended: 500 event streams dropped at once left 500 calls' worth of
    objects in the daemon before (its HTTP/2 streams, queues, tracebacks), until new
    connections came.
    """

    def __init__(
        self,
        handlers: list[Any],
        gate: TransportGate,
        json_calls: JsonCalls,
        freed: FreedMemory | None = None,
    ) -> None:
        super().__init__(handlers)
        self._gate = gate
        self._json_calls = json_calls
        self._freed = freed  # told of each connection let go, and of the calls it cut off

    def stop_listening(self) -> None:
        """Take no more connections (an idle exit); those taken go on until `close`."""
        if self._server is not None:
            self._server.close()

    def _protocol_factory(self) -> H2Protocol:
        plain = super()._protocol_factory()
        made = cast(ConnectionHandler, plain.handler)
        calls = ConnectionCalls(made, self._forget)
        self._handlers.discard(made)
        self._handlers.add(calls)
        return CheckedProtocol(
            calls,
            plain.config,
            plain.h2_config,
            gate=self._gate,
            json_calls=self._json_calls,
        )

    def _forget(self, calls: ConnectionCalls) -> None:
        # Not at once: grpclib's close() at the daemon's stop closes each handler as it
        # goes through the set, and one already idle is gone as it is closed.
        asyncio.get_running_loop().call_soon(self._handlers.discard, calls)
        if self._freed is not None:
            self._freed.ended(1 + calls.cut_off)


@contextlib.contextmanager
def active_call() -> Iterator[None]:
    """Count a call as active on its connection while it runs (idle ones are evicted first)."""
    connection = _CURRENT_CONNECTION.get()
    connection.active_calls += 1
    try:
        yield
    finally:
        connection.active_calls -= 1


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's error handler: accept() out of descriptors is counted, not logged each time.

    asyncio logs each failed accept() with its traceback and tries again a second later,
    a thousand times over with Python 3.11: 69,710 records (51 MB) in 20 s when the
    descriptors ran out. A retry that comes after its listener closed (a forward's, the
    daemon's at its stop) fails too, silently here. Anything else is logged as asyncio
    would.
    """
    error = context.get("exception")
    message = str(context.get("message", ""))
    if isinstance(error, OSError) and message.startswith("socket.accept()"):
        _NO_DESCRIPTORS.warn(reason=error.strerror)
    elif not (isinstance(error, (OSError, ValueError)) and "._start_serving(" in message):
        loop.default_exception_handler(context)
