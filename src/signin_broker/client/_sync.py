"""The synchronous client: one channel to the daemon, typed results, BrokerError on failure."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
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
from ._models import (
    Account,
    App,
    AppDecision,
    AppList,
    AuditEvent,
    Event,
    SignInStart,
    SignOutResult,
    Status,
    Token,
)

Response = TypeVar("Response")


class BrokerClient:
    """Talks to the signin-broker daemon for a synchronous app.

    Create one per process and reuse it: it keeps one channel, is safe to share between
    threads, and reconnects by itself when the daemon restarts.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.socket_path = resolve_socket(socket_path)
        self.timeout = timeout
        self._channel = grpc.insecure_channel(target(self.socket_path), options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.TokenBrokerStub(self._channel)

    def get_token(
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
        return Token.from_proto(self._call(self._stub.GetToken, request))

    def status(self) -> Status:
        """The daemon's status and how it sees this process."""
        return Status.from_proto(self._call(self._stub.GetStatus, pb.GetStatusRequest()))

    def accounts(self) -> list[Account]:
        """The signed-in accounts this app may use, default first."""
        response = self._call(self._stub.ListAccounts, pb.ListAccountsRequest())
        return [Account.from_proto(account) for account in response.accounts]

    def begin_sign_in(
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
        return SignInStart.from_proto(self._call(self._stub.BeginSignIn, request))

    def sign_in_qr(self, sign_in_id: str, *, png: bool = False) -> tuple[str, bytes]:
        """The QR code of a pending device sign-in, for a TV to show: (media type, image)."""
        request = pb.GetSignInQrRequest(
            sign_in_id=sign_in_id, format=pb.QR_FORMAT_PNG if png else pb.QR_FORMAT_SVG
        )
        response = self._call(self._stub.GetSignInQr, request)
        return response.media_type, response.image

    def sign_out(self, account: str = "") -> SignOutResult:
        """End the session of `account` (default account when empty)."""
        request = pb.SignOutRequest(account=account)
        return SignOutResult.from_proto(self._call(self._stub.SignOut, request))

    # -- the user's management of the broker (the bundled CLI uses these) ---------------

    def apps(self) -> AppList:
        """The apps that called the daemon or are in the policy, with their decisions."""
        return AppList.from_proto(self._call(self._stub.ListApps, pb.ListAppsRequest()))

    def set_app_policy(
        self,
        app: str,
        decision: AppDecision,
        *,
        accounts: Iterable[str] = (),
        scopes: Iterable[str] = (),
        pin: bool = False,
    ) -> tuple[App, int]:
        """Record the user's decision for an app; returns it and how many waiting calls it answered.

        AppDecision.UNSPECIFIED removes the app's entry so the default applies again.
        """
        request = pb.SetAppPolicyRequest(
            app=app,
            decision=pb.AppDecision.Value(f"APP_DECISION_{decision.name}"),
            accounts=list(accounts),
            scopes=list(scopes),
            pin=pin,
        )
        response = self._call(self._stub.SetAppPolicy, request)
        return App.from_proto(response.app), response.answered

    def set_default_account(self, account: str) -> Account:
        """Make `account` the one used when a request names none."""
        request = pb.SetDefaultAccountRequest(account=account)
        return Account.from_proto(self._call(self._stub.SetDefaultAccount, request).account)

    def remove_account(self, account: str) -> tuple[str, int]:
        """Sign out and delete all the daemon keeps of `account`.

        Returns the provider's logout URL and when the account's audit rows are purged.
        """
        response = self._call(self._stub.RemoveAccount, pb.RemoveAccountRequest(account=account))
        return response.logout_url, response.audit_purge_at_unix

    def audit_events(
        self, *, account: str = "", app: str = "", limit: int = 100, before_id: int = 0
    ) -> list[AuditEvent]:
        """Recent audit rows of the accounts this app may see, newest first."""
        request = pb.ListAuditEventsRequest(
            account=account, app=app, limit=limit, before_id=before_id
        )
        response = self._call(self._stub.ListAuditEvents, request)
        return [AuditEvent.from_proto(event) for event in response.events]

    def watch_events(self, *, timeout: float | None = None) -> Iterator[Event]:
        """Session events as they happen, starting with a SNAPSHOT.

        Runs until the client closes, or for `timeout` seconds (then BrokerError
        DEADLINE_EXCEEDED).
        """
        try:
            for message in self._stub.WatchEvents(pb.WatchEventsRequest(), timeout=timeout):
                yield Event.from_proto(message)
        except grpc.RpcError as error:
            raise translate(error, self.socket_path) from None

    def close(self) -> None:
        """Close the channel; pending calls fail."""
        self._channel.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, method: Callable[..., Response], request: Any) -> Response:
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise translate(error, self.socket_path) from None
