"""How the page is served: uvicorn on the daemon's loop, to its user's browser only.

On Linux the kernel must name the daemon's user as the owner of the browser's socket
when the connection is accepted, before a byte of it is read (Admission); every
request must then name the loopback address in its Host header (a DNS rebinding
guard), send its head promptly, and gets the security headers every page carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, ClassVar, cast
from urllib.parse import urlsplit

import uvicorn
from starlette.responses import HTMLResponse, RedirectResponse, Response
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..callers.peercred import loopback_tcp_peer_uid
from ..logs import Throttled
from . import pages

log = logging.getLogger(__name__)
# Other users decide how many of these there are: a few records a minute at most.
_REFUSED = Throttled(log, "refused a browser of another user")

# How long a connection may take to send a request's head (line and headers), from its
# accept or the end of the previous response. A browser on loopback needs milliseconds.
REQUEST_HEAD_SECONDS = 5
CONCURRENT_CONNECTIONS = 64  # the owner's; other users' are closed before they count
# Only Linux lets an unprivileged daemon ask who owns a TCP socket (sock_diag). Elsewhere
# the page cannot tell and serves every local user who knows its port (README).
KERNEL_NAMES_TCP_PEERS = sys.platform.startswith("linux")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def page(title: str, message: str, *, status: int, hint: str = "") -> Response:
    return HTMLResponse(pages.error(title, message, status_hint=hint), status_code=status)


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def security_headers(provider_origins: list[str]) -> list[tuple[bytes, bytes]]:
    """What every answer carries: a strict CSP (no scripts), no framing, referrer or caching."""
    form_action = " ".join(["'self'", *dict.fromkeys(o for o in provider_origins if o)])
    return [
        (
            b"content-security-policy",
            f"default-src 'none'; style-src 'unsafe-inline'; form-action {form_action};"
            " frame-ancestors 'none'; base-uri 'none'".encode(),
        ),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),  # no-referrer would make Origin "null"
        (b"cache-control", b"no-store"),
        (b"x-frame-options", b"DENY"),
    ]


class LoopbackGuard:
    """Serves only requests addressed to this loopback page, over an admitted connection.

    Also adds the security headers every page carries (security_headers).
    """

    def __init__(
        self,
        app: ASGIApp,
        authority: str,
        admission: Admission,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        self._app = app
        self._authority = authority
        self._admission = admission
        self._headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check connection and host, then serve with the security headers added."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self._headers]
            await send(message)

        refusal = self._refusal(scope)
        await (self._app if refusal is None else refusal)(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope) -> Response | None:
        client = scope.get("client")
        if client is None or not self._admission.admitted(client[0], client[1]):
            # _PageProtocol admits; a connection it did not (or that reset as it was
            # admitted, so that its address is gone) is no one's to serve.
            log.warning("refused a request over a connection not admitted")
            return page("Not your sign-in", _NOT_YOURS, status=403)
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
        if host != self._authority:
            if host == "localhost:" + self._authority.rsplit(":", 1)[1]:
                target = f"http://{self._authority}{scope['path']}"
                return RedirectResponse(target, status_code=302)
            log.warning("refused a request for another host", extra={"host": host[:100]})
            return page(
                "Wrong address",
                f"This page answers only at http://{self._authority}/.",
                status=421,
            )
        return None


_NOT_YOURS = "This page belongs to another user of this computer."


class Admission:
    """Which connections the page serves: its user's, as the kernel names them at accept.

    The uid is asked for once, when the connection is accepted and before any of it is
    read, and kept with the connection: a client that later resets or closes cannot
    turn the answer into "unknown". Unknown is a refusal.
    """

    def __init__(self, own_uid: int, headers: list[tuple[bytes, bytes]]) -> None:
        self._own_uid = own_uid
        self._open: dict[tuple[str, int], object] = {}
        body = pages.error("Not your sign-in", _NOT_YOURS).encode()
        head = [
            b"HTTP/1.1 403 Forbidden",
            b"content-type: text/html; charset=utf-8",
            b"content-length: " + str(len(body)).encode(),
            b"connection: close",
            *(name + b": " + value for name, value in headers),
        ]
        # Written whole at accept, without reading the request: a browser of another
        # user that opened this port by mistake still learns why.
        self.refusal = b"\r\n".join(head) + b"\r\n\r\n" + body

    def admit(self, transport: asyncio.BaseTransport) -> bool:
        """Whether to serve this just-accepted connection."""
        if not KERNEL_NAMES_TCP_PEERS:
            return True
        peer, local = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
        uid = loopback_tcp_peer_uid(peer[:2], local[:2]) if peer and local else None
        if uid == self._own_uid:
            return True
        _REFUSED.warn(caller_uid=uid)
        return False

    def opened(self, client: tuple[str, int], connection: object) -> None:
        self._open[client] = connection

    def closed(self, client: tuple[str, int], connection: object) -> None:
        if self._open.get(client) is connection:
            del self._open[client]

    def admitted(self, host: str, port: int) -> bool:
        return (host, port) in self._open


class _PageProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 for the page: admitted connections only, prompt requests only.

    A refused connection gets the short 403 and is closed in connection_made: uvicorn
    never sees it, so it counts against no limit and runs no handler. An admitted one
    must send each request's head within REQUEST_HEAD_SECONDS of its accept or of the
    previous response, or it is closed: a half-sent request holds nothing for long.
    """

    admission: ClassVar[Admission]
    _admitted = False
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Admit or refuse, before anything is read."""
        stream = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        if not self.admission.admit(stream):
            stream.write(self.admission.refusal)
            stream.close()
            return
        self._admitted = True
        super().connection_made(stream)
        if self.client is not None:
            self.admission.opened(self.client, self)
        self._await_request()

    def data_received(self, data: bytes) -> None:
        """Parse only what an admitted connection sent."""
        if self._admitted:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and its deadline."""
        if self._admitted:
            self._stop_waiting()
            if self.client is not None:
                self.admission.closed(self.client, self)
            super().connection_lost(exc)

    def handle_events(self) -> None:
        """Stop the deadline once a request's head has arrived."""
        super().handle_events()
        if self._serving():
            self._stop_waiting()

    def on_response_complete(self) -> None:
        """The next request's head is due now (armed first: uvicorn may start it at once)."""
        self._await_request()
        super().on_response_complete()

    def _serving(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete

    def _await_request(self) -> None:
        self._stop_waiting()
        self._deadline = self.loop.call_later(REQUEST_HEAD_SECONDS, self._too_slow)

    def _stop_waiting(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self._serving() and not self.transport.is_closing():
            log.debug("closed a connection that sent no request in time")
            self.transport.close()


def page_protocol(admission: Admission) -> type[_PageProtocol]:
    """The protocol class uvicorn instantiates per connection, bound to this page."""

    class PageProtocol(_PageProtocol):
        pass

    PageProtocol.admission = admission
    return PageProtocol


class EmbeddedServer(uvicorn.Server):
    """uvicorn on the daemon's own loop: the daemon, not uvicorn, owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        """Leave the signal handlers alone."""
        yield
