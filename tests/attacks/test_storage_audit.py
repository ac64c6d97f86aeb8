"""Attacks on the audit log's file: a symlink in its place, a lock held for seconds, corruption."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from support.commands import signin_broker
from support.signin import signed_in_daemon
from support.storage import make_state_dir, state_dir

# Holds SQLite's write lock on the database for argv[2] seconds, as a backup tool might.
HOLD_LOCK = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
"""
LOCK_SECONDS = 6.5  # longer than SQLite's busy timeout (5 s): the daemon's writes fail


def my_token_rows(client: BrokerClient) -> list[int]:
    return [
        row.id
        for row in client.audit_events(limit=1000)
        if row.action == "issue_token" and row.actor_pid == os.getpid()
    ]


@pytest.mark.parametrize("target_exists", [False, True], ids=["missing-target", "existing-target"])
def test_the_audit_log_is_not_opened_through_a_symlink(
    stub: StubProvider, socket_path: Path, folder: Path, target_exists: bool
) -> None:
    target = folder / "elsewhere.sqlite3"
    if target_exists:
        target.write_bytes(b"someone else's file")
        target.chmod(0o644)
    (make_state_dir(socket_path) / "audit.sqlite3").symlink_to(target)
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        assert client.get_token().access_token  # the daemon serves on
        if target_exists:
            assert target.read_bytes() == b"someone else's file"
            assert stat.S_IMODE(target.stat().st_mode) == 0o644  # not chmod'ed
        else:
            assert not target.exists()  # not created
        assert "symlink" in client.status().audit_degraded_reason
    assert daemon.stop() == 0


def test_audit_rows_survive_a_database_locked_for_seconds(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    database = state_dir(socket_path) / "audit.sqlite3"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(database), str(LOCK_SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with BrokerClient(socket_path) as client:
            for i in range(3):  # each a new down-scoped token (a refresh), so a new row
                client.get_token(audience=f"https://api{i}.example/")
            assert holder.wait(30) == 0
            deadline = time.monotonic() + 30
            while len(my_token_rows(client)) < 3 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(my_token_rows(client)) == 3
            assert client.status().audit_degraded_reason == ""  # recovered
    finally:
        holder.kill()
        holder.wait()
    assert daemon.stop() == 0


def test_a_corrupt_audit_log_is_reported_in_status_and_tokens_still_flow(
    stub: StubProvider, socket_path: Path
) -> None:
    (make_state_dir(socket_path) / "audit.sqlite3").write_bytes(b"not a database\n" * 512)
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        assert client.get_token().access_token
        reason = client.status().audit_degraded_reason
    assert "not a database" in reason
    shown = signin_broker("--socket", str(socket_path), "status")
    assert shown.returncode == 0
    assert "not a database" in shown.stdout
    assert daemon.stop() == 0
