"""Down-scoped tokens (fewer scopes, an audience): cached while valid, never over-granted.

The tests share one signed-in daemon: each counts the provider's requests from its own
start, and none changes the session; the one whose daemon asks for other scopes at
sign-in starts its own.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from signin_broker.client import BrokerClient, BrokerError
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.signin import signed_in_daemon


def test_down_scoped_tokens_come_from_the_cache_while_valid(
    shared_stub: StubProvider, shared_broker: DaemonProcess
) -> None:
    stub, socket_path = shared_stub, shared_broker.socket_path
    with BrokerClient(socket_path) as client:
        main = client.get_token()
        narrow = client.get_token(scopes=["openid", "email"])
        assert narrow.access_token != main.access_token
        assert set(narrow.scopes) == {"openid", "email"}
        info = stub.access_token_info(narrow.access_token)
        assert info is not None and set(str(info["scope"]).split()) == {"openid", "email"}
        asked = len(stub.token_requests())
        for _ in range(50):
            assert client.get_token(scopes=["email", "openid"]).access_token == narrow.access_token
        assert len(stub.token_requests()) == asked  # zero provider requests while valid
        api = client.get_token(audience="https://api.example.com/")
        info = stub.access_token_info(api.access_token)
        assert info is not None and info["audience"] == "https://api.example.com/"
        assert (
            client.get_token(audience="https://api.example.com/").access_token == api.access_token
        )
        # The refresh token kept its full scope: the main token renews in full.
        renewed = client.get_token(min_ttl_seconds=3600)
        assert set(renewed.scopes) == {"openid", "profile", "email"}


def test_a_scope_never_granted_is_refused_without_asking_the_provider(
    shared_stub: StubProvider, shared_broker: DaemonProcess
) -> None:
    stub, socket_path = shared_stub, shared_broker.socket_path
    asked = len(stub.token_requests())
    with BrokerClient(socket_path) as client, pytest.raises(BrokerError) as caught:
        client.get_token(scopes=["openid", "admin:user"])
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "admin:user was not granted" in caught.value.message
    assert "add admin:user to the daemon's scopes setting" in caught.value.message
    assert len(stub.token_requests()) == asked


def test_a_bad_audience_is_invalid_argument(shared_broker: DaemonProcess) -> None:
    socket_path = shared_broker.socket_path
    with BrokerClient(socket_path) as client, pytest.raises(BrokerError) as caught:
        client.get_token(audience="not a uri")
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_a_scope_asked_for_and_not_granted_says_what_the_provider_granted(folder: Path) -> None:
    """The daemon asks for offline_access, which this stub grants only with a consent
    prompt: no setting of the daemon's scopes can help, so the message names the grant."""
    with StubProvider(offline_access_needs_consent=True) as stub:
        daemon = signed_in_daemon(
            stub, folder / "run" / "broker.sock",
            "--scopes", "offline_access", "--authorize-params", "prompt=login",
        )  # fmt: skip
        with BrokerClient(daemon.socket_path) as client, pytest.raises(BrokerError) as caught:
            client.get_token(scopes=["offline_access"])
        daemon.stop()
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.message.endswith(
        "offline_access was not granted to user:1001 at sign-in: the daemon asks for it, and"
        " the provider granted only openid profile email; which scopes this client may have"
        " is the provider's setting"
    ), caught.value.message
