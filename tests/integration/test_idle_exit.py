"""Exit when idle, come back when asked: the daemon under socket activation.

The rules that hold while it runs hold across the gap (daemon/idle_exit.py): the callers
after an exit get one token from one start and one refresh; a revocation made while the
daemon was away is seen by the first request (I2); an exit never cuts a refresh.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest

from signin_broker.client import BrokerClient, BrokerError
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from support.signin import sign_in
from support.socket_units import Activator, SocketUnit

IDLE = "exiting: idle"
CALLERS = 50
CYCLES = 100


def _sign_in(socket_path: Path) -> str:
    """Sign in through the daemon's page (the first connection starts it); its token."""
    with BrokerClient(socket_path, timeout=60) as client:
        web_url = client.status().web_url.rstrip("/")
        with Browser() as browser:
            sign_in(browser, SimpleNamespace(web_url=web_url))  # type: ignore[arg-type]
        return client.get_token().access_token


def _token(socket_path: Path) -> str:
    with BrokerClient(socket_path, timeout=60) as client:
        return client.get_token().access_token


def test_socket_activated_it_exits_when_idle_and_comes_back_once_for_50_callers_then_sees_a_revocation(  # noqa: E501
    folder: Path,
) -> None:
    """One start and one refresh for 50 callers after an exit; a revocation made in the gap
    is UNAUTHENTICATED at the first request (I2 holds across it: confirmed before served)."""
    lifetime = 3
    with (
        StubProvider(access_token_ttl=lifetime, refresh_reuse_ends_grant=True) as stub,
        Activator(
            folder / "run" / "broker.sock", "--issuer", stub.issuer, "--idle-exit-seconds", "1"
        ) as unit,
    ):
        first = _sign_in(unit.socket_path)
        signed_in_at = time.monotonic()
        unit.wait_lines(IDLE, 1)
        unit.wait_listening(2)  # the daemon is gone and the socket listens again
        assert unit.starts() == 1
        time.sleep(max(0.0, signed_in_at + lifetime - time.monotonic()))  # it has expired
        refreshes = len(stub.token_requests("refresh_token"))
        with ThreadPoolExecutor(CALLERS) as pool:
            tokens = set(pool.map(lambda _: _token(unit.socket_path), range(CALLERS)))
        assert len(tokens) == 1 and first not in tokens
        assert unit.starts() == 2
        assert len(stub.token_requests("refresh_token")) == refreshes + 1
        assert stub.reuses == []

        unit.wait_lines(IDLE, 2)
        unit.wait_listening(3)
        assert stub.revoke_user("1001") > 0  # while no daemon runs
        with pytest.raises(BrokerError) as refused:
            _token(unit.socket_path)
        assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED, refused.value
        assert unit.starts() == 3


def test_an_idle_exit_never_cuts_a_refresh_over_a_hundred_idle_cycles(folder: Path) -> None:
    """1 s tokens, an exit 0.1 s after the last call: renewals fall on exits, none is cut.

    The provider ends the grant of a refresh token sent twice, so one cut and resent
    would also sign the account out.
    """
    with (
        StubProvider(access_token_ttl=1, refresh_reuse_ends_grant=True) as stub,
        SocketUnit(
            folder / "run" / "broker.sock",
            "--issuer",
            stub.issuer,
            env={"SIGNIN_BROKER_TEST_IDLE_EXIT_SECONDS": "0.1"},
        ) as unit,
    ):
        _sign_in(unit.socket_path)
        assert unit.wait_exit() == 0
        for _ in range(CYCLES):
            _token(unit.socket_path)
            assert unit.wait_exit() == 0
        assert stub.reuses == []
        assert len(unit.daemons) == CYCLES + 1
        assert len(stub.token_requests("refresh_token")) >= CYCLES // 4
        assert all(daemon.logs_with(msg=IDLE) for daemon in unit.daemons)
