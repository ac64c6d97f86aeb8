"""What the HTTP clients' auths (signin_broker.httpx, .httpx2, .requests) share.

Which token they ask for (account, scopes, audience, a step-up) and from which broker;
each auth adds how its library attaches the token and sends a request once more after
a 401: with a renewed token, or, when the 401 is an RFC 9470 step-up challenge
(`error="insufficient_user_authentication"`), with a token of a sign-in that meets it.
httpx and httpx2 (Pydantic's fork of httpx 0.28) run one auth-flow protocol: their
two auths are HttpxFlows on each library's own Auth class.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Generator, Iterable
from typing import Any

from ._challenges import step_up_of
from ._channel import DEFAULT_TIMEOUT_SECONDS

UNAUTHORIZED = 401


class TokenRequest:
    """The token an auth asks for, from the broker at `socket_path` (default: the SDK's)."""

    def __init__(
        self,
        account: str = "",
        *,
        scopes: Iterable[str] = (),
        audience: str = "",
        acr_values: str = "",
        max_age_seconds: int | None = None,
        socket_path: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.account, self.scopes, self.audience = account, tuple(scopes), audience
        self.step_up = (acr_values, max_age_seconds)  # asked every time; a challenge's wins
        self.socket_path, self.timeout = socket_path, timeout

    def ask(self, client: Any, *, refused: bool = False, challenge: Any = None) -> Any:
        """The token (or, from the asyncio client, its awaitable); after a 401, `refused`.

        `challenge`: the 401's WWW-Authenticate values; a step-up among them asks for a
        token of a sign-in that meets it (the broker waits for one) instead.
        """
        step_up = step_up_of(challenge) if challenge is not None else None
        acr_values, max_age = step_up or self.step_up
        return client.get_token(
            self.account,
            scopes=self.scopes,
            audience=self.audience,
            refused=refused and step_up is None,
            acr_values=acr_values,
            max_age_seconds=max_age,
        )


class HttpxFlows(TokenRequest):
    """The auth flow of httpx and httpx2: the broker's token, once more after a 401.

    The request body is read first, so that a streamed one can be sent again.
    """

    requires_request_body = True
    _sync: Any = None  # a BrokerClient, opened at the first request
    _async: Any = None  # an AsyncBrokerClient, likewise

    def sync_auth_flow(self, request: Any) -> Generator[Any, Any, None]:
        """Send the request with the token; after a 401, once more with a renewed one."""
        if self._sync is None:
            from ._sync import BrokerClient

            self._sync = BrokerClient(self.socket_path, timeout=self.timeout)
        request.read()
        sent = self.ask(self._sync)
        request.headers["Authorization"] = sent.authorization
        response = yield request
        if response.status_code == UNAUTHORIZED:
            challenge = response.headers.get_list("www-authenticate")
            renewed = self.ask(self._sync, refused=True, challenge=challenge)
            if renewed.access_token != sent.access_token:
                request.headers["Authorization"] = renewed.authorization
                yield request

    async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        """The same for an asyncio client."""
        if self._async is None:
            from ._async import AsyncBrokerClient  # grpc.aio: only for an asyncio client

            self._async = AsyncBrokerClient(self.socket_path, timeout=self.timeout)
        await request.aread()
        sent = await self.ask(self._async)
        request.headers["Authorization"] = sent.authorization
        response = yield request
        if response.status_code == UNAUTHORIZED:
            challenge = response.headers.get_list("www-authenticate")
            renewed = await self.ask(self._async, refused=True, challenge=challenge)
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
