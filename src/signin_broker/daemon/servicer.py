"""The TokenBroker gRPC service: checks requests, asks the session manager, maps errors to statuses.

Statuses follow the contract's table 7.1: UNAUTHENTICATED "sign-in required",
NOT_FOUND "not found" (also for accounts the caller may not see), INVALID_ARGUMENT
with what is wrong, FAILED_PRECONDITION for what the daemon is not set up to do, and
INTERNAL "internal" for anything unexpected, whose details go to the log only.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from .._version import __version__
from ..session.accounts import AccountInfo, SignInState
from ..session.errors import (
    AccountNotFound,
    NotConfigured,
    ProviderRefused,
    ProviderUnreachable,
    ScopeNotGranted,
    SessionError,
    SignInRequired,
    TokenTooShortLived,
)
from ..session.events import EventKind, SessionEvent, WatcherDropped
from ..session.manager import SessionManager
from ..session.validation import (
    MAX_MIN_TTL_SECONDS,
    check_account,
    check_audience,
    check_scopes,
)
from ..v1 import broker_pb2 as pb
from ..v1 import broker_pb2_grpc as pb_grpc
from .callers import current_caller
from .pages import BEGIN_PATH

log = logging.getLogger(__name__)

_STATUS_OF: dict[type[SessionError], grpc.StatusCode] = {
    SignInRequired: grpc.StatusCode.UNAUTHENTICATED,
    AccountNotFound: grpc.StatusCode.NOT_FOUND,
    NotConfigured: grpc.StatusCode.FAILED_PRECONDITION,
    ScopeNotGranted: grpc.StatusCode.FAILED_PRECONDITION,
    TokenTooShortLived: grpc.StatusCode.FAILED_PRECONDITION,
    ProviderRefused: grpc.StatusCode.FAILED_PRECONDITION,
    ProviderUnreachable: grpc.StatusCode.UNAVAILABLE,
}
_SIGN_IN_STATE = {
    SignInState.NOT_CONFIGURED: pb.SIGN_IN_STATE_NOT_CONFIGURED,
    SignInState.SIGNED_OUT: pb.SIGN_IN_STATE_SIGNED_OUT,
    SignInState.SIGNED_IN: pb.SIGN_IN_STATE_SIGNED_IN,
}
_EVENT_KIND = {
    EventKind.SIGNED_IN: pb.EVENT_KIND_SIGNED_IN,
    EventKind.SIGNED_OUT: pb.EVENT_KIND_SIGNED_OUT,
    EventKind.REFRESHED: pb.EVENT_KIND_REFRESHED,
    EventKind.REVOKED: pb.EVENT_KIND_REVOKED,
    EventKind.SIGN_IN_FAILED: pb.EVENT_KIND_SIGN_IN_FAILED,
    EventKind.DEGRADED: pb.EVENT_KIND_DEGRADED,
    EventKind.RECOVERED: pb.EVENT_KIND_RECOVERED,
}


class InvalidRequest(Exception):
    """The request itself is wrong; the message says how."""


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    """Facts about this daemon process that GetStatus reports."""

    socket_path: Path
    started_at: float
    web_url: str  # the loopback page, e.g. http://127.0.0.1:8765
    pid: int = os.getpid()


Context = grpc.aio.ServicerContext[Any, Any]
Response = TypeVar("Response")


def _unary(
    method: Callable[[Any, Any, Context], Awaitable[Response]],
) -> Callable[[Any, Any, Context], Awaitable[Response]]:
    """Map the errors of a unary method onto gRPC statuses."""

    @functools.wraps(method)
    async def mapped(self: Any, request: Any, context: Context) -> Response:
        try:
            return await method(self, request, context)
        except (SessionError, InvalidRequest) as error:
            await context.abort(_status_of(error), str(error))
        except Exception:
            log.exception("unexpected error", extra={"method": method.__name__})
            await context.abort(grpc.StatusCode.INTERNAL, "internal")
        raise AssertionError("unreachable: abort raises")

    return mapped


def _status_of(error: SessionError | InvalidRequest) -> grpc.StatusCode:
    if isinstance(error, InvalidRequest):
        return grpc.StatusCode.INVALID_ARGUMENT
    return _STATUS_OF.get(type(error), grpc.StatusCode.FAILED_PRECONDITION)


class TokenBrokerServicer(pb_grpc.TokenBrokerServicer):
    """Serves signin_broker.v1.TokenBroker for the verified caller of each call."""

    def __init__(self, session: SessionManager, info: DaemonInfo) -> None:
        self._session = session
        self._info = info

    @_unary
    async def GetToken(self, request: pb.GetTokenRequest, context: Context) -> pb.GetTokenResponse:
        """Check the request, then return a token from the session manager."""
        account = _checked(check_account, request.account)
        scopes = _checked(check_scopes, list(request.scopes))
        if not 0 <= request.min_ttl_seconds <= MAX_MIN_TTL_SECONDS:
            raise InvalidRequest(f"min_ttl_seconds must be between 0 and {MAX_MIN_TTL_SECONDS}")
        audience = _checked(check_audience, request.audience)
        caller = current_caller()
        token = await self._session.get_token(
            account,
            scopes,
            request.min_ttl_seconds,
            audience=audience,
            app=caller.executable,
            pid=caller.pid,
        )
        return pb.GetTokenResponse(
            access_token=token.access_token,
            token_type=token.token_type,
            expires_at_unix=token.expires_at,
            scopes=token.scopes,
            account=token.account,
        )

    @_unary
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Context
    ) -> pb.GetStatusResponse:
        """Describe the daemon, the sign-in state and the caller."""
        caller = current_caller()
        await self._session.restored.wait()
        default = self._session.account(self._session.default_account)
        return pb.GetStatusResponse(
            version=__version__,
            pid=self._info.pid,
            started_at_unix=int(self._info.started_at),
            socket_path=str(self._info.socket_path),
            issuer=self._session.issuer or "",
            sign_in_state=_SIGN_IN_STATE[self._session.state],
            default_account=self._session.default_account,
            account_count=len(self._session.accounts()),
            caller=pb.Caller(
                uid=caller.uid, gid=caller.gid, pid=caller.pid, executable=caller.executable
            ),
            web_url=self._info.web_url + "/",
            degraded_reason=self._session.degraded_reason,
            last_provider_contact_unix=int(self._session.last_provider_contact),
            storage=self._session.storage,
            default_account_detail=_account(default) if default else None,
        )

    @_unary
    async def ListAccounts(
        self, request: pb.ListAccountsRequest, context: Context
    ) -> pb.ListAccountsResponse:
        """List the accounts, default first."""
        await self._session.restored.wait()
        return pb.ListAccountsResponse(accounts=[_account(a) for a in self._session.accounts()])

    @_unary
    async def BeginSignIn(
        self, request: pb.BeginSignInRequest, context: Context
    ) -> pb.BeginSignInResponse:
        """Start a sign-in."""
        started = self._session.new_sign_in()
        return pb.BeginSignInResponse(
            sign_in_id=started.sign_in_id,
            sign_in_url=f"{self._info.web_url}{BEGIN_PATH}?sign_in={started.sign_in_id}",
            expires_at_unix=int(started.expires_at),
        )

    @_unary
    async def SignOut(self, request: pb.SignOutRequest, context: Context) -> pb.SignOutResponse:
        """End an account's session."""
        result = await self._session.sign_out(
            _checked(check_account, request.account), self._info.web_url + "/"
        )
        return pb.SignOutResponse(was_signed_in=result.was_signed_in, logout_url=result.logout_url)

    async def WatchEvents(
        self, request: pb.WatchEventsRequest, context: Context
    ) -> AsyncIterator[pb.WatchEventsResponse]:
        """A snapshot, then every event until the caller leaves or the daemon stops."""
        with self._session.events.subscribe() as subscription:
            yield self._event_message(pb.EVENT_KIND_SNAPSHOT, "", time.time(), "", "")
            while True:
                try:
                    event = await subscription.next()
                except WatcherDropped as dropped:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, str(dropped))
                yield self._event(event)

    def _event(self, event: SessionEvent) -> pb.WatchEventsResponse:
        return self._event_message(
            _EVENT_KIND[event.kind],
            event.account,
            event.occurred_at,
            event.detail,
            event.sign_in_id,
        )

    def _event_message(
        self, kind: pb.EventKind.ValueType, account: str, at: float, detail: str, sign_in_id: str
    ) -> pb.WatchEventsResponse:
        return pb.WatchEventsResponse(
            kind=kind,
            account=account,
            occurred_at_unix_ms=int(at * 1000),
            sign_in_state=_SIGN_IN_STATE[self._session.state],
            detail=detail,
            sign_in_id=sign_in_id,
        )


def _checked(check: Callable[[Any], Any], value: Any) -> Any:
    try:
        return check(value)
    except ValueError as error:
        raise InvalidRequest(str(error)) from None


def _account(account: AccountInfo) -> pb.Account:
    return pb.Account(
        id=account.id,
        platform_user_id=account.platform_user_id,
        workspace_id=account.workspace_id,
        display_name=account.display_name,
        email=account.email,
        is_default=account.is_default,
        access_token_expires_at_unix=account.access_token_expires_at,
        next_refresh_unix=account.next_refresh_at,
    )
