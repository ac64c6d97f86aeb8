"""What the HTTP clients' auths (signin_broker.httpx, .httpx2, .requests) share.

Which token they ask for (account, scopes, audience) and from which broker, with a
DPoP proof where the token is bound, and when to ask again; each auth adds how its
library attaches the token and sends a request once more after a 401.
httpx and httpx2 (Pydantic's fork of httpx 0.28) run one auth-flow protocol: their
two auths are HttpxFlows on each library's own Auth class.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._channel import DEFAULT_TIMEOUT_SECONDS

UNAUTHORIZED = 401
MAX_NONCES = 64  # the DPoP nonces remembered, one per server origin


class TokenRequest:
    """The token an auth asks for, from the broker at `socket_path` (default: the SDK's).

    GetToken gives it; once it has been DPoP-bound (RFC 9449), it is asked for with
    the request's method and URL (SignDpopProof), and comes with its proof. A server's
    `DPoP-Nonce` is kept for its origin and put into the next proofs.
    """

    def __init__(
        self,
        account: str = "",
        *,
        scopes: Iterable[str] = (),
        audience: str = "",
        socket_path: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.account, self.scopes, self.audience = account, tuple(scopes), audience
        self.socket_path, self.timeout = socket_path, timeout
        self._nonces: dict[str, str] = {}
        self._bound = False  # the account's token was DPoP-bound: ask for proofs

    def ask(self, client: Any, method: str, url: str, *, refused: bool = False) -> Any:
        """Token and proof (from the asyncio client: an awaitable); `refused` after a 401.

        The URL goes without its query, fragment and user:password@, which a proof
        leaves out anyway (RFC 9449 4.2): none of them reaches the daemon or its audit.
        """
        if not self._bound:
            return client.get_token(
                self.account, scopes=self.scopes, audience=self.audience, refused=refused
            )
        parts = urlsplit(url)
        return client.sign_dpop_proof(
            method,
            urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", "")),
            self.account,
            scopes=self.scopes,
            audience=self.audience,
            nonce=self._nonces.get(_origin(url), ""),
            refused=refused,
        )

    def unproven(self, sent: Any) -> bool:
        """Whether a token is DPoP-bound and came without a proof: asked for again, with one."""
        if getattr(sent, "dpop", None) is not None or sent.token_type.lower() != "dpop":
            return False
        self._bound = True
        return True

    def again(self, status: int, headers: Mapping[str, str], url: str) -> dict[str, bool] | None:
        """How to ask once more after this answer: with the nonce it gave, or renewed; None: not.

        A `use_dpop_nonce` challenge (a 401 with `WWW-Authenticate: DPoP`) is answered
        with the nonce the server gave; any other 401 with a renewed token.
        """
        nonce = headers.get("dpop-nonce", "")
        if nonce and nonce.isascii() and nonce.isprintable() and len(nonce) <= 512:
            if len(self._nonces) >= MAX_NONCES:
                self._nonces.pop(next(iter(self._nonces)))
            self._nonces[_origin(url)] = nonce
        if status != UNAUTHORIZED:
            return None
        # A DPoP challenge may follow a Bearer one in the same header (RFC 9449 7.2).
        if nonce and "use_dpop_nonce" in headers.get("www-authenticate", ""):
            return {"refused": False}
        return {"refused": True}


def attach(headers: Any, sent: Any) -> None:
    """Put a token (and its DPoP proof, if it has one) on a request's headers."""
    headers["Authorization"] = sent.authorization
    if getattr(sent, "dpop", ""):
        headers["DPoP"] = sent.dpop
    else:
        headers.pop("DPoP", None)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class HttpxFlows(TokenRequest):
    """The auth flow of httpx and httpx2: the broker's token, once more after a 401.

    The request body is read first, so that a streamed one can be sent again.
    """

    requires_request_body = True
    _sync: Any = None  # a BrokerClient, opened at the first request
    _async: Any = None  # an AsyncBrokerClient, likewise

    def sync_auth_flow(self, request: Any) -> Generator[Any, Any, None]:
        """Send the request with the token; after a 401, once more (renewed, or with a nonce)."""
        if self._sync is None:
            from ._sync import BrokerClient

            self._sync = BrokerClient(self.socket_path, timeout=self.timeout)
        request.read()
        method, url = request.method, str(request.url)
        sent = self.ask(self._sync, method, url)
        if self.unproven(sent):
            sent = self.ask(self._sync, method, url)
        attach(request.headers, sent)
        response = yield request
        again = self.again(response.status_code, response.headers, url)
        if again is not None:
            renewed = self.ask(self._sync, method, url, **again)
            if self.unproven(renewed):
                renewed = self.ask(self._sync, method, url)
            if not again["refused"] or renewed.access_token != sent.access_token:
                attach(request.headers, renewed)
                yield request

    async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        """The same for an asyncio client."""
        if self._async is None:
            from ._async import AsyncBrokerClient  # grpc.aio: only for an asyncio client

            self._async = AsyncBrokerClient(self.socket_path, timeout=self.timeout)
        await request.aread()
        method, url = request.method, str(request.url)
        sent = await self.ask(self._async, method, url)
        if self.unproven(sent):
            sent = await self.ask(self._async, method, url)
        attach(request.headers, sent)
        response = yield request
        again = self.again(response.status_code, response.headers, url)
        if again is not None:
            renewed = await self.ask(self._async, method, url, **again)
            if self.unproven(renewed):
                renewed = await self.ask(self._async, method, url)
            if not again["refused"] or renewed.access_token != sent.access_token:
                attach(request.headers, renewed)
                yield request

    def close(self) -> None:
        """Close the broker connection of the sync flow."""
        if self._sync is not None:
            self._sync.close()

    async def aclose(self) -> None:
        """Close the broker connection of the async flow."""
        if self._async is not None:
            await self._async.close()
