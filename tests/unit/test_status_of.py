"""A refusal's gRPC status follows its class, and a subclass keeps its base's status
(a new kind of 'sign-in required' must not turn into FAILED_PRECONDITION)."""

from __future__ import annotations

from grpclib.const import Status

from signin_broker.daemon.api.statuses import InvalidRequest, status_of
from signin_broker.session.errors import AccountNotFound, SessionError, SignInRequired


class SignedOutByTheProvider(SignInRequired):
    pass


class NotThere(AccountNotFound):
    pass


def test_a_subclass_keeps_its_base_classs_status() -> None:
    assert status_of(SignInRequired("ended")) is Status.UNAUTHENTICATED
    assert status_of(SignedOutByTheProvider("ended")) is Status.UNAUTHENTICATED
    assert status_of(NotThere()) is Status.NOT_FOUND


def test_an_unmapped_refusal_is_a_failed_precondition_and_bad_input_invalid_argument() -> None:
    assert status_of(SessionError("something else")) is Status.FAILED_PRECONDITION
    assert status_of(InvalidRequest("bad")) is Status.INVALID_ARGUMENT
