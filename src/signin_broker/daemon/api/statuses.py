"""How a refusal becomes a gRPC status, as the contract's table 7.1 says.

UNAUTHENTICATED "sign-in required", NOT_FOUND "not found" (also for accounts the
caller may not see), INVALID_ARGUMENT with what is wrong (also a write naming an
account the caller may not act on, the contract's T4, and a name that fits several
accounts the caller may see), PERMISSION_DENIED when the
user's app policy refuses the caller, FAILED_PRECONDITION for what the daemon is not
set up to do or the account's sign-in lacks (a scope, a step-up that did not come),
and INTERNAL "internal" for anything unexpected, whose details go to the log only.
A refusal's status is its class's, or its nearest base class's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ...session.errors import (
    AccountNotFound,
    AcrNotOffered,
    AliasConflict,
    AliasHidesLogin,
    AmbiguousAccount,
    AudienceNotAllowed,
    IdTokenNotAllowed,
    IdTokenUnavailable,
    InvalidSignIn,
    NoPerson,
    NotConfigured,
    ProviderDoesNotFit,
    ProviderRefused,
    ProviderUnreachable,
    RetryLater,
    ScopeNotGranted,
    ScopesNotAllowed,
    SessionError,
    SignInRequired,
    StepUpRequired,
    StorageWaits,
    TokenTooShortLived,
    TooManyAliases,
    TooManyNewTokens,
    UnknownAlias,
)
from ..refusals import (
    AppDenied,
    ForwardExists,
    ForwardNotFound,
    NewAccountNotAllowed,
    NoAccountToForward,
    NotABrowserApp,
    NothingWaits,
    UnknownApp,
)
from .retry_hints import RetryHinted

_STATUS_OF: dict[type[SessionError], Status] = {
    SignInRequired: Status.UNAUTHENTICATED,
    InvalidSignIn: Status.INVALID_ARGUMENT,
    AccountNotFound: Status.NOT_FOUND,
    AmbiguousAccount: Status.INVALID_ARGUMENT,  # the name fits several: it lists their ids
    AliasConflict: Status.INVALID_ARGUMENT,  # an alias and another's login: it says what to do
    UnknownAlias: Status.NOT_FOUND,
    AliasHidesLogin: Status.FAILED_PRECONDITION,
    TooManyAliases: Status.RESOURCE_EXHAUSTED,
    NotConfigured: Status.FAILED_PRECONDITION,
    ProviderDoesNotFit: Status.FAILED_PRECONDITION,
    NoPerson: Status.FAILED_PRECONDITION,  # a service account: no sign-in, step-up, ID token
    ScopeNotGranted: Status.FAILED_PRECONDITION,
    TokenTooShortLived: Status.FAILED_PRECONDITION,
    # The account is signed in (UNAUTHENTICATED would say it is not, and other apps
    # still get its tokens); its sign-in lacks what the request needs, as with a scope.
    StepUpRequired: Status.FAILED_PRECONDITION,
    AcrNotOffered: Status.INVALID_ARGUMENT,
    ProviderRefused: Status.FAILED_PRECONDITION,
    ProviderUnreachable: Status.UNAVAILABLE,
    StorageWaits: Status.UNAVAILABLE,  # it passes once the state folder can be written
    TooManyNewTokens: Status.RESOURCE_EXHAUSTED,
    AppDenied: Status.PERMISSION_DENIED,
    NewAccountNotAllowed: Status.PERMISSION_DENIED,
    ScopesNotAllowed: Status.PERMISSION_DENIED,
    AudienceNotAllowed: Status.PERMISSION_DENIED,
    IdTokenNotAllowed: Status.PERMISSION_DENIED,
    IdTokenUnavailable: Status.FAILED_PRECONDITION,
    UnknownApp: Status.NOT_FOUND,
    NothingWaits: Status.FAILED_PRECONDITION,
    NotABrowserApp: Status.INVALID_ARGUMENT,
    ForwardExists: Status.ALREADY_EXISTS,
    ForwardNotFound: Status.NOT_FOUND,
    NoAccountToForward: Status.FAILED_PRECONDITION,
}


class InvalidRequest(Exception):
    """The request itself is wrong; the message says how."""


def grpc_error(error: SessionError | InvalidRequest) -> GRPCError:
    """The gRPC refusal of an error, with a retry hint when it passes (RetryLater)."""
    if isinstance(error, RetryLater):
        return RetryHinted(status_of(error), str(error), error.retry_after)
    return GRPCError(status_of(error), str(error))


def status_of(error: SessionError | InvalidRequest) -> Status:
    """The gRPC status of a refusal: its class's, or its nearest base class's that has one."""
    if isinstance(error, InvalidRequest):
        return Status.INVALID_ARGUMENT
    return next(
        (_STATUS_OF[kind] for kind in type(error).__mro__ if kind in _STATUS_OF),
        Status.FAILED_PRECONDITION,
    )


def checked(check: Callable[[Any], Any], value: Any) -> Any:
    try:
        return check(value)
    except ValueError as error:
        raise InvalidRequest(str(error)) from None
