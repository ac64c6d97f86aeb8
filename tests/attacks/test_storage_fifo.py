"""Attacks with FIFOs where the daemon reads its state: it must start, serve and stop anyway."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.storage import make_state_dir


@pytest.mark.parametrize("where", ["state-file", "key-file"])
def test_a_fifo_among_the_stored_state_neither_blocks_nor_hangs_the_daemon(
    stub: StubProvider, socket_path: Path, where: str
) -> None:
    state = make_state_dir(socket_path)
    accounts = state / "accounts"
    accounts.mkdir(mode=0o700)
    account_file = accounts / "user%3A1001.state"
    if where == "state-file":
        os.mkfifo(account_file, 0o600)
    else:  # a state file to restore, and its key to be read from a FIFO
        account_file.write_bytes(b"SBV1" + bytes(64))
        os.mkfifo(state / "keys.json", 0o600)
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, "--key-store", "file")
    try:
        daemon.start()  # "sign-in page ready" comes after the stored sessions are read
        with BrokerClient(socket_path, timeout=5) as client:
            assert client.status().account_count == 0
        (record,) = daemon.expect_log(msg="a stored session could not be restored")
        assert record["account"] == "user:1001"
        assert "regular file" in record["reason"]
        assert daemon.stop(timeout=15) == 0  # SIGTERM is heard
    finally:
        if daemon.alive:
            daemon.kill()
