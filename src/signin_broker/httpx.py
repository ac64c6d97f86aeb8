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

from collections.abc import AsyncGenerator, Generator

import httpx

from .client import AsyncBrokerClient, BrokerClient
from .client._http_auth import TokenRequest


class BrokerAuth(TokenRequest, httpx.Auth):
    """An httpx auth that asks the broker for the token of `account` (default: the default)."""

    requires_request_body = True  # read once, so the request can be sent again after a 401
    _sync: BrokerClient | None = None
    _async: AsyncBrokerClient | None = None

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        if self._sync is None:
            self._sync = BrokerClient(self.socket_path, timeout=self.timeout)
        sent = self.ask(self._sync)
        request.headers["Authorization"] = sent.authorization
        response = yield request
        if response.status_code == httpx.codes.UNAUTHORIZED:
            renewed = self.ask(self._sync, refused=True)
            if renewed.access_token != sent.access_token:
                request.headers["Authorization"] = renewed.authorization
                yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if self._async is None:
            self._async = AsyncBrokerClient(self.socket_path, timeout=self.timeout)
        sent = await self.ask(self._async)
        request.headers["Authorization"] = sent.authorization
        response = yield request
        if response.status_code == httpx.codes.UNAUTHORIZED:
            renewed = await self.ask(self._async, refused=True)
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
