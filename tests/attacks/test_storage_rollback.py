"""A state file rolled back to an older copy (its refresh token already spent) is detected."""

from __future__ import annotations

from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, NotSignedIn
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.signin import signed_in_daemon
from support.state import state_files


def test_a_state_file_rolled_back_after_a_refresh_is_refused_and_reported(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--key-store", "file")
    (state,) = state_files(socket_path)
    older = state.read_bytes()
    with BrokerClient(socket_path) as client:
        client.get_token(min_ttl_seconds=3600)  # a refresh: the refresh token in `older` is spent
    assert daemon.stop() == 0
    state.write_bytes(older)  # a backup, or an attacker, puts the older copy back
    spent = len(stub.token_requests("refresh_token"))

    restarted = DaemonProcess(socket_path, "--issuer", stub.issuer, "--key-store", "file").start()
    with BrokerClient(socket_path) as client:
        status = client.status()
        assert status.account_count == 0
        assert "rolled back" in status.storage.lower()
        with pytest.raises(NotSignedIn):
            client.get_token(min_ttl_seconds=3600)
    (record,) = restarted.expect_log(msg="a stored session could not be restored")
    assert record["account"] == "user:1001"
    assert "rolled back" in record["reason"]
    assert len(stub.token_requests("refresh_token")) == spent  # the stale one never left
    assert restarted.stop() == 0
