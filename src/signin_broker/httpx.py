"""`BrokerAuth` for httpx: each request carries a token from the broker.

    import httpx
    from signin_broker.httpx import BrokerAuth

    with httpx.Client(auth=BrokerAuth()) as http:
        http.get("https://api.example.com/me")

The token is asked for per request (one call on the socket, under a millisecond while
the daemon holds a valid one). On a 401 the broker is told the token was refused, it
renews it (at most once a quarter of the token's lifetime), and the request is sent
once more with the new one; a second 401 is the caller's to see. Works with
`httpx.Client` and `httpx.AsyncClient`; install with `pip install signin-broker[httpx]`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncGenerator, Generator, Iterable

import httpx

from .client import AsyncBrokerClient, BrokerClient
from .client._channel import DEFAULT_TIMEOUT_SECONDS


class BrokerAuth(httpx.Auth):
    """An httpx auth that asks the broker for the token of `account` (default: the default)."""

    requires_request_body = True  # read once, so the request can be sent again after a 401

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
        self._socket_path, self._timeout = socket_path, timeout
        self._sync: BrokerClient | None = None
        self._async: AsyncBrokerClient | None = None

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        if self._sync is None:
            self._sync = BrokerClient(self._socket_path, timeout=self._timeout)
        ask = functools.partial(self._sync.get_token, self.account, scopes=self.scopes,
                                audience=self.audience)  # fmt: skip
        sent = ask()
        request.headers["Authorization"] = sent.authorization
        response = yield request
        if response.status_code == httpx.codes.UNAUTHORIZED:
            renewed = ask(refused=True)
            if renewed.access_token != sent.access_token:
                request.headers["Authorization"] = renewed.authorization
                yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if self._async is None:
            self._async = AsyncBrokerClient(self._socket_path, timeout=self._timeout)
        ask = functools.partial(self._async.get_token, self.account, scopes=self.scopes,
                                audience=self.audience)  # fmt: skip
        sent = await ask()
        request.headers["Authorization"] = sent.authorization
        response = yield request
        if response.status_code == httpx.codes.UNAUTHORIZED:
            renewed = await ask(refused=True)
            if renewed.access_token != sent.access_token:
                request.headers["Authorization"] = renewed.authorization
                yield request

    def close(self) -> None:
        """Close the broker connection of the sync flow."""
        if self._sync is not None:
            self._sync.close()

    async def aclose(self) -> None:
        """Close the broker connection of the async flow."""
        if self._async is not None:
            await self._async.close()
