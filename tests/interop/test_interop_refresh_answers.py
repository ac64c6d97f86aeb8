"""Refresh answers broken or slow, from panva's oidc-provider, which rotates refresh tokens.

The provider ends the whole grant when a rotated refresh token comes back, and prints
each such reuse; the tests make it answer one refresh badly (provider.mjs, breakAnswer):
- its own answer, a JSON 200 cut short, once it has been seen to rotate or before (a
  public client's tokens may rotate): the token was spent there, so it is never sent
  again; the session serves its access token, then ends once when that expires, saying
  why in status and in the event;
- a captive portal's HTML page in its place (the request never reached it): the same
  refresh token goes again, and the session goes on;
- its answer trickled over SIGNIN_BROKER_TEST_TRICKLE_SECONDS (12 s; 200 is the slow
  run's 1 byte/s for 200 s): taken, as the bytes keep coming; meanwhile the old token is
  served while valid, then apps are told to try again; the new token, already dead on
  arrival (tokens live from when they were asked for), is renewed at once;
- an answer that stops half-way: given up after the daemon's idle timeout (shortened
  to 2 s by its test knob), and taken as spent, as a cut answer is.
No token served is one the provider refuses, and no refresh token is sent twice.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from signin_broker.client import BrokerClient, BrokerError, EventKind, NotSignedIn, Token
from signin_broker_testing.daemon import short_temp_dir
from support.events import watching
from support.providers.checks import signed_in_daemon, userinfo_status
from support.providers.node import NodeOidcProvider
from support.waiting import eventually

pytestmark = pytest.mark.external  # Node

TTL = 8
TRICKLE_SECONDS = int(os.environ.get("SIGNIN_BROKER_TEST_TRICKLE_SECONDS", "12"))
IDLE_KNOB = {"SIGNIN_BROKER_TEST_REFRESH_IDLE_SECONDS": "2"}


@pytest.fixture(scope="module")
def provider() -> Iterator[NodeOidcProvider]:
    folder = short_temp_dir()
    with NodeOidcProvider(folder, TTL) as running:
        yield running
    shutil.rmtree(folder, ignore_errors=True)


def alive(provider: NodeOidcProvider, client: BrokerClient, **kw: bool) -> Token | None:
    """A token the provider accepts; None while apps are told to try again (never signed out)."""
    try:
        token = client.get_token(**kw)
    except BrokerError as error:
        assert error.code == grpc.StatusCode.UNAVAILABLE, error
        assert error.retry_after is not None and 1 <= error.retry_after <= 60, error
        return None
    assert userinfo_status(provider, token) == 200, "a dead token was served"
    return token


def renewed(provider: NodeOidcProvider, client: BrokerClient, old: Token) -> Token | None:
    """A token other than `old`, asking for a renewal now (as an app refused by an API)."""
    token = alive(provider, client, refused=True)
    return token if token is not None and token.access_token != old.access_token else None


@pytest.mark.parametrize(
    ("how", "seen_to_rotate"), [("not_json", True), ("stall", True), ("not_json", False)]
)
def test_its_own_broken_answer_spends_the_token_and_the_session_ends_once_saying_why(
    provider: NodeOidcProvider, socket_path: Path, how: str, seen_to_rotate: bool
) -> None:
    """Not yet seen to rotate (the session's first refresh), it may rotate all the same.

    A public client's refresh tokens are rotated or sender-constrained (RFC 9700 4.14.2):
    the broken first answer spent the token as surely as a later one.
    """
    mark, broken = len(provider.refresh_statuses()), len(provider.broken())
    daemon = signed_in_daemon(provider, socket_path, env=IDLE_KNOB)  # a stall: 2 s, not 180
    with BrokerClient(socket_path, timeout=30) as client, watching(socket_path) as events:
        rotated = first = client.get_token()
        if seen_to_rotate:
            rotated = eventually(lambda: renewed(provider, client, first), "a rotating renewal")
        provider.break_next_refresh(how)
        eventually(lambda: renewed(provider, client, rotated) or provider.broken()[broken:], how)
        account = eventually(lambda: client.status().default.at_risk, "the warning")  # type: ignore[union-attr]
        assert "never sent twice" in account and "sign in again before" in account
        while time.time() < rotated.expires_at_unix - 0.5:  # bounded: one lifetime
            assert alive(provider, client) == rotated  # the old token, while it lasts
            time.sleep(0.25)
        ended = eventually(lambda: client.status().ended_sessions, "the session's end")
        with pytest.raises(NotSignedIn):
            client.get_token()
        event = events.wait_for(EventKind.SIGNED_OUT)
    cause = "not JSON" if how == "not_json" else "stopped half-way"
    assert cause in ended[0].reason and "sign in again" in ended[0].reason
    assert cause in event.detail and events.kinds().count(EventKind.SIGNED_OUT) == 1
    once_each = [200, 200] if seen_to_rotate else [200]
    assert provider.reuses() == 0 and provider.refresh_statuses()[mark:] == once_each
    daemon.stop()


def test_a_middleboxs_page_never_reached_the_provider_and_the_session_goes_on(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    mark, broken = len(provider.refresh_statuses()), len(provider.broken())
    daemon = signed_in_daemon(provider, socket_path)
    with BrokerClient(socket_path, timeout=30) as client:
        first = client.get_token()
        provider.break_next_refresh("html")
        after = eventually(lambda: renewed(provider, client, first), "a renewal after the page")
        assert provider.broken()[broken:] == ["html"] and not client.status().ended_sessions
        assert alive(provider, client) == after
    assert provider.reuses() == 0 and provider.refresh_statuses()[mark:] == [200]  # sent on, once
    daemon.stop()


def test_a_trickled_answer_is_taken_while_apps_are_told_when_to_ask_again(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    mark, broken = len(provider.refresh_statuses()), len(provider.broken())
    daemon = signed_in_daemon(provider, socket_path)
    with BrokerClient(socket_path, timeout=30) as client:
        first = client.get_token()
        provider.break_next_refresh(f"trickle:{TRICKLE_SECONDS}")
        asked = time.time()
        assert alive(provider, client, refused=True) == first  # the renewal is on its way
        told_to_wait = 0
        while time.time() < asked + TRICKLE_SECONDS + 15:  # bounded: the trickle, and room
            token = alive(provider, client)
            if token is None:
                told_to_wait += 1
            elif token != first:
                break  # renewed, and alive
            time.sleep(0.5)
        else:
            raise AssertionError("no renewal after the trickled answer")
        assert told_to_wait >= 1  # the old token expired while the answer trickled in
    assert provider.broken()[broken:] == [f"trickle:{TRICKLE_SECONDS}"]
    # The trickled answer's token was dead on arrival: renewed at once, with its new token.
    assert provider.reuses() == 0 and provider.refresh_statuses()[mark:] == [200, 200]
    daemon.stop()
