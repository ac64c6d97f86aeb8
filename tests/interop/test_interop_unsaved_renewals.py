"""A full or read-only state folder stops neither renewals nor restarts, against panva's
oidc-provider (rotation).

The provider rotates refresh tokens and ends the whole grant when a rotated one comes
back (it prints each such reuse). The daemon's state folder is a small tmpfs, filled up
or made read-only while the daemon runs. The state goes to the journal reserved in the
folder, or to the runtime journal: renewals go on through the fault, a restart while it
lasts (or at once after the folder is writable again) keeps the session, and the
provider never sees a refresh token twice. Where no journal can take the state
(read-only, and no runtime folder), the daemon does not spend the refresh token (its
successor could not be stored, and the spent one left on disk would be sent at the next
start): it serves the access token while it lasts, then tells apps to try again, says
why in status, and renews once the folder can be written.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import grpc
import httpx2
import pytest

from signin_broker.client import BrokerClient, BrokerError, Token
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support.providers import CLIENT_ID
from support.providers.checks import signed_in_daemon, userinfo_status
from support.providers.node import NodeOidcProvider
from support.state import decrypted_record
from support.storage import filled, read_only, tmpfs
from support.waiting import eventually

pytestmark = pytest.mark.external  # Node

TTL = 5  # the provider's access tokens: expired within seconds of the fault
CASES = ["restart-while-full", "restart-while-read-only", "restart-after-remount"]
NO_RUNTIME_FOLDER = {"XDG_RUNTIME_DIR": ""}  # no runtime journal: nothing but the folder


@pytest.fixture(scope="module")
def provider() -> Iterator[NodeOidcProvider]:
    folder = short_temp_dir()
    with NodeOidcProvider(folder, TTL) as running:
        yield running
    shutil.rmtree(folder, ignore_errors=True)


def storage_fault(case: str, state: Path) -> AbstractContextManager[None]:
    return filled(state) if case == "restart-while-full" else read_only(state)


def refused_for_storage(client: BrokerClient) -> BrokerError:
    """GetToken's refusal while the state cannot be written: UNAVAILABLE, when to ask again."""
    with pytest.raises(BrokerError) as refused:
        client.get_token()
    assert refused.value.code == grpc.StatusCode.UNAVAILABLE, refused.value
    assert "cannot be renewed while its state cannot be saved" in refused.value.message
    assert refused.value.retry_after is not None and 1 <= refused.value.retry_after <= 5
    return refused.value


def alive(provider: NodeOidcProvider, client: BrokerClient) -> Token | None:
    """A token from the daemon that the provider accepts; None while none is served."""
    try:
        token = client.get_token()
    except BrokerError as error:
        assert error.code == grpc.StatusCode.UNAVAILABLE, error  # never signed out
        return None
    assert userinfo_status(provider, token) == 200, "a dead token was served"
    return token


def served(provider: NodeOidcProvider, client: BrokerClient) -> Token:
    """A token the provider accepts, at once: never refused."""
    token = alive(provider, client)
    assert token is not None
    return token


@pytest.mark.parametrize("case", CASES)
def test_a_state_folder_that_cannot_be_written_keeps_renewals_going_and_no_token_sent_twice(
    provider: NodeOidcProvider, socket_path: Path, case: str
) -> None:
    state = socket_path.parent / "state"
    mark = len(provider.refresh_statuses())
    with tmpfs(state, "4m"):
        daemon = signed_in_daemon(provider, socket_path)
        with BrokerClient(socket_path, timeout=15) as client:
            first = client.get_token()
            tokens = set()
            with storage_fault(case, state):
                while time.time() < first.expires_at_unix + 1:  # bounded: one lifetime
                    tokens.add(served(provider, client).access_token)
                    time.sleep(0.25)
                if case != "restart-after-remount":
                    daemon.stop()
                    daemon = DaemonProcess(socket_path, *provider.daemon_args()).start()
                    tokens.add(served(provider, client).access_token)
                    problem = client.status().storage_problem
                    assert "sessions are kept in the" in problem, problem
            if case == "restart-after-remount":
                daemon.stop()  # at once: before the state could have been saved again
                daemon = DaemonProcess(socket_path, *provider.daemon_args()).start()
            tokens.add(served(provider, client).access_token)
            eventually(lambda: client.status().storage_problem == "", "the state in its file")
        daemon.stop()
    statuses = provider.refresh_statuses()[mark:]
    assert provider.reuses() == 0 and statuses and set(statuses) == {200}
    assert len(tokens) >= 2  # renewed while the folder could not be written


def test_with_no_journal_a_renewal_that_cannot_be_stored_is_never_spent(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    state = socket_path.parent / "state"
    mark = len(provider.refresh_statuses())
    with tmpfs(state, "4m"):
        daemon = signed_in_daemon(provider, socket_path, env=NO_RUNTIME_FOLDER)
        with BrokerClient(socket_path, timeout=15) as client:
            first = client.get_token()
            tokens = set()
            with read_only(state):
                while time.time() < first.expires_at_unix + 1:  # bounded: one lifetime
                    if token := alive(provider, client):
                        tokens.add(token.access_token)
                    time.sleep(0.25)
                daemon.stop()
                daemon = DaemonProcess(
                    socket_path, *provider.daemon_args(), env=NO_RUNTIME_FOLDER
                ).start()
                status = client.status()
                assert status.default is not None and status.default.id == first.account
                refused_for_storage(client)  # still signed in, nothing spent
                problem = client.status().storage_problem
                assert "renewals wait until they can" in problem, problem
            renewed = eventually(lambda: alive(provider, client), "a renewal", timeout=30)
        assert renewed.access_token != first.access_token
        daemon.stop()
    assert provider.reuses() == 0 and provider.refresh_statuses()[mark:] == [200]
    assert tokens == {first.access_token}  # nothing was renewed while it could not be stored


def test_the_providers_reuse_count_sees_a_rotated_refresh_token_sent_again(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    """The count the tests above rely on: a second use of one refresh token, by hand."""
    before = provider.reuses()
    daemon = signed_in_daemon(provider, socket_path)
    with BrokerClient(socket_path) as client:
        account = client.get_token().account
    refresh_token = decrypted_record(daemon, account)["tokens"]["refresh_token"]
    daemon.stop()  # it will not spend it meanwhile
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": CLIENT_ID}
    token_url = str(provider.discovery()["token_endpoint"])
    assert httpx2.post(token_url, data=form, timeout=10).status_code == 200
    again = httpx2.post(token_url, data=form, timeout=10)
    assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")
    assert provider.reuses() == before + 1
