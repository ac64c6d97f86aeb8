"""A state folder that is full or read-only never signs anyone out, nor spends what it cannot keep.

The state folder is a small tmpfs; the stub rotates refresh tokens and, as panva's
oidc-provider does, ends the grant when a spent one comes back. While the folder is
full, the state goes to the journal reserved in it; while it is read-only, to the
runtime journal (in the daemon's XDG_RUNTIME_DIR, beside its socket): renewals go on,
a SIGKILL and a restart keep the session, status says where the state is, and it is
back in its file once the folder can be written.

Where no journal can take the state either (read-only, and no runtime folder), the
daemon serves the valid token and says why in status, but does not renew: the new
refresh token could not be stored, and the spent one left on disk would be sent at the
next start. Once the token has expired apps are told to try again shortly; once the
folder is writable the state is saved and the token renewed at once. A renewal already
on its way when that happens (its send was stored first) is kept in memory, said to be
at risk, and saved the moment it can be. (tests/interop/test_interop_unsaved_renewals.py
restarts the daemon meanwhile, against oidc-provider.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import grpc
import pytest

from signin_broker.client import BrokerClient, BrokerError, Token
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.notifications import Notifications
from support.signin import signed_in_daemon
from support.storage import filled, read_only, tmpfs
from support.tokens import userinfo_sub
from support.waiting import eventually

TTL = 4
NO_RUNTIME_FOLDER = {"XDG_RUNTIME_DIR": ""}  # no runtime journal: nothing but the folder


def presented(stub: StubProvider) -> list[str]:
    return [r.params["refresh_token"] for r in stub.token_requests("refresh_token")]


def renewed_since(client: BrokerClient, first: Token) -> Token | None:
    """A token other than `first`; None meanwhile (UNAVAILABLE, never signed out)."""
    try:
        token = client.get_token()
    except BrokerError as error:
        assert error.code == grpc.StatusCode.UNAVAILABLE, error
        return None
    return token if token.access_token != first.access_token else None


def json_refusal(socket_path: Path) -> tuple[int, int, dict[str, Any]]:
    """GetToken as a JSON call with curl: the HTTP status, Retry-After, and the body."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    done = subprocess.run(
        [curl, "-sS", "-i", "--unix-socket", str(socket_path), "-H",
         "Content-Type: application/json", "-d", "{}",
         "http://broker/signin_broker.v1.TokenBroker/GetToken"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    head, _, body = done.stdout.partition("\n\n")  # text mode: CRLF read as LF
    lines = head.splitlines()
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), int(headers.get("retry-after", "0")), json.loads(body)


def storage_fault(fault: str, state: Path) -> AbstractContextManager[None]:
    return filled(state) if fault == "full" else read_only(state)


# Where the state goes while the folder cannot take it, as status says.
KEPT_IN = {"full": "the journal reserved in", "read-only": "the runtime journal"}
JOURNAL_TTL = 3  # three lifetimes of renewals in each test: ~10 s


def kept_in_a_journal(client: BrokerClient, fault: str) -> str:
    """Status's storage problem while it says the state is kept in the fault's journal.

    While the folder is full, the daemon's own audit database frees and takes blocks
    there (SQLite's WAL): a save may find room in its file for a moment.
    """
    problem = client.status().storage_problem
    return problem if f"sessions are kept in {KEPT_IN[fault]}" in problem else ""


def accepted_token(client: BrokerClient, stub: StubProvider, account: str) -> str:
    """GetToken, answered (never refused) with a token the provider's userinfo accepts."""
    token = client.get_token()
    assert userinfo_sub(stub.issuer, token.access_token) == account.removeprefix("user:")
    return token.access_token


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_state_folder_that_cannot_be_written_keeps_renewals_and_restarts_going(
    socket_path: Path, fault: str
) -> None:
    state = socket_path.parent / "state"
    with (
        tmpfs(state, "4m"),
        StubProvider(access_token_ttl=JOURNAL_TTL, refresh_reuse_ends_grant=True) as stub,
    ):
        daemon = signed_in_daemon(stub, socket_path)
        with BrokerClient(socket_path, timeout=30) as client:
            account = client.get_token().account
            served, restarted = set(), False
            with storage_fault(fault, state):
                ends = time.monotonic() + 3 * JOURNAL_TTL
                while (now := time.monotonic()) < ends:  # bounded: three lifetimes
                    served.add(accepted_token(client, stub, account))
                    if not restarted and now > ends - 1.5 * JOURNAL_TTL:
                        problem = eventually(
                            lambda: kept_in_a_journal(client, fault), "the state in a journal"
                        )
                        assert "renewals go on" in problem
                        daemon.kill()  # mid-way, the newest state only in a journal
                        daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
                        restarted = True
                    time.sleep(0.2)
            assert len(served) >= 3, served  # renewed in each lifetime
            eventually(lambda: client.status().storage_problem == "", "the state in its file")
        daemon.stop()
        assert not (socket_path.parent / "signin-broker" / "state.journal").exists()
        with (
            DaemonProcess(socket_path, "--issuer", stub.issuer),
            BrokerClient(socket_path) as client,
        ):
            accepted_token(client, stub, account)  # restored from its file
    spent = presented(stub)
    assert len(spent) == len(set(spent)) >= 3 and stub.reuses == []


def test_a_read_only_state_folder_without_a_runtime_folder_postpones_renewal_until_it_can(
    socket_path: Path,
) -> None:
    """No journal can take the state: nothing is spent whose successor could not be stored."""
    state = socket_path.parent / "state"
    with (
        tmpfs(state, "4m"),
        StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub,
    ):
        daemon = signed_in_daemon(
            stub, socket_path, "--revalidate-seconds", "2", env=NO_RUNTIME_FOLDER
        )
        with BrokerClient(socket_path, timeout=30) as client:
            first = client.get_token()
            with read_only(state):
                assert client.get_token(refused=True).access_token == first.access_token
                problem = eventually(lambda: client.status().storage_problem, "a storage problem")
                assert "renewals wait until they can" in problem
                eventually(lambda: time.time() > first.expires_at_unix + 1, "the token's expiry")
                with pytest.raises(BrokerError) as refused:
                    client.get_token()
                assert refused.value.code == grpc.StatusCode.UNAVAILABLE
                assert "cannot be renewed while its state cannot be saved" in refused.value.message
                assert refused.value.retry_after is not None
                status, retry_after, body = json_refusal(socket_path)  # and on the JSON calls
                assert status == 503 and retry_after == body["retry_after_seconds"] >= 1
                assert "cannot be renewed while its state cannot be saved" in body["error"]
                assert presented(stub) == []  # nothing spent that could not be replaced
            renewed = eventually(lambda: renewed_since(client, first), "the renewal", timeout=20)
            assert client.status().storage_problem == ""
        daemon.stop()
        with (
            DaemonProcess(socket_path, "--issuer", stub.issuer, env=NO_RUNTIME_FOLDER),
            BrokerClient(socket_path) as client,
        ):
            assert client.get_token().access_token == renewed.access_token  # restored
        spent = presented(stub)
        assert len(spent) == len(set(spent)) == 1 and stub.reuses == []


def test_a_renewal_answered_once_nothing_can_store_it_is_kept_said_at_risk_and_saved(
    socket_path: Path,
) -> None:
    state = socket_path.parent / "state"
    with (
        tmpfs(state, "4m"),
        StubProvider(access_token_ttl=3600, refresh_reuse_ends_grant=True) as stub,
    ):
        notifications = Notifications(socket_path.parent)
        env = notifications.env | NO_RUNTIME_FOLDER
        daemon = signed_in_daemon(stub, socket_path, env=env)
        with BrokerClient(socket_path, timeout=30) as client:
            first = client.get_token()
            stub.delay_token_response(3, after_processing=True)  # the send is stored first
            assert client.get_token(refused=True).access_token == first.access_token
            eventually(lambda: presented(stub), "the refresh at the stub")
            with read_only(state):
                renewed = eventually(lambda: renewed_since(client, first), "the late answer")
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
        assert len(presented(stub)) == 1 and stub.reuses == []
