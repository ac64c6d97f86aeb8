"""Exit when idle, come back when asked: the daemon under socket activation.

The rules that hold while it runs hold across the gap (daemon/idle_exit.py): the callers
after an exit get one token from one start and one refresh; a revocation made while the
daemon was away is seen by the first request (I2); an exit never cuts a refresh. No test
sleeps but one: for a token to expire.
"""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest

from signin_broker.cli._json_client import GET_TOKEN, json_call
from signin_broker.client import BrokerClient, BrokerError
from signin_broker.daemon.idle_exit import TEST_PAUSE_ENV, TEST_SECONDS_ENV
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.signin import sign_in
from support.socket_units import Activator, SocketUnit

IDLE = "exiting: idle"
CALLERS = 50
CYCLES = 100
ANSWER_DELAY = 0.1  # seconds: ten idle exits' worth
SLOW_CALLER = 0.3  # seconds between a caller's connection and its request


def _sign_in(socket_path: Path) -> str:
    """Sign in through the page of the daemon on the socket (or the one a caller starts)."""
    with BrokerClient(socket_path, timeout=60) as client:
        web_url = client.status().web_url.rstrip("/")
        with Browser() as browser:
            sign_in(browser, SimpleNamespace(web_url=web_url))  # type: ignore[arg-type]
        return client.get_token().access_token


def _token(socket_path: Path) -> str:
    with BrokerClient(socket_path, timeout=60) as client:
        return client.get_token().access_token


def _token_through_json(socket_path: Path) -> None:
    """A token through the JSON path, asked again while the daemon says to (its renewal
    under way: a token of a second can expire while a starved machine waits for one).

    A session ended (a refresh token resent after a cut) is UNAUTHENTICATED, and fails.
    """
    deadline = time.monotonic() + 60
    while True:
        status, answer = json_call(str(socket_path), GET_TOKEN, b"{}", 60)
        if status == 200:
            return
        assert status == 503 and json.loads(answer)["code"] == "unavailable", (status, answer)
        assert time.monotonic() < deadline, answer


def test_socket_activated_it_exits_when_idle_and_comes_back_once_for_50_callers_then_sees_a_revocation(  # noqa: E501
    folder: Path,
) -> None:
    """Signed in by a daemon since gone, its token expired: 50 callers get one token from one
    start and one refresh; it exits when idle, and a revocation made in the gap is
    UNAUTHENTICATED at the first request (I2 holds across it: confirmed before served)."""
    lifetime = 2
    socket_path = folder / "run" / "broker.sock"
    with StubProvider(access_token_ttl=lifetime, refresh_reuse_ends_grant=True) as stub:
        settings = ("--issuer", stub.issuer, "--idle-exit-seconds", "1")
        with DaemonProcess(socket_path, *settings):  # forked: it starts in milliseconds
            first = _sign_in(socket_path)
        expired_at = time.monotonic() + lifetime
        with Activator(socket_path, *settings) as unit:
            time.sleep(max(0.0, expired_at - time.monotonic()))
            refreshes = len(stub.token_requests("refresh_token"))
            with ThreadPoolExecutor(CALLERS) as pool:
                tokens = set(pool.map(lambda _: _token(socket_path), range(CALLERS)))
            assert len(tokens) == 1 and first not in tokens
            assert unit.starts() == 1
            assert len(stub.token_requests("refresh_token")) == refreshes + 1
            assert stub.reuses == []

            unit.wait_lines(IDLE, 1)
            unit.wait_listening(2)  # the daemon is gone and the socket listens again
            assert stub.revoke_user("1001") > 0  # while no daemon runs
            with pytest.raises(BrokerError) as refused:
                _token(socket_path)
            assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED, refused.value
            assert unit.starts() == 2


def test_an_idle_exit_never_cuts_a_refresh_over_a_hundred_idle_cycles(folder: Path) -> None:
    """1 s tokens, an exit 0.01 s after the last call: renewals fall on exits, none is cut.

    Each refresh is answered ANSWER_DELAY late, its refresh token spent at once: a daemon
    that exited while one was under way would have lost its answer, and the next would
    send the spent token again, which the provider takes as a theft and ends the grant.
    """
    with (
        StubProvider(access_token_ttl=1, refresh_reuse_ends_grant=True) as stub,
        SocketUnit(
            folder / "run" / "broker.sock",
            "--issuer",
            stub.issuer,
            env={TEST_SECONDS_ENV: "0.01"},
        ) as unit,
    ):
        _sign_in(unit.socket_path)
        assert unit.wait_exit() == 0
        stub.delay_token_response(ANSWER_DELAY, after_processing=True, times=CYCLES)
        began = time.monotonic()
        for _ in range(CYCLES):
            _token_through_json(unit.socket_path)
            assert unit.wait_exit() == 0
        assert stub.reuses == []
        assert len(unit.daemons) >= CYCLES + 1
        # A token lasts a second: renewals kept coming, one at least every other second.
        assert len(stub.token_requests("refresh_token")) >= (time.monotonic() - began) // 2
        assert all(daemon.logs_with(msg=IDLE) for daemon in unit.daemons)


def test_a_caller_that_gets_in_as_an_idle_exit_begins_is_answered(
    shared_stub: StubProvider, folder: Path
) -> None:
    """A daemon on a socket of its own (autostart's case): a caller connects in the instant
    between the exit's decision and the removal of the socket file (the daemon is held
    there), and sends its request only once the file is gone. It is answered, and the
    daemon exits once it has gone; the exit used to close it unanswered."""
    socket_path = folder / "run" / "broker.sock"
    env = {TEST_SECONDS_ENV: "0.05", TEST_PAUSE_ENV: "0.5"}
    with DaemonProcess(
        socket_path, "--issuer", shared_stub.issuer, "--idle-exit-seconds", "1", env=env
    ) as daemon:
        daemon.expect_log(msg=IDLE, timeout=30)
        caller = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        caller.settimeout(30)
        with caller:
            caller.connect(str(socket_path))
            deadline = time.monotonic() + 30
            while socket_path.exists():
                assert time.monotonic() < deadline, "the socket file was never removed"
                time.sleep(0.01)
            time.sleep(SLOW_CALLER)  # the caller's own pace: it sends when it sends
            caller.sendall(
                b"POST /signin_broker.v1.TokenBroker/GetStatus HTTP/1.1\r\nHost: broker\r\n"
                b"Content-Type: application/json\r\nContent-Length: 2\r\n"
                b"Connection: close\r\n\r\n{}"
            )
            answer = b""
            while chunk := caller.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert daemon.wait_exit() == 0
