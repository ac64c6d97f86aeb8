"""A provider's megabyte access token is served, stored and restored, its refresh token kept.

Providers that pack a person's groups or entitlements into the access token make large
ones. The stub answers a renewal with a 1 MB access token beside the rotated refresh
token (and, as panva's oidc-provider does, would end the grant if a spent refresh token
came back). The daemon hands it out whole over gRPC and over the JSON calls (the CLI's
lean path, and curl), keeps it in its state file across a restart, and never sends a
refresh token twice.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.broken_answers import HUGE_ACCESS_TOKEN
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.refresh_answers import presented, renewed_from
from support.signin import signed_in_daemon
from support.storage import state_dir
from support.waiting import eventually

MB = 1_000_000


def served_everywhere(socket_path: Path) -> None:
    """The 1 MB token, whole, from gRPC, from the CLI's JSON call, and from curl."""
    with BrokerClient(socket_path) as client:
        assert client.get_token().access_token == HUGE_ACCESS_TOKEN
    printed = signin_broker("token", "--socket", str(socket_path))
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == HUGE_ACCESS_TOKEN
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    answered = subprocess.run(
        [curl, "-sS", "--unix-socket", str(socket_path), "-H", "Content-Type: application/json",
         "-d", "{}", "http://broker/signin_broker.v1.TokenBroker/GetToken"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert json.loads(answered.stdout)["access_token"] == HUGE_ACCESS_TOKEN


def test_a_megabyte_access_token_is_served_on_both_transports_and_survives_a_restart(
    socket_path: Path,
) -> None:
    with StubProvider(access_token_ttl=3600, refresh_reuse_ends_grant=True) as stub:
        daemon = signed_in_daemon(stub, socket_path)
        with BrokerClient(socket_path, timeout=30) as client:
            first = client.get_token()
            stub.break_token_answers("huge_access_token")
            renewed = eventually(lambda: renewed_from(client, first), "the renewal")
        assert renewed.access_token == HUGE_ACCESS_TOKEN
        info = stub.access_token_info(renewed.access_token)
        assert info is not None and info["active"]
        served_everywhere(socket_path)
        (stored,) = (state_dir(socket_path) / "accounts").glob("*.state")
        assert stored.stat().st_size > MB  # the state file holds it
        daemon.stop()
        with DaemonProcess(socket_path, "--issuer", stub.issuer):
            served_everywhere(socket_path)
        spent = presented(stub)
        assert len(spent) == len(set(spent)) == 1 and stub.reuses == []
