"""Sessions kept across restarts: encrypted at rest, their keys, tampering, a stuck stop.

Crashes during a refresh are in test_kills_around_renewals.py, outages in
test_refresh_outages.py, down-scoped tokens in test_down_scoped_tokens.py.
"""

from __future__ import annotations

import fcntl
import json
import socket
import stat
import time
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import httpx2
import pytest

from signin_broker.client import BrokerClient, BrokerError, EventKind, NotSignedIn
from signin_broker.daemon.stopping import STOP_LIMIT_SECONDS
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.notifications import Notifications
from support.secret_service import secret_service
from support.signin import authorizations, sign_in, signed_in_daemon
from support.state import key_store_has, state_files
from support.waiting import eventually

# -- persistence -------------------------------------------------------------------------


def test_a_restart_keeps_the_session_encrypted_at_rest(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        before = client.get_token()
    daemon.stop()
    (state,) = state_files(socket_path)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    blob = state.read_bytes()
    for secret in (before.access_token, "alice@example.com", "Alice Example"):
        assert secret.encode() not in blob  # nothing readable on disk
    assert key_store_has(daemon, "user:1001:state-key")  # the key: tenant-prefixed
    with DaemonProcess(socket_path, "--issuer", stub.issuer), BrokerClient(socket_path) as client:
        after = client.get_token()
        assert after.access_token == before.access_token  # restored, no new sign-in
        assert client.status().default.email == "alice@example.com"
    assert authorizations(stub) == 1


def test_a_rotated_refresh_token_is_stored_before_the_new_token_is_handed_out(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        first = client.get_token()
        renewed = client.get_token(min_ttl_seconds=3600)  # forces a refresh now
        assert renewed.access_token != first.access_token
    daemon.kill()  # no chance to write anything more
    with DaemonProcess(socket_path, "--issuer", stub.issuer), BrokerClient(socket_path) as client:
        assert client.get_token().access_token == renewed.access_token
        again = client.get_token(min_ttl_seconds=3600)  # the stored refresh token still works
    assert again.access_token != renewed.access_token
    presented = [r.params["refresh_token"] for r in stub.token_requests("refresh_token")]
    assert len(presented) == len(set(presented)) == 2  # never one spent twice


def test_sign_out_removes_the_state_file_and_its_key(stub: StubProvider, socket_path: Path) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    assert state_files(socket_path)
    with BrokerClient(socket_path) as client:
        client.sign_out()
    assert state_files(socket_path) == []
    assert not key_store_has(daemon, "user:1001:state-key")
    daemon.stop()


def test_without_a_keyring_sessions_stay_in_memory_and_status_says_why(
    stub: StubProvider, socket_path: Path
) -> None:
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    daemon = signed_in_daemon(stub, socket_path, env=env)
    with BrokerClient(socket_path) as client:
        assert client.get_token().account == "user:1001"
        assert client.status().storage.startswith("memory only: no usable keyring")
    assert state_files(socket_path) == []
    daemon.expect_log(msg="sessions will not survive a restart")
    daemon.stop()


def test_the_file_key_is_an_explicit_opt_in_and_private(
    stub: StubProvider, socket_path: Path
) -> None:
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    daemon = signed_in_daemon(stub, socket_path, "--key-store", "file", env=env)
    with BrokerClient(socket_path) as client:
        assert "key file" in client.status().storage
    daemon.stop()
    keys = socket_path.parent / "state" / "signin-broker" / "keys.json"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert list(json.loads(keys.read_text())) == ["user:1001:state-key"]
    restarted = DaemonProcess(socket_path, "--issuer", stub.issuer, "--key-store", "file", env=env)
    with restarted, BrokerClient(socket_path) as client:
        assert client.get_token().account == "user:1001"


def test_a_session_the_provider_ends_is_told_to_the_person_and_shown_in_status(
    stub: StubProvider, socket_path: Path
) -> None:
    notifications = Notifications(socket_path.parent.parent)
    daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2", env=notifications.env)
    stub.revoke_user("1001")
    daemon.expect_log(timeout=20, msg="the provider ended the session")
    summary, body = eventually(notifications.sent, "a desktop notification", timeout=5)[0]
    assert summary == "Alice Example is signed out"
    assert "The provider ended the session" in body and "signin-broker login" in body
    status = signin_broker("--socket", str(socket_path), "status").stdout
    assert "REVOKED user:1001 (Alice Example)" in status and "signin-broker login" in status
    with BrokerClient(socket_path) as client:
        (ended,) = client.status().ended_sessions
        assert (ended.account, ended.kind) == ("user:1001", EventKind.REVOKED)
    with Browser() as browser:
        sign_in(browser, daemon)
    with BrokerClient(socket_path) as client:
        assert client.status().ended_sessions == ()  # signed in again
    daemon.stop()


def test_a_sign_out_the_person_asked_for_is_not_an_ended_session(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        client.sign_out()
        assert client.status().ended_sessions == ()
    daemon.stop()


def test_a_restored_daemon_loads_the_sign_in_page_only_when_a_browser_comes(
    stub: StubProvider, socket_path: Path
) -> None:
    """Starlette and uvicorn stay unloaded (3.6 MB) until the page's first connection."""
    signed_in_daemon(stub, socket_path).stop()
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as restarted:
        with BrokerClient(socket_path) as client:
            assert client.get_token().account == "user:1001"  # restored, served
        host, port = urlsplit(restarted.web_url).netloc.split(":")
        assert not restarted.logs_with(msg="sign-in page loaded at its first visit")
        port_open = socket.create_connection((host, int(port)), timeout=5)
        port_open.close()  # bound from the start: the first connection waits in the backlog
        loaded = restarted.expect_log(msg="sign-in page loaded at its first visit")
        assert len(loaded) == 1
        page = httpx2.get(restarted.web_url + "/", timeout=10)
        assert page.status_code in (200, 302)
        assert len(restarted.logs_with(msg="sign-in page loaded at its first visit")) == 1


def test_a_daemon_stopped_before_any_visit_closes_the_page_port(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    host, port = urlsplit(daemon.web_url).netloc.split(":")
    assert daemon.stop() == 0
    assert not daemon.logs_with(msg="sign-in page loaded at its first visit")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5)


def test_a_stop_stuck_in_a_worker_thread_ends_in_time_with_every_stack(
    stub: StubProvider, socket_path: Path
) -> None:
    """A worker thread that never returns would keep a stopping daemon alive for good.

    Here the thread waits for the key file's lock, which another process holds: the
    sign-out's call gives up, the stop waits for the thread. Past STOP_LIMIT_SECONDS the
    daemon exits 1 with each thread's stack on stderr (without the limit it never exits).
    """
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    daemon = signed_in_daemon(stub, socket_path, "--key-store", "file", env=env)
    lock = socket_path.parent / "state" / "signin-broker" / ".keys.json.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with BrokerClient(socket_path, timeout=2) as client, pytest.raises(BrokerError) as given_up:
            client.sign_out()
        assert given_up.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        asked = time.monotonic()
        with pytest.warns(UserWarning, match="the daemon's stop hung"):
            status = daemon.stop(timeout=STOP_LIMIT_SECONDS + 10)
        took = time.monotonic() - asked
    assert status == 1, daemon.output()
    assert STOP_LIMIT_SECONDS <= took < STOP_LIMIT_SECONDS + 5
    assert "in _locked" in daemon.output(), daemon.output()  # the stuck thread's stack


def test_a_tampered_state_file_is_refused_and_the_daemon_still_starts(
    stub: StubProvider, socket_path: Path
) -> None:
    signed_in_daemon(stub, socket_path).stop()
    (state,) = state_files(socket_path)
    blob = bytearray(state.read_bytes())
    blob[-1] ^= 0x01
    state.write_bytes(bytes(blob))
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon:
        with BrokerClient(socket_path) as client, pytest.raises(NotSignedIn):
            client.get_token()
        daemon.expect_log(msg="a stored session could not be restored")


def test_persistence_in_the_real_secret_service(stub: StubProvider, socket_path: Path) -> None:
    """gnome-keyring on a private D-Bus session: the key survives the daemon's restart."""
    home = socket_path.parent.parent / "home"
    with secret_service(home) as env:
        daemon = signed_in_daemon(stub, socket_path, env=env)
        with BrokerClient(socket_path) as client:
            status = client.status()
            token = client.get_token()
        assert "SecretService" in status.storage
        daemon.stop()
    (state,) = state_files(socket_path)
    assert token.access_token.encode() not in state.read_bytes()
    with (
        secret_service(home) as env,  # the next login: same keyring, unlocked again
        DaemonProcess(socket_path, "--issuer", stub.issuer, env=env),
        BrokerClient(socket_path) as client,
    ):
        assert client.get_token().access_token == token.access_token
    assert authorizations(stub) == 1
