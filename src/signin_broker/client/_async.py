"""The asyncio client: the same calls as BrokerClient, awaited."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

import grpc

from ..v1 import broker_pb2 as pb
from ..v1 import broker_pb2_grpc as pb_grpc
from ._channel import (
    CHANNEL_OPTIONS,
    DEFAULT_TIMEOUT_SECONDS,
    resolve_socket,
    sign_in_request,
    target,
    token_request,
)
from ._errors import translate
from ._models import Account, Event, SignInStart, SignOutResult, Status, Token

Response = TypeVar("Response")


class AsyncBrokerClient:
    """Talks to the signin-broker daemon for an asyncio app.

    Create one per event loop and reuse it: it keeps one channel and reconnects by
    itself when the daemon restarts. Use `async with` or call `close()`.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.socket_path = resolve_socket(socket_path)
        self.timeout = timeout
        self._channel = grpc.aio.insecure_channel(target(self.socket_path), options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.TokenBrokerStub(self._channel)

    async def get_token(
        self,
        account: str = "",
        *,
        scopes: Iterable[str] = (),
        min_ttl_seconds: int = 0,
        audience: str = "",
    ) -> Token:
        """An access token of `account` (default account when empty).

        Fewer `scopes` than the sign-in's, or an `audience` (RFC 8707), give a
        down-scoped token, which the daemon keeps while it is valid.
        """
        request = token_request(account, scopes, min_ttl_seconds, audience)
        return Token.from_proto(await self._call(self._stub.GetToken, request))

    async def status(self) -> Status:
        """The daemon's status and how it sees this process."""
        return Status.from_proto(await self._call(self._stub.GetStatus, pb.GetStatusRequest()))

    async def accounts(self) -> list[Account]:
        """The signed-in accounts this app may use, default first."""
        response = await self._call(self._stub.ListAccounts, pb.ListAccountsRequest())
        return [Account.from_proto(account) for account in response.accounts]

    async def begin_sign_in(
        self,
        *,
        workspace_id: str = "",
        device: bool | None = False,
        account: str = "",
        redirect_to: str = "",
        authorize_params: Mapping[str, str] | None = None,
        provider: str = "",
    ) -> SignInStart:
        """Start a sign-in (within a workspace, if given); the user completes it at the URL.

        device=True: a device sign-in (RFC 8628): the user enters `user_code` at
        `verification_uri` on another device; `account` names the account it signs in
        again (the pending sign-in then belongs to it). None lets the daemon choose.
        redirect_to: the loopback page the browser lands on after a browser sign-in.
        authorize_params: extra authorize parameters of a browser sign-in, such as
        {"login_hint": "me@example.com", "prompt": "select_account"}.
        provider: the alias of the identity provider to sign in at (Status.providers);
        empty for the account's own, else the daemon's default one.
        """
        request = sign_in_request(
            workspace_id,
            device,
            account=account,
            redirect_to=redirect_to,
            authorize_params=authorize_params,
            provider=provider,
        )
        return SignInStart.from_proto(await self._call(self._stub.BeginSignIn, request))

    async def sign_out(self, account: str = "") -> SignOutResult:
        """End the session of `account` (default account when empty)."""
        request = pb.SignOutRequest(account=account)
        return SignOutResult.from_proto(await self._call(self._stub.SignOut, request))

    async def watch_events(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - it is the call's gRPC deadline
    ) -> AsyncIterator[Event]:
        """Session events as they happen, starting with a SNAPSHOT.

        Runs until the client closes, or for `timeout` seconds (then BrokerError
        DEADLINE_EXCEEDED).
        """
        try:
            async for message in self._stub.WatchEvents(pb.WatchEventsRequest(), timeout=timeout):
                yield Event.from_proto(message)
        except grpc.RpcError as error:
            raise translate(error, self.socket_path) from None

    async def close(self) -> None:
        """Close the channel; pending calls are cancelled."""
        await self._channel.close(grace=None)

    async def __aenter__(self) -> AsyncBrokerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _call(self, method: Callable[..., Awaitable[Response]], request: Any) -> Response:
        try:
            return await method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise translate(error, self.socket_path) from None
