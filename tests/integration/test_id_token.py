"""The ID token for tools that authenticate with it (kubectl's OIDC): never by default.

An app gets the account's ID token only where the user's rule says so (`apps allow APP
--id-token`, `id_token = true` in apps.toml); any other gets PERMISSION_DENIED, and the
grant is audited.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import grpc
import httpx2
import jwt
import pytest

from signin_broker.client import AppDecision, BrokerClient, BrokerError
from signin_broker_testing import StubProvider
from signin_broker_testing.ledger import SecretLedger
from support.apps import policy_path
from support.signin import signed_in_daemon


def my_app_id(client: BrokerClient) -> str:
    (mine,) = [app.id for app in client.apps().apps if app.last_pid == os.getpid()]
    return mine


def test_an_app_not_allowed_the_id_token_is_refused_and_says_how(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        plain = client.get_token()
        assert (plain.id_token, plain.id_token_expires_at_unix) == ("", 0)
        with pytest.raises(BrokerError) as refused:
            client.get_token(id_token=True)
        assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert f"signin-broker apps allow {my_app_id(client)} --id-token" in refused.value.message
    daemon.stop()


def test_an_allowed_app_gets_the_providers_id_token_and_the_grant_is_audited(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        client.get_token()
        app = my_app_id(client)
        allowed, _ = client.set_app_policy(app, AppDecision.ALLOW, id_token=True)
        assert allowed.id_token
        token = client.get_token(id_token=True)
        SecretLedger.note(token.id_token)
        assert token.id_token not in repr(token)  # a logged Token leaks neither secret
        rows = client.audit_events(limit=50)
    discovery = httpx2.get(stub.discovery_url, timeout=10).json()
    signing_key = jwt.PyJWKClient(discovery["jwks_uri"]).get_signing_key_from_jwt(token.id_token)
    claims = jwt.decode(
        token.id_token, signing_key.key, algorithms=["RS256"], audience="signin-broker"
    )
    assert (claims["iss"], claims["sub"]) == (stub.issuer, "1001")
    assert token.id_token_expires_at_unix == claims["exp"]
    granted = [
        r
        for r in rows
        if r.action == "issue_token" and json.loads(r.payload_json).get("with") == "ID token"
    ]
    assert granted and all(r.actor_app == app for r in granted)
    assert "id_token = true" in policy_path(socket_path).read_text()
    daemon.stop()


def test_the_id_token_is_allowed_only_with_allow(stub: StubProvider, socket_path: Path) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        client.get_token()
        with pytest.raises(BrokerError) as refused:
            client.set_app_policy(my_app_id(client), AppDecision.ASK, id_token=True)
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    daemon.stop()
