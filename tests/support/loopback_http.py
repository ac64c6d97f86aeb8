"""A threaded HTTP(S) server on 127.0.0.1 for the tools' tests, and the token check they share.

Each test server (a git forge, a Kubernetes API, a resource server) is a request handler
on this one scaffold; each takes only bearer tokens the provider still honours, as a
server trusting the provider would: the stub's introspection, or any provider's
userinfo (ProviderUserinfo).
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, Self

import httpx2


class LoopbackServer:
    """Serves `handler` on 127.0.0.1 (a free port), with TLS when given a context."""

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
    ) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that keeps the test output clean (no access log on stderr)."""

    def log_message(self, format: str, *args: object) -> None:
        pass


class TokenJudge(Protocol):
    """What a server asks about a token: the StubProvider, or ProviderUserinfo."""

    def access_token_info(self, access_token: str) -> dict[str, Any] | None:
        """What the provider says of a token it honours; None when it does not."""


class ProviderUserinfo:
    """A provider's userinfo as the judge of tokens: it honours those it answers as Bearer."""

    def __init__(self, userinfo_url: str) -> None:
        self.userinfo_url = userinfo_url

    def access_token_info(self, access_token: str) -> dict[str, Any] | None:
        """The user's claims for a token userinfo takes as `Bearer`; None when it refuses it."""
        headers = {"Authorization": f"Bearer {access_token}"}
        answer = httpx2.get(self.userinfo_url, headers=headers, timeout=15)
        return dict(answer.json()) if answer.status_code == 200 else None


def honoured(stub: TokenJudge, token: str) -> bool:
    """Whether the provider still honours the access token, as a server asks it."""
    return bool(token) and stub.access_token_info(token) is not None
