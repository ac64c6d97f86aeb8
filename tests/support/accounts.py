"""Several accounts in one daemon: two users at the stub, one of them also in a workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, EventKind
from signin_broker_testing import StubProvider, StubUser
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.events import watching
from support.signin import sign_in

ALICE = StubUser(sub="1001", name="Alice Example", email="alice@example.com", workspaces=("7",))
BOB = StubUser(sub="1002", name="Bob Example", email="bob@example.com")
ALICE_ID, BOB_ID, ALICE_AT_7 = "user:1001", "user:1002", "user:1001:workspace:7"


@pytest.fixture
def people() -> Iterator[StubProvider]:
    with StubProvider(users=[ALICE, BOB], auto_approve=ALICE.sub) as provider:
        yield provider


def sign_in_as(stub: StubProvider, daemon: DaemonProcess, sub: str, workspace_id: str = "") -> str:
    """Sign `sub` in through the loopback page (within a workspace if given); the account id."""
    stub.approve_as(sub)
    start = f"/user/login?workspace_id={workspace_id}" if workspace_id else "/user/login"
    with watching(daemon.socket_path) as events, Browser() as browser:
        sign_in(browser, daemon, start)
        return events.wait_for(EventKind.SIGNED_IN).account


def daemon_with_accounts(
    stub: StubProvider, socket_path: Path, *args: str, workspace: bool = True
) -> DaemonProcess:
    """A daemon with Alice (the default), Bob, and (by default) Alice within workspace 7."""
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, *args)
    try:
        daemon.start()
        assert sign_in_as(stub, daemon, ALICE.sub) == ALICE_ID
        assert sign_in_as(stub, daemon, BOB.sub) == BOB_ID
        if workspace:
            assert sign_in_as(stub, daemon, ALICE.sub, "7") == ALICE_AT_7
        with BrokerClient(socket_path) as client:
            assert client.status().default_account == ALICE_ID
    except BaseException:
        if daemon.alive:  # a module's fixture fails before any test's cleanup could see it
            daemon.stop()
        raise
    return daemon
