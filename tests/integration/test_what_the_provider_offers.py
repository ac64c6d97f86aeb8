"""The daemon says truthfully what the provider did or offers: revocation, device sign-in.

`logout` says "revoked" only when the provider revoked the tokens; a provider with no
revocation endpoint, or one that refuses the revocation, is named as such. A provider
without the device grant is reported as lacking it, not as unreachable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.responses import JSONResponse, Response

from signin_broker.client import BrokerClient, BrokerError, TokenRevocation
from signin_broker_testing import StubProvider, web
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.server import StubAuthorizationServer
from support.commands import signin_broker
from support.signin import signed_in_daemon

KEPT = "the tokens it issued stay valid until they expire"


def _without(*fields: str) -> Callable[[web.Site], dict[str, object]]:
    """The stub's discovery document less some fields, as a provider without them has it."""
    full = web.discovery_document
    return lambda site: {k: v for k, v in full(site).items() if k not in fields}


@pytest.fixture
def no_revocation(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubProvider]:
    monkeypatch.setattr(web, "discovery_document", _without("revocation_endpoint"))
    with StubProvider() as provider:
        yield provider


@pytest.fixture
def refusing_revocation(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubProvider]:
    """A provider that wants client authentication for revocation: 401 invalid_client."""

    def refuse(self: StubAuthorizationServer, exchange: object) -> Response:
        return JSONResponse({"error": "invalid_client"}, 401)

    monkeypatch.setattr(StubAuthorizationServer, "revocation_response", refuse)
    with StubProvider() as provider:
        yield provider


@pytest.fixture
def no_device_grant(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubProvider]:
    monkeypatch.setattr(web, "discovery_document", _without("device_authorization_endpoint"))
    with StubProvider() as provider:
        yield provider


def logout(daemon: DaemonProcess, *flags: str):
    return signin_broker("--socket", str(daemon.socket_path), "logout", *flags)


def revocations(stub: StubProvider) -> list[str]:
    return [
        r.params.get("token_type_hint", "")
        for r in stub.requests
        if r.path == stub.paths.revocation
    ]


def test_logout_says_revoked_when_the_provider_revoked_the_tokens(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    done = logout(daemon)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "Signed out; the provider revoked the tokens."
    assert revocations(stub) == ["refresh_token", "access_token"]


def test_logout_says_the_provider_offers_no_revocation_and_the_log_says_so(
    no_revocation: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(no_revocation, socket_path)
    done = logout(daemon, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["revocation"], answer["revocation_error"]) == ("not_offered", "")
    assert not revocations(no_revocation)
    daemon.expect_log(
        msg="the provider offers no token revocation: its tokens stay valid until they expire"
    )


def test_logout_says_the_provider_refused_and_with_what(
    refusing_revocation: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(refusing_revocation, socket_path)
    done = logout(daemon)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "Signed out here; the provider did not revoke the tokens"
        f" (revocation answered HTTP 401), so {KEPT}."
    )
    assert revocations(refusing_revocation) == ["refresh_token", "access_token"]
    with BrokerClient(daemon.socket_path) as client:
        assert client.accounts() == []  # signed out here all the same


def test_the_sdk_tells_revoked_and_not_offered_apart(
    no_revocation: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(no_revocation, socket_path)
    with BrokerClient(daemon.socket_path) as client:
        result = client.sign_out()
        again = client.sign_out()
    assert (result.was_signed_in, result.revocation) == (True, TokenRevocation.NOT_OFFERED)
    assert (again.was_signed_in, again.revocation) == (False, TokenRevocation.UNSPECIFIED)


def test_a_provider_without_the_device_grant_is_said_to_offer_no_device_sign_in(
    no_device_grant: StubProvider, socket_path: Path
) -> None:
    with DaemonProcess(socket_path, "--issuer", no_device_grant.issuer) as daemon:
        with BrokerClient(daemon.socket_path) as client, pytest.raises(BrokerError) as refused:
            client.begin_sign_in(device=True)
        done = signin_broker("--socket", str(socket_path), "login", "--device", "--wait", "5")
    assert refused.value.code.name == "FAILED_PRECONDITION"
    said = (
        "the identity provider offers no device sign-in (its discovery document has no"
        " device_authorization_endpoint); sign in with a browser instead"
    )
    assert refused.value.message == said
    assert done.returncode == 1 and said in done.stderr
    assert "unreachable" not in done.stderr and "try again" not in done.stderr


def test_logout_while_the_provider_is_down_says_the_tokens_were_not_revoked(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    stub.outage("stopped")
    done = logout(daemon, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["was_signed_in"] and answer["revocation"] == "failed"
    assert answer["revocation_error"].startswith("the revocation request failed")
