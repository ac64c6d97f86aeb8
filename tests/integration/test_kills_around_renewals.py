"""SIGKILL around renewals loses a session only where the provider completed the refresh
whose answer the kill lost; a SIGTERM during one still stops cleanly.

Random kills: one session, many kills of the daemon (SIGNIN_BROKER_TEST_KILLS, default
20) at random moments while renewals run, each followed by a restart on the same state.
The stub rotates refresh tokens, delays its answers at random (before or after acting on
the refresh), and ends the grant when a spent refresh token comes back: its own record
of those reuses is the count of sessions a kill could not help but lose. Every restart
must read its state (nothing rolled back or unreadable, no temporary file left); every
session lost must be one the stub saw reused, and status must say so. Then one kill at
each chosen moment of a refresh: right after the rotated token is stored, and while the
provider holds the request (before it acted, and after).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, BrokerError, SignInState
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.signin import authorizations, sign_in, signed_in_daemon
from support.state import state_files
from support.storage import state_dir
from support.waiting import eventually

KILLS = int(os.environ.get("SIGNIN_BROKER_TEST_KILLS", "20"))


def renew_in_background(socket_path: Path) -> threading.Thread:
    def ask() -> None:
        try:
            with BrokerClient(socket_path, timeout=5) as client:
                client.get_token(refused=True)  # renew now
                client.get_token(min_ttl_seconds=25)
        except BrokerError:
            pass  # killed under it, or in doubt: expected

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


def test_random_kills_around_renewals_lose_only_what_the_provider_completed(
    socket_path: Path,
) -> None:
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    signed_in_again = leftovers = 0
    reused_before = 0  # the stub's count of reuses when the current session began
    # The daemon's own key file, which writes atomically, asked for by name (with the
    # test keyring, keyrings.alt's plaintext file, the daemon chooses it by itself: see
    # test_kills_with_a_plaintext_keyring.py).
    with StubProvider(access_token_ttl=30, refresh_reuse_ends_grant=True) as stub:
        daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, "--key-store", "file").start()
        with Browser() as browser:
            sign_in(browser, daemon)
        for kill in range(KILLS):
            stub.delay_token_response(
                chance.uniform(0, 0.4), after_processing=chance.random() < 0.5
            )
            asking = renew_in_background(socket_path)
            time.sleep(chance.uniform(0, 0.5))
            daemon.kill()
            asking.join(10)
            left = set(state_dir(socket_path).rglob("*.tmp"))  # a save the kill cut short
            leftovers += len(left)
            daemon = DaemonProcess(
                socket_path, "--issuer", stub.issuer, "--key-store", "file"
            ).start()
            detail = f"kill {kill}, seed {seed}"
            assert "could not be restored" not in daemon.output(), detail
            assert not any(path.exists() for path in left), detail  # completed or removed
            with BrokerClient(socket_path) as client:
                status = client.status()
                assert "ROLLED BACK" not in status.storage, detail
                if status.sign_in_state is SignInState.SIGNED_IN:
                    continue
            # Lost: only because the stub had completed a refresh whose answer was lost.
            (ended,) = status.ended_sessions or [None]
            assert ended is not None, f"{detail}: signed out with no reason given"
            assert "having completed the renewal whose answer was lost" in ended.reason, detail
            assert len(stub.reuses) > reused_before, f"{detail}: lost with no reuse at the stub"
            reused_before = len(stub.reuses)
            signed_in_again += 1
            with Browser() as browser:
                sign_in(browser, daemon)
        daemon.stop()
    assert list(state_dir(socket_path).rglob("*.tmp")) == []
    # (a daemon killed again right after its resend resends once more: one loss, two reuses)
    assert signed_in_again <= len(stub.reuses), f"seed {seed}"
    print(
        f"{KILLS} kills, {leftovers} cut a save short, {signed_in_again} sessions lost,"
        f" {len(stub.reuses)} refresh tokens reused"
    )


# -- one kill at a chosen moment of a refresh ---------------------------------------------------


def refresh_in_background(socket_path: Path) -> threading.Thread:
    def ask() -> None:
        try:
            with BrokerClient(socket_path, timeout=30) as client:
                client.get_token(min_ttl_seconds=3600)
        except BrokerError:
            pass  # the daemon died under it: expected

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


def test_killed_right_after_storing_the_rotated_token_the_session_survives(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    (state,) = state_files(socket_path)
    written = state.stat().st_mtime_ns
    stub.delay_token_response(0.5, after_processing=False)
    asking = refresh_in_background(socket_path)
    eventually(lambda: state.exists() and state.stat().st_mtime_ns != written, "a save", 15, 0.01)
    ahead = state.stat().st_mtime_ns  # the write-ahead ("in doubt"), before the request
    eventually(
        lambda: state.exists() and state.stat().st_mtime_ns != ahead, "the next save", 15, 0.01
    )
    daemon.kill()
    asking.join(15)
    with DaemonProcess(socket_path, "--issuer", stub.issuer), BrokerClient(socket_path) as client:
        client.get_token(min_ttl_seconds=3600)
    presented = [r.params["refresh_token"] for r in stub.token_requests("refresh_token")]
    assert len(presented) == len(set(presented)) == 2  # the rotated one was used, no reuse


@pytest.mark.parametrize("acted", [False, True], ids=["before-the-provider-acted", "after"])
def test_killed_while_a_refresh_waits_its_refresh_token_is_sent_once_more_before_expiry(
    socket_path: Path, acted: bool
) -> None:
    """SIGKILL while the provider holds a refresh: the daemon cannot know whether the
    provider spent the refresh token, and a rotating provider takes a second use for
    theft (RFC 9700 4.14.2). The write-ahead in the store counts the send: the restarted
    daemon serves the still-valid access token and sends the refresh token once more
    only shortly before it expires. Where the provider never acted, the session goes on;
    where it did, the session ends then, and status says why."""
    with StubProvider(access_token_ttl=20) as stub:  # the resend comes 15 s after issue
        daemon = signed_in_daemon(stub, socket_path)
        with BrokerClient(socket_path) as client:
            signed_in = client.get_token()
        stub.delay_token_response(3.0, after_processing=acted)
        asking = refresh_in_background(socket_path)
        eventually(lambda: len(stub.token_requests("refresh_token")) == 1, "one refresh", 15, 0.01)
        time.sleep(0.3)  # the stub holds the request (or, having processed it, the answer)
        daemon.kill()
        asking.join(15)
        with DaemonProcess(socket_path, "--issuer", stub.issuer) as restarted:
            with BrokerClient(socket_path) as client:
                before = client.status()
                assert before.default is None or before.default.next_refresh_unix in (
                    signed_in.expires_at_unix - 5,  # a quarter of 20 s before expiry
                    signed_in.expires_at_unix - 4,  # (as a whole second)
                )
                if acted:  # the provider spent it: the resend ends the session, and says so
                    eventually(lambda: client.status().ended_sessions, "an ended session", 60, 0.01)
                    (ended,) = client.status().ended_sessions
                    assert "having completed the renewal whose answer was lost" in ended.reason
                else:  # never reached the provider: renewed, the session goes on
                    eventually(
                        lambda: client.get_token().expires_at_unix > signed_in.expires_at_unix,
                        "a renewed token",
                        60,
                        0.01,
                    )
            assert "its refresh token is sent once more" in restarted.output()
        presented = [r.params["refresh_token"] for r in stub.token_requests("refresh_token")]
        assert len(presented) == 2 and presented[0] == presented[1]  # exactly one resend
        assert authorizations(stub) == 1


def test_sigterm_during_a_refresh_still_stops_cleanly(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    stub.delay_token_response(1.0, after_processing=False)
    asking = refresh_in_background(socket_path)
    eventually(lambda: len(stub.token_requests("refresh_token")) == 1, "one refresh", 15, 0.01)
    assert daemon.stop(signal.SIGTERM) == 0
    asking.join(15)
    assert not socket_path.exists()
    assert os.path.exists(state_files(socket_path)[0])
