"""Outages of every kind (stopped, 5xx, stalled, garbage) and stalls mid-refresh: the
valid token is served, status says degraded, nobody is signed out for a slow provider.

Against the real daemon and the stub provider; the unit tests in
tests/unit/test_refresh_*.py cover the same rules on a fake clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from signin_broker.client import BrokerClient, BrokerError, EventKind, NotSignedIn, SignInState
from signin_broker_testing import StubProvider
from support.events import watching
from support.signin import signed_in_daemon
from support.waiting import eventually

# Longer than the 10 s after which the daemon used to give a refresh up (and send its
# refresh token again, already spent by the provider: invalid_grant, signed out).
STALL_SECONDS = 12.0


@contextmanager
def an_app_wanting_a_renewal(socket_path: Path) -> Iterator[list[str]]:
    """An app asking twice a second for a token lasting an hour: the outcome of each ask."""
    outcomes: list[str] = []
    stop = threading.Event()

    def ask() -> None:
        with BrokerClient(socket_path, timeout=30) as client:
            while not stop.is_set():
                try:
                    client.get_token(min_ttl_seconds=3600)
                    outcomes.append("token")
                except BrokerError as error:
                    outcomes.append(error.code.name)
                stop.wait(0.5)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    try:
        yield outcomes
    finally:
        stop.set()
        thread.join(40)


def test_a_provider_stalled_mid_refresh_signs_nobody_out(
    stub: StubProvider, socket_path: Path
) -> None:
    """The stub rotates the refresh token, then holds its answer past the old timeout."""
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client, watching(socket_path) as events:
        before = client.get_token()
        stub.delay_token_response(STALL_SECONDS, after_processing=True)
        with an_app_wanting_a_renewal(socket_path) as outcomes:
            eventually(
                lambda: len(stub.token_requests("refresh_token")) == 1, "one refresh", 15, 0.02
            )
            for _ in range(10):  # during the stall: the valid token, for every app
                assert client.get_token().access_token == before.access_token
                time.sleep(0.3)
            events.wait_for(EventKind.REFRESHED, timeout=STALL_SECONDS + 30)
        after = client.get_token()
        assert after.access_token != before.access_token  # the late answer, stored and used
        info = stub.access_token_info(after.access_token)
        assert info is not None and info["active"]
        assert client.status().sign_in_state is SignInState.SIGNED_IN
    assert "UNAUTHENTICATED" not in outcomes, outcomes
    assert EventKind.REVOKED not in events.kinds()
    assert len(stub.token_requests("refresh_token")) == 1  # exactly one grant
    daemon.stop()


def test_min_ttl_past_the_token_lifetime_is_refused_without_hammering(
    stub: StubProvider, socket_path: Path
) -> None:
    stub.access_token_ttl = 60
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        for _ in range(100):
            with pytest.raises(BrokerError) as caught:
                client.get_token(min_ttl_seconds=61)
            assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert caught.value.message == (
                "the provider issues tokens valid for 60 s; min_ttl_seconds 61 cannot be met"
            )
        assert client.get_token().account == "user:1001"  # the session is fine
    assert len(stub.token_requests("refresh_token")) <= 1
    daemon.stop()


def test_a_bare_400_refresh_and_a_401_userinfo_end_the_session_at_once(
    stub: StubProvider, socket_path: Path
) -> None:
    """An admin revoked the session; the provider refuses the refresh without an error code."""
    stub.access_token_ttl = 4  # the keeper renews after about 3 s
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client, watching(socket_path) as events:
        client.get_token()
        stub.fail_token_endpoint(status=400, error="", times=1000)
        stub.revoke_user("1001")
        events.wait_for(EventKind.REVOKED, timeout=30)
        with pytest.raises(NotSignedIn):
            client.get_token()
        status = client.status()
        assert status.sign_in_state is SignInState.SIGNED_OUT  # never "signed in" now
        assert status.account_count == 0
    (ended,) = daemon.expect_log(msg="the provider ended the session")
    assert ended["reason"] == (
        "the provider refused to renew the token (invalid_request, HTTP 400)"
        " and rejects the access token"
    )
    time.sleep(1.0)  # a hammering daemon would have sent about twenty more
    assert len(stub.token_requests("refresh_token")) == 1
    daemon.stop()


# -- outages of every kind, and what stays undisturbed ------------------------------------------


@pytest.mark.parametrize("mode", ["stopped", "http_500", "stall", "garbage"])
def test_during_an_outage_the_valid_token_is_served_and_status_says_degraded(
    stub: StubProvider, socket_path: Path, mode: str
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "1")
    with BrokerClient(socket_path) as client, watching(socket_path) as events:
        token = client.get_token()
        stub.outage(mode, stall_seconds=12)
        degraded = events.wait_for(EventKind.DEGRADED, timeout=30)
        status = client.status()
        assert status.degraded_reason and status.degraded_reason in degraded.detail
        began = time.monotonic()
        assert client.get_token().access_token == token.access_token
        still_served = client.get_token(min_ttl_seconds=1800)  # wants a renewal it cannot get
        assert still_served.access_token == token.access_token
        assert time.monotonic() - began < 5  # callers are not held up by the outage
        human = client.status()
        assert human.default is not None and human.default.id == "user:1001"
        stub.outage(None)
        events.wait_for(EventKind.RECOVERED, timeout=90)
        assert client.status().degraded_reason == ""
        assert client.get_token().account == "user:1001"  # never signed out by an outage
    assert EventKind.REVOKED not in events.kinds()
    daemon.stop()


def test_rotated_provider_keys_do_not_disturb_the_session(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    stub.rotate_keys(keep_previous=False)
    with BrokerClient(socket_path) as client:
        client.get_token(min_ttl_seconds=3600)
        assert client.status().degraded_reason == ""
    daemon.stop()


def test_status_command_shows_expiry_renewal_contact_and_storage(
    stub: StubProvider, socket_path: Path
) -> None:
    from support.commands import signin_broker

    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        client.get_token(min_ttl_seconds=3600)  # contact with the provider
    shown = signin_broker("--socket", str(socket_path), "status").stdout
    for label in ("access token", "next renewal", "last answered", "storage", "keyring"):
        assert label in shown, shown
    daemon.stop()
