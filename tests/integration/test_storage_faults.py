"""Issue 23 #2: a state folder that is full or read-only never signs anyone out.

The state folder is a small tmpfs. While it cannot be written the daemon serves the
valid token, says why in status, and postpones a renewal (the rotated refresh token
could not be stored, and the old one on disk would be spent); at the last moment it
renews anyway and says a restart now would sign the person out. Once the folder is
writable again the state is saved at once, and a restart finds the session; the
provider (rotating, with reuse detection) never sees a refresh token twice.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, Token
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.notifications import Notifications
from support.signin import signed_in_daemon
from support.storage import filled, read_only, tmpfs
from support.waiting import eventually

TTL = 30  # the renewal that waits goes 7.5 s before expiry


def presented(stub: StubProvider) -> list[str]:
    return [r.params["refresh_token"] for r in stub.token_requests("refresh_token")]


def renewed_since(client: BrokerClient, first: Token) -> Token | None:
    token = client.get_token()
    return token if token.access_token != first.access_token else None


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_state_folder_that_cannot_be_written_postpones_renewal_and_loses_nothing(
    socket_path: Path, fault: str
) -> None:
    state = socket_path.parent / "state"
    with (
        tmpfs(state, "4m"),
        StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub,
    ):
        notifications = Notifications(socket_path.parent)
        daemon = signed_in_daemon(
            stub, socket_path, "--revalidate-seconds", "2", env=notifications.env
        )
        with BrokerClient(socket_path, timeout=30) as client:
            first = client.get_token()
            fault_on: AbstractContextManager[None] = (
                filled(state) if fault == "full" else read_only(state)
            )
            with fault_on:
                assert client.get_token(refused=True).access_token == first.access_token
                problem = eventually(lambda: client.status().storage_problem, "a storage problem")
                assert "renewals wait while tokens last" in problem
                assert presented(stub) == []  # nothing spent that could not be replaced
                renewed = eventually(
                    lambda: renewed_since(client, first), "the last-moment renewal"
                )
                at_risk = client.status()
                assert "a restart now would sign out user:1001" in at_risk.storage_problem
                assert at_risk.default is not None
                assert "a restart now would sign it out" in at_risk.default.at_risk
                summary, body = eventually(notifications.sent, "a desktop notification")[-1]
                assert summary == "Sign-ins cannot be saved"
                assert "a restart now would sign out" in body
            eventually(lambda: client.status().storage_problem == "", "the state saved again")
        daemon.stop()
        with (
            DaemonProcess(socket_path, "--issuer", stub.issuer),
            BrokerClient(socket_path) as client,
        ):
            assert client.get_token().access_token == renewed.access_token  # restored
        spent = presented(stub)
        assert len(spent) == len(set(spent)) >= 1 and stub.reuses == []
