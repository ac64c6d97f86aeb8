"""The stub identity provider (signin_broker_testing) over real HTTP, as a client sees it."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import jwt
import pytest

from signin_broker_testing import (
    RecordedRequest,
    StubClient,
    StubPaths,
    StubProvider,
    StubUser,
)
from support.waiting import eventually

CLIENT_ID = "signin-broker"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
USER_CODE = re.compile(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}")
REDIRECT_URI = "http://127.0.0.1:8765/auth/oauth2/id-provider/callback"  # registered without port
BOB = StubUser(sub="2002", name="Bob Example", email="bob@example.com", preferred_username="bob")
ALICE_IN_WORKSPACES = StubUser(
    sub="1001",
    name="Alice Example",
    email="alice@example.com",
    preferred_username="alice",
    workspaces=("42", "7"),
)


@dataclass(frozen=True)
class Pkce:
    verifier: str
    challenge: str


def new_pkce() -> Pkce:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return Pkce(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode())


@pytest.fixture(scope="module")
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(trust_env=False, timeout=5) as client:
        yield client


@pytest.fixture(scope="module")
def shared_stub() -> Iterator[StubProvider]:
    """One default stub for tests that only sign in and read (each with its own tokens)."""
    with StubProvider() as stub:
        yield stub


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    """A fresh default stub for tests that turn its knobs."""
    with StubProvider() as fresh:
        yield fresh


@pytest.fixture
def two_users() -> Iterator[StubProvider]:
    """A fresh stub with Alice (in workspaces 42 and 7) and Bob (in none); Alice is approved."""
    with StubProvider(users=[ALICE_IN_WORKSPACES, BOB]) as fresh:
        yield fresh


class Flow:
    """A client of one provider that knows only its issuer, as the daemon does."""

    def __init__(self, http: httpx2.Client, issuer: str, redirect_uri: str = REDIRECT_URI) -> None:
        self.http = http
        self.issuer = issuer
        self.redirect_uri = redirect_uri
        response = http.get(issuer + "/.well-known/openid-configuration")
        assert response.status_code == 200
        self.metadata: dict[str, Any] = response.json()

    def authorize(self, pkce: Pkce | None = None, **overrides: str) -> httpx2.Response:
        pkce = pkce or new_pkce()
        params = {
            "response_type": "code",
            "client_id": CLIENT_ID,
            "redirect_uri": self.redirect_uri,
            "scope": "openid profile email",
            "state": "state-" + secrets.token_hex(4),
            "nonce": "nonce-" + secrets.token_hex(4),
            "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
            **overrides,
        }
        return self.http.get(
            self.metadata["authorization_endpoint"],
            params={name: value for name, value in params.items() if value},
        )

    def redeem(self, code: str, verifier: str, redirect_uri: str = "") -> httpx2.Response:
        return self.http.post(
            self.metadata["token_endpoint"],
            data={
                "grant_type": "authorization_code",
                "client_id": CLIENT_ID,
                "code": code,
                "redirect_uri": redirect_uri or self.redirect_uri,
                "code_verifier": verifier,
            },
        )

    def sign_in(self, scope: str = "openid profile email") -> dict[str, Any]:
        pkce = new_pkce()
        code = code_from(self.authorize(pkce, scope=scope))
        response = self.redeem(code, pkce.verifier)
        assert response.status_code == 200, response.text
        tokens: dict[str, Any] = response.json()
        return tokens

    def refresh(
        self, refresh_token: str, timeout: float = 5, **extra: str | list[str]
    ) -> httpx2.Response:
        return self.http.post(
            self.metadata["token_endpoint"],
            data={
                "grant_type": "refresh_token",
                "client_id": CLIENT_ID,
                "refresh_token": refresh_token,
                **extra,
            },
            timeout=timeout,
        )

    def device_authorization(
        self, scope: str = "openid profile email", **extra: str
    ) -> httpx2.Response:
        return self.http.post(
            self.metadata["device_authorization_endpoint"],
            data={"client_id": CLIENT_ID, "scope": scope, **extra},
        )

    def start_device(self, scope: str = "openid profile email", **extra: str) -> dict[str, Any]:
        """A device authorization that must be granted: device_code, user_code and the rest."""
        response = self.device_authorization(scope, **extra)
        assert response.status_code == 200, response.text
        grant: dict[str, Any] = response.json()
        return grant

    def poll(self, device_code: str, client_id: str = CLIENT_ID) -> httpx2.Response:
        return self.http.post(
            self.metadata["token_endpoint"],
            data={"grant_type": DEVICE_GRANT, "device_code": device_code, "client_id": client_id},
        )

    def userinfo(self, access_token: str) -> httpx2.Response:
        return self.http.get(
            self.metadata["userinfo_endpoint"],
            headers={"Authorization": f"Bearer {access_token}"},
        )

    def id_token_claims(self, id_token: str) -> dict[str, Any]:
        """Validate an ID token against the published JWKS, as a relying party must."""
        jwks = jwt.PyJWKSet.from_dict(self.http.get(self.metadata["jwks_uri"]).json())
        kid = jwt.get_unverified_header(id_token)["kid"]
        claims: dict[str, Any] = jwt.decode(
            id_token,
            jwks[kid].key,
            algorithms=["RS256"],
            audience=CLIENT_ID,
            issuer=self.issuer,
        )
        return claims


def redirect_params(response: httpx2.Response) -> dict[str, str]:
    assert response.status_code == 302, response.text
    return {
        name: values[0]
        for name, values in parse_qs(urlsplit(response.headers["location"]).query).items()
    }


def code_from(response: httpx2.Response) -> str:
    params = redirect_params(response)
    assert "code" in params, params
    return params["code"]


def consent_form(page: httpx2.Response) -> tuple[str, dict[str, str]]:
    """The consent page's form: where it posts, and its hidden fields."""
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    action = re.search(r'<form method="post" action="([^"]+)"', page.text)
    assert action is not None
    hidden = {
        unescape(name): unescape(value)
        for name, value in re.findall(r'type="hidden" name="([^"]*)" value="([^"]*)"', page.text)
    }
    return unescape(action[1]), hidden


def refusal(response: httpx2.Response) -> tuple[int, str]:
    """The status and OAuth error of a refused request."""
    return response.status_code, response.json()["error"]


def device_form(page: httpx2.Response) -> tuple[str, str]:
    """The verification page's form: where it posts, and the code filled in."""
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "<script" not in page.text.lower()
    action = re.search(r'<form method="post" action="([^"]+)"', page.text)
    user_code = re.search(r'<input id="user_code" name="user_code" value="([^"]*)"', page.text)
    assert action is not None and user_code is not None
    return unescape(action[1]), unescape(user_code[1])


def sign_in_to(
    flow: Flow, workspace_id: str, scope: str = "openid profile email"
) -> dict[str, Any]:
    """A code flow naming a workspace; the tokens, which must be issued."""
    pkce = new_pkce()
    code = code_from(flow.authorize(pkce, scope=scope, workspace_id=workspace_id))
    response = flow.redeem(code, pkce.verifier)
    assert response.status_code == 200, response.text
    tokens: dict[str, Any] = response.json()
    return tokens


def send_in_background(
    pool: ThreadPoolExecutor, method: str, url: str, **kwargs: Any
) -> Future[httpx2.Response]:
    def send() -> httpx2.Response:
        with httpx2.Client(trust_env=False, timeout=10) as client:
            return client.request(method, url, **kwargs)

    return pool.submit(send)


def every_endpoint(stub: StubProvider, tokens: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """One request to each endpoint, each of which would change or read state."""
    base = stub.base_url
    return [
        ("GET", stub.discovery_url, {}),
        (
            "GET",
            base + "/oauth/v2/authorize",
            {"params": {"response_type": "code", "client_id": CLIENT_ID}},
        ),
        (
            "POST",
            base + "/oauth/v2/token",
            {
                "data": {
                    "grant_type": "refresh_token",
                    "client_id": CLIENT_ID,
                    "refresh_token": tokens["refresh_token"],
                }
            },
        ),
        (
            "GET",
            base + "/oauth/v2/userinfo",
            {"headers": {"Authorization": f"Bearer {tokens['access_token']}"}},
        ),
        ("GET", base + "/.well-known/jwks.json", {}),
        (
            "POST",
            base + "/oauth/v2/revoke",
            {"data": {"token": tokens["access_token"], "client_id": CLIENT_ID}},
        ),
        ("GET", base + "/logout", {}),
        ("POST", base + "/oauth/v2/device_authorization", {"data": {"client_id": CLIENT_ID}}),
        ("GET", base + "/device", {}),
    ]


def test_discovery_lists_absolute_endpoints(shared_stub: StubProvider, http: httpx2.Client) -> None:
    metadata = Flow(http, shared_stub.issuer).metadata
    base = shared_stub.base_url
    assert metadata["issuer"] == shared_stub.issuer == base
    assert metadata["authorization_endpoint"] == base + "/oauth/v2/authorize"
    assert metadata["token_endpoint"] == base + "/oauth/v2/token"
    assert metadata["userinfo_endpoint"] == base + "/oauth/v2/userinfo"
    assert metadata["jwks_uri"] == base + "/.well-known/jwks.json"
    assert metadata["end_session_endpoint"] == base + "/logout"
    assert metadata["revocation_endpoint"] == base + "/oauth/v2/revoke"
    assert metadata["device_authorization_endpoint"] == base + "/oauth/v2/device_authorization"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["token_endpoint_auth_methods_supported"] == ["none"]
    assert metadata["grant_types_supported"] == [
        "authorization_code",
        "refresh_token",
        DEVICE_GRANT,
        "client_credentials",
    ]
    assert metadata["scopes_supported"] == ["openid", "profile", "email", "offline_access", "read"]
    assert metadata["id_token_signing_alg_values_supported"] == ["RS256"]
    assert {"sub", "email", "name", "workspace_id"} <= set(metadata["claims_supported"])


def test_code_flow_with_pkce_gives_tokens_whose_id_token_validates(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    pkce = new_pkce()
    response = flow.authorize(pkce, state="s p&c=é", nonce="nonce-42")
    params = redirect_params(response)
    assert response.headers["location"].startswith(REDIRECT_URI + "?")
    assert params["state"] == "s p&c=é"
    tokens = flow.redeem(params["code"], pkce.verifier).json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 3600
    assert tokens["scope"] == "openid profile email"
    assert tokens["access_token"] and tokens["refresh_token"]
    assert jwt.get_unverified_header(tokens["id_token"])["kid"] == shared_stub.signing_kid
    claims = flow.id_token_claims(tokens["id_token"])
    assert claims["iss"] == shared_stub.issuer
    assert claims["aud"] == CLIENT_ID
    assert claims["sub"] == "1001"
    assert claims["nonce"] == "nonce-42"
    assert {"exp", "iat", "auth_time", "at_hash"} <= claims.keys()
    assert claims["name"] == "Alice Example" and claims["email"] == "alice@example.com"


def test_a_code_works_once(shared_stub: StubProvider, http: httpx2.Client) -> None:
    flow = Flow(http, shared_stub.issuer)
    pkce = new_pkce()
    code = code_from(flow.authorize(pkce))
    assert flow.redeem(code, pkce.verifier).status_code == 200
    second = flow.redeem(code, pkce.verifier)
    assert (second.status_code, second.json()["error"]) == (400, "invalid_grant")


def test_a_wrong_code_verifier_is_invalid_grant(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    code = code_from(flow.authorize(new_pkce()))
    response = flow.redeem(code, new_pkce().verifier)
    assert (response.status_code, response.json()["error"]) == (400, "invalid_grant")


def test_a_code_redeemed_with_another_redirect_uri_is_invalid_grant(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    pkce = new_pkce()
    code = code_from(flow.authorize(pkce))
    response = flow.redeem(code, pkce.verifier, REDIRECT_URI.replace("8765", "8766"))
    assert (response.status_code, response.json()["error"]) == (400, "invalid_grant")


def test_pkce_s256_is_required(shared_stub: StubProvider, http: httpx2.Client) -> None:
    flow = Flow(http, shared_stub.issuer)
    missing = redirect_params(flow.authorize(code_challenge="", code_challenge_method=""))
    assert missing["error"] == "invalid_request" and "code" not in missing
    pkce = new_pkce()
    plain = redirect_params(
        flow.authorize(code_challenge=pkce.verifier, code_challenge_method="plain")
    )
    assert plain["error"] == "invalid_request" and "code" not in plain


def test_an_unregistered_redirect_uri_gets_400_and_no_redirect(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    for redirect_uri in (
        "http://127.0.0.1:8765/elsewhere",
        "http://evil.example/auth/oauth2/id-provider/callback",
        "http://user@127.0.0.1:8765/auth/oauth2/id-provider/callback",
    ):
        response = flow.authorize(redirect_uri=redirect_uri)
        assert response.status_code == 400
        assert "location" not in response.headers
        assert response.json()["error"] == "invalid_redirect_uri"
    unknown = flow.authorize(client_id="someone-else")
    assert unknown.status_code == 400 and "location" not in unknown.headers
    assert "text/html" in unknown.headers["content-type"]


def test_loopback_redirect_uris_match_on_any_port(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    for port in ("8765", "54321"):
        flow = Flow(http, shared_stub.issuer, REDIRECT_URI.replace("8765", port))
        assert flow.sign_in()["access_token"]
    client = StubClient("app", ["http://[::1]/cb", "https://app.example/cb"])
    assert client.accepts_redirect_uri("http://[::1]:4000/cb")
    assert client.accepts_redirect_uri("https://app.example/cb")
    assert not client.accepts_redirect_uri("https://app.example:8443/cb")
    assert not client.accepts_redirect_uri("http://[::1]:4000/cb?x=1")


def test_refresh_rotates_and_an_old_refresh_token_is_invalid_grant(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    first = flow.sign_in()
    response = flow.refresh(first["refresh_token"])
    assert response.status_code == 200, response.text
    second = response.json()
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]
    assert second["expires_in"] == 3600 and second["token_type"] == "Bearer"
    reused = flow.refresh(first["refresh_token"])
    assert (reused.status_code, reused.json()["error"]) == (400, "invalid_grant")
    assert flow.refresh(second["refresh_token"]).status_code == 200
    assert flow.userinfo(second["access_token"]).status_code == 200


def test_userinfo_claims_follow_the_scope(shared_stub: StubProvider, http: httpx2.Client) -> None:
    flow = Flow(http, shared_stub.issuer)
    assert flow.userinfo(flow.sign_in("openid")["access_token"]).json() == {"sub": "1001"}
    assert flow.userinfo(flow.sign_in("openid email")["access_token"]).json() == {
        "sub": "1001",
        "email": "alice@example.com",
        "email_verified": True,
    }
    assert flow.userinfo(flow.sign_in("openid profile")["access_token"]).json() == {
        "sub": "1001",
        "name": "Alice Example",
        "preferred_username": "alice",
    }
    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic eDp5"}):
        refused = http.get(flow.metadata["userinfo_endpoint"], headers=headers)
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]


def test_revoke_user_ends_every_token_of_that_user(stub: StubProvider, http: httpx2.Client) -> None:
    flow = Flow(http, stub.issuer)
    first, second = flow.sign_in(), flow.sign_in()
    assert stub.revoke_user("1001") == 2
    for tokens in (first, second):
        assert flow.userinfo(tokens["access_token"]).status_code == 401
        refused = flow.refresh(tokens["refresh_token"])
        assert (refused.status_code, refused.json()["error"]) == (400, "invalid_grant")
    assert flow.userinfo(flow.sign_in()["access_token"]).status_code == 200  # may sign in again


def test_the_admin_endpoint_needs_the_admin_token(stub: StubProvider, http: httpx2.Client) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    url = stub.base_url + "/admin/revoke"
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        assert http.post(url, data={"sub": "1001"}, headers=headers).status_code == 401
    assert flow.userinfo(tokens["access_token"]).status_code == 200
    response = http.post(
        url, data={"sub": "1001"}, headers={"Authorization": f"Bearer {stub.admin_token}"}
    )
    assert (response.status_code, response.json()) == (200, {"revoked": 1})
    assert flow.userinfo(tokens["access_token"]).status_code == 401


def test_rotate_keys_publishes_a_new_kid(stub: StubProvider, http: httpx2.Client) -> None:
    flow = Flow(http, stub.issuer)
    old_kid, old_token = stub.signing_kid, flow.sign_in()["id_token"]
    new_kid = stub.rotate_keys()
    assert new_kid == stub.signing_kid != old_kid
    jwks = http.get(flow.metadata["jwks_uri"]).json()["keys"]
    assert [key["kid"] for key in jwks] == [new_kid, old_kid]
    assert all(key["use"] == "sig" and key["alg"] == "RS256" and "d" not in key for key in jwks)
    new_token = flow.sign_in()["id_token"]
    assert jwt.get_unverified_header(new_token)["kid"] == new_kid
    assert flow.id_token_claims(new_token)["sub"] == flow.id_token_claims(old_token)["sub"]
    newest_kid = stub.rotate_keys(keep_previous=False)
    assert [key["kid"] for key in http.get(flow.metadata["jwks_uri"]).json()["keys"]] == [
        newest_kid
    ]
    with pytest.raises(KeyError):
        flow.id_token_claims(new_token)


def test_fail_token_endpoint_fails_the_next_requests(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    stub.fail_token_endpoint(status=503, times=2)
    for _ in range(2):
        failed = flow.refresh(tokens["refresh_token"])
        assert (failed.status_code, failed.json()) == (503, {"error": "server_error"})
    stub.fail_token_endpoint()
    failed = flow.refresh(tokens["refresh_token"])
    assert (failed.status_code, failed.json()) == (400, {"error": "invalid_grant"})
    stub.fail_token_endpoint(status=429, error="slow_down")
    assert flow.refresh(tokens["refresh_token"]).json() == {"error": "slow_down"}
    assert flow.refresh(tokens["refresh_token"]).status_code == 200  # injected failures ate nothing
    assert len(stub.token_requests("refresh_token")) == 5
    assert len(stub.token_requests("authorization_code")) == 1


def test_deny_next_authorization_redirects_with_access_denied(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    stub.deny_next_authorization()
    denied = redirect_params(flow.authorize(state="keep-me"))
    assert (denied["error"], denied["state"]) == ("access_denied", "keep-me")
    assert "code" not in denied
    assert "code" in redirect_params(flow.authorize())  # only the next one


def test_the_consent_page_signs_in_the_chosen_user(http: httpx2.Client) -> None:
    with StubProvider(users=[StubUser("1001", "Alice Example"), BOB], auto_approve=None) as stub:
        flow = Flow(http, stub.issuer)
        pkce = new_pkce()
        page = flow.authorize(pkce, state="st-1")
        action, hidden = consent_form(page)
        assert "Sign in to signin-broker" in page.text
        assert "Sign in as Alice Example" in page.text and "Sign in as Bob Example" in page.text
        assert ">Deny</button>" in page.text
        chosen = http.post(stub.base_url + action, data={**hidden, "sub": "2002"})
        params = redirect_params(chosen)
        assert params["state"] == "st-1"
        tokens = flow.redeem(params["code"], pkce.verifier).json()
        assert flow.id_token_claims(tokens["id_token"])["sub"] == "2002"
        denied = http.post(stub.base_url + action, data={**hidden, "deny": "1"})
        assert redirect_params(denied)["error"] == "access_denied"


def test_approve_as_switches_the_signed_in_user_at_once_and_across_restarts(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, two_users.issuer)
    assert flow.id_token_claims(flow.sign_in()["id_token"])["sub"] == "1001"
    two_users.approve_as("2002")
    assert flow.id_token_claims(flow.sign_in()["id_token"])["sub"] == "2002"
    two_users.approve_as(None)
    consent_form(flow.authorize())  # nobody is approved: the page asks
    two_users.approve_as("2002")
    two_users.stop()
    two_users.start()
    flow = Flow(http, two_users.issuer)
    tokens = flow.sign_in()
    assert flow.id_token_claims(tokens["id_token"])["sub"] == "2002"
    assert flow.userinfo(tokens["access_token"]).json()["sub"] == "2002"
    two_users.approve_as("1001")
    assert flow.id_token_claims(flow.sign_in()["id_token"])["sub"] == "1001"


def test_approve_as_an_unknown_sub_is_refused(two_users: StubProvider, http: httpx2.Client) -> None:
    with pytest.raises(ValueError, match=r"'9999'.*\['1001', '2002'\]"):
        two_users.approve_as("9999")
    flow = Flow(http, two_users.issuer)
    assert flow.id_token_claims(flow.sign_in()["id_token"])["sub"] == "1001"  # unchanged


def test_a_member_signs_in_to_a_workspace_and_keeps_it_through_refreshes(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, two_users.issuer)
    tokens = sign_in_to(flow, "42")
    claims = flow.id_token_claims(tokens["id_token"])
    assert (claims["sub"], claims["workspace_id"]) == ("1001", "42")
    assert flow.userinfo(tokens["access_token"]).json() == {
        "sub": "1001",
        "name": "Alice Example",
        "preferred_username": "alice",
        "email": "alice@example.com",
        "email_verified": True,
        "workspace_id": "42",
    }
    refresh_token = tokens["refresh_token"]
    for scope in ("openid", ""):  # narrowed, then the whole grant again
        response = flow.refresh(refresh_token, **({"scope": scope} if scope else {}))
        assert response.status_code == 200, response.text
        refreshed = response.json()
        userinfo = flow.userinfo(refreshed["access_token"]).json()
        assert (userinfo["sub"], userinfo["workspace_id"]) == ("1001", "42")
        refresh_token = refreshed["refresh_token"]
    # The claim names the tenant, so it comes whatever the scope.
    narrow = sign_in_to(flow, "7", scope="openid")
    assert flow.id_token_claims(narrow["id_token"])["workspace_id"] == "7"
    assert flow.userinfo(narrow["access_token"]).json() == {"sub": "1001", "workspace_id": "7"}


def test_a_non_member_is_denied_with_the_state_and_no_code(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, two_users.issuer)
    for approved, workspace_id in (("1001", "99"), ("2002", "42")):
        two_users.approve_as(approved)
        response = flow.authorize(state="st-" + approved, workspace_id=workspace_id)
        assert response.headers["location"].startswith(REDIRECT_URI + "?")
        denied = redirect_params(response)
        assert (denied["error"], denied["state"]) == ("access_denied", "st-" + approved)
        assert f"not a member of workspace {workspace_id}" in denied["error_description"]
        assert "code" not in denied


def test_a_malformed_workspace_id_is_invalid_request(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, two_users.issuer)
    for workspace_id in ("abc", "-42", "4 2", "42.0", "1" * 19, "\u0664\u0662"):
        refused = redirect_params(flow.authorize(state="st-bad", workspace_id=workspace_id))
        assert (refused["error"], refused["state"]) == ("invalid_request", "st-bad"), workspace_id
        assert "workspace_id" in refused["error_description"] and "code" not in refused
    well_formed = redirect_params(flow.authorize(workspace_id="9" * 18))
    assert well_formed["error"] == "access_denied"  # 18 digits is a workspace, just not hers
    with pytest.raises(ValueError, match="workspace ids"):
        StubProvider(users=[StubUser("1001", workspaces=("42", "x1"))])


def test_without_a_workspace_id_there_is_no_workspace_claim(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, two_users.issuer)
    tokens = flow.sign_in()
    assert "workspace_id" not in flow.id_token_claims(tokens["id_token"])
    assert "workspace_id" not in flow.userinfo(tokens["access_token"]).json()
    refreshed = flow.refresh(tokens["refresh_token"]).json()
    assert "workspace_id" not in flow.userinfo(refreshed["access_token"]).json()


def test_the_consent_page_passes_the_workspace_id_through(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    two_users.approve_as(None)
    flow = Flow(http, two_users.issuer)
    pkce = new_pkce()
    action, hidden = consent_form(flow.authorize(pkce, state="st-ws", workspace_id="42"))
    assert hidden["workspace_id"] == "42"
    as_bob = redirect_params(http.post(two_users.base_url + action, data={**hidden, "sub": "2002"}))
    assert (as_bob["error"], as_bob["state"]) == ("access_denied", "st-ws")
    as_alice = http.post(two_users.base_url + action, data={**hidden, "sub": "1001"})
    tokens = flow.redeem(code_from(as_alice), pkce.verifier).json()
    assert flow.id_token_claims(tokens["id_token"])["workspace_id"] == "42"


def test_logout_redirects_only_to_a_registered_uri(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    id_token = flow.sign_in()["id_token"]
    logout = flow.metadata["end_session_endpoint"]
    registered = http.get(
        logout,
        params={
            "id_token_hint": id_token,
            "post_logout_redirect_uri": "http://127.0.0.1:8765/",
            "state": "bye",
        },
    )
    assert registered.status_code == 302
    assert registered.headers["location"] == "http://127.0.0.1:8765/?state=bye"
    by_client_id = http.post(
        logout, data={"client_id": CLIENT_ID, "post_logout_redirect_uri": "http://127.0.0.1/"}
    )
    assert by_client_id.headers["location"] == "http://127.0.0.1/"
    for params in (
        {"id_token_hint": id_token, "post_logout_redirect_uri": "http://evil.example/"},
        {},
    ):
        page = http.get(logout, params=params)
        assert page.status_code == 200 and "location" not in page.headers
        assert "You are signed out" in page.text
    forged = http.get(logout, params={"id_token_hint": id_token[:-4] + "AAAA", "state": "x"})
    assert forged.status_code == 400 and "location" not in forged.headers
    recorded = [r for r in shared_stub.requests if r.path == "/logout"][-5:]
    assert [r.method for r in recorded] == ["GET", "POST", "GET", "GET", "GET"]
    assert recorded[0].params["state"] == "bye"


def test_revocation_ends_a_token(shared_stub: StubProvider, http: httpx2.Client) -> None:
    flow = Flow(http, shared_stub.issuer)
    tokens = flow.sign_in()
    revoke = flow.metadata["revocation_endpoint"]
    response = http.post(
        revoke,
        data={
            "token": tokens["access_token"],
            "token_type_hint": "access_token",
            "client_id": CLIENT_ID,
        },
    )
    assert response.status_code == 200
    assert flow.userinfo(tokens["access_token"]).status_code == 401
    unknown = http.post(revoke, data={"token": "never-issued", "client_id": CLIENT_ID})
    assert unknown.status_code == 200
    assert (
        http.post(
            revoke, data={"token": tokens["refresh_token"], "client_id": CLIENT_ID}
        ).status_code
        == 200
    )
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"


def test_an_issuer_path_and_other_paths_work_through_discovery_alone(http: httpx2.Client) -> None:
    prefix = "/realms/test/protocol/openid-connect"
    paths = StubPaths(
        authorize=prefix + "/auth",
        token=prefix + "/token",
        userinfo=prefix + "/userinfo",
        jwks=prefix + "/certs",
        logout=prefix + "/logout",
        revocation=prefix + "/revoke",
        admin_revoke="/admin/realms/test/revoke",
    )
    with StubProvider(paths=paths, issuer_path="/realms/test") as stub:
        assert stub.issuer == stub.base_url + "/realms/test"
        flow = Flow(http, stub.issuer)
        assert flow.metadata["issuer"] == stub.issuer
        assert flow.metadata["token_endpoint"] == stub.base_url + prefix + "/token"
        tokens = flow.sign_in()
        assert flow.id_token_claims(tokens["id_token"])["iss"] == stub.issuer
        assert flow.userinfo(tokens["access_token"]).json()["sub"] == "1001"
        assert flow.refresh(tokens["refresh_token"]).status_code == 200
        assert http.get(stub.base_url + "/.well-known/openid-configuration").status_code == 404
        assert {r.path for r in stub.requests} >= {prefix + "/auth", prefix + "/certs"}


def test_access_token_ttl_is_expires_in_and_expiry_is_real(http: httpx2.Client) -> None:
    with StubProvider(access_token_ttl=120) as stub:
        flow = Flow(http, stub.issuer)
        tokens = flow.sign_in()
        assert tokens["expires_in"] == 120
        stub.access_token_ttl = 1
        short = flow.refresh(tokens["refresh_token"]).json()
        assert short["expires_in"] == 1
        assert flow.userinfo(short["access_token"]).status_code == 200
        deadline = time.monotonic() + 3
        while flow.userinfo(short["access_token"]).status_code == 200:
            assert time.monotonic() < deadline, "the access token never expired"
            time.sleep(0.1)
        assert flow.userinfo(tokens["access_token"]).status_code == 200


def test_every_request_is_recorded_before_it_is_handled(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    flow.sign_in()
    http.get(stub.base_url + "/nowhere?x=1")
    requests = stub.requests
    assert [(r.method, r.path) for r in requests] == [
        ("GET", "/.well-known/openid-configuration"),
        ("GET", "/oauth/v2/authorize"),
        ("POST", "/oauth/v2/token"),
        ("GET", "/nowhere"),
    ]
    token: RecordedRequest = stub.token_requests("authorization_code")[0]
    assert token.params["grant_type"] == "authorization_code"
    assert token.params["client_id"] == CLIENT_ID
    assert token.headers["content-type"] == "application/x-www-form-urlencoded"
    assert requests[1].params["response_type"] == "code"
    assert requests[-1].params == {"x": "1"} and requests[0].at <= requests[-1].at <= time.time()
    stub.clear_requests()
    assert stub.requests == []


def test_only_loopback_is_served() -> None:
    for host in ("0.0.0.0", "192.0.2.1", "example.com", "::"):
        with pytest.raises(ValueError, match="loopback"):
            StubProvider().start(host=host)


def test_the_command_prints_one_json_line_and_exits_0_on_sigterm(http: httpx2.Client) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "signin_broker_testing", "--access-token-ttl", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 20)
        assert ready, "the command printed nothing"
        assert process.stdout is not None
        line = json.loads(process.stdout.readline())
        assert set(line) == {"issuer", "admin_token"}
        assert Flow(http, line["issuer"]).sign_in()["expires_in"] == 60
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert process.stdout.read() == ""
        assert process.stderr is not None
        assert "/oauth/v2/token" in process.stderr.read()
    finally:
        process.kill()
        process.wait(timeout=10)


def test_a_stopped_outage_refuses_connections_then_serves_every_state_on_the_same_port(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    pkce = new_pkce()
    code = code_from(flow.authorize(pkce))
    issuer, base_url, kid = stub.issuer, stub.base_url, stub.signing_kid
    recorded = len(stub.requests)
    stub.outage("stopped")
    assert (stub.issuer, stub.base_url) == (issuer, base_url)
    for method, url, kwargs in every_endpoint(stub, tokens):
        with pytest.raises(httpx2.ConnectError):
            http.request(method, url, **kwargs)
    assert len(stub.requests) == recorded  # nothing arrived
    stub.outage("http_500")  # back on the same port, failing another way
    assert http.get(stub.discovery_url).status_code == 500
    stub.outage(None)
    assert Flow(http, issuer).metadata["token_endpoint"] == base_url + "/oauth/v2/token"
    assert flow.userinfo(tokens["access_token"]).status_code == 200
    redeemed = flow.redeem(code, pkce.verifier)
    assert redeemed.status_code == 200, redeemed.text
    assert jwt.get_unverified_header(redeemed.json()["id_token"])["kid"] == kid
    assert flow.id_token_claims(redeemed.json()["id_token"])["iss"] == issuer
    assert flow.refresh(tokens["refresh_token"]).status_code == 200
    assert [r.path for r in stub.requests[recorded:]] == [
        "/.well-known/openid-configuration",  # the 500
        "/.well-known/openid-configuration",
        "/oauth/v2/userinfo",
        "/oauth/v2/token",
        "/.well-known/jwks.json",
        "/oauth/v2/token",
    ]


@pytest.mark.parametrize("mode", ["http_500", "garbage"])
def test_a_failing_outage_answers_every_endpoint_and_uses_nothing_up(
    mode: str, stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    stub.clear_requests()
    stub.outage(mode)
    requests = every_endpoint(stub, tokens)
    for method, url, kwargs in requests:
        response = http.request(method, url, **kwargs)
        if mode == "http_500":
            assert (response.status_code, response.json()) == (500, {"error": "server_error"})
        else:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/html")
            with pytest.raises(ValueError):
                response.json()
    assert [(r.method, r.path) for r in stub.requests] == [
        (method, urlsplit(url).path) for method, url, _ in requests
    ]
    assert (
        stub.token_requests("refresh_token")[0].params["refresh_token"] == (tokens["refresh_token"])
    )
    stub.outage(None)
    assert flow.userinfo(tokens["access_token"]).status_code == 200  # revocation never ran
    assert flow.refresh(tokens["refresh_token"]).status_code == 200  # nor the refresh


def test_a_stall_outage_delays_every_request_then_answers_normally(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    stub.outage("stall", stall_seconds=0.2)
    started = time.monotonic()
    assert flow.userinfo(tokens["access_token"]).json()["sub"] == "1001"
    assert http.get(stub.discovery_url).json()["issuer"] == stub.issuer
    assert time.monotonic() - started >= 0.4
    assert [r.path for r in stub.requests][-2:] == [
        "/oauth/v2/userinfo",
        "/.well-known/openid-configuration",
    ]


def test_a_stalled_request_whose_client_leaves_is_dropped(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    stub.outage("stall", stall_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        flow.refresh(tokens["refresh_token"], timeout=0.15)
    assert len(stub.token_requests("refresh_token")) == 1
    stub.outage(None)
    time.sleep(max(0.0, started + 0.7 - time.monotonic()))  # past the stall
    assert flow.refresh(tokens["refresh_token"]).status_code == 200  # so it was never used


def test_stopping_the_stub_ends_a_stall(stub: StubProvider) -> None:
    issuer = stub.issuer
    stub.outage("stall", stall_seconds=60)
    with ThreadPoolExecutor(1) as pool:
        pending = send_in_background(pool, "GET", stub.discovery_url)
        eventually(lambda: stub.requests, "a request recorded", 5, 0.01)
        started = time.monotonic()
        stub.stop()
        assert time.monotonic() - started < 3
        response = pending.result(timeout=5)
    assert (response.status_code, response.json()["issuer"]) == (200, issuer)  # handled normally


def test_outage_and_delay_settings_are_checked(shared_stub: StubProvider) -> None:
    with pytest.raises(ValueError, match="unknown outage mode"):
        shared_stub.outage("down")
    with pytest.raises(ValueError, match="stall_seconds"):
        shared_stub.outage("stall", stall_seconds=-1)
    with pytest.raises(ValueError, match="times"):
        shared_stub.delay_token_response(1, after_processing=False, times=0)
    with pytest.raises(ValueError, match="seconds"):
        shared_stub.delay_token_response(float("nan"), after_processing=True)
    with pytest.raises(RuntimeError, match="not running"):
        StubProvider().outage("stopped")


def test_a_delay_before_processing_uses_nothing_up_if_the_client_leaves(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    stub.delay_token_response(0.5, after_processing=False)
    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        flow.refresh(tokens["refresh_token"], timeout=0.15)
    time.sleep(max(0.0, started + 0.7 - time.monotonic()))  # past the delay
    assert flow.refresh(tokens["refresh_token"]).status_code == 200
    assert len(stub.token_requests("refresh_token")) == 2


def test_a_delay_after_processing_uses_the_refresh_token_and_loses_the_response(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    stub.delay_token_response(30, after_processing=True)
    with pytest.raises(httpx2.ReadTimeout):
        flow.refresh(tokens["refresh_token"], timeout=0.3)
    reused = flow.refresh(tokens["refresh_token"])
    assert (reused.status_code, reused.json()["error"]) == (400, "invalid_grant")
    assert stub.revoke_user("1001") == 2  # the sign-in's access token, and the lost pair


def test_delayed_token_responses_come_late_but_whole(
    stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    refresh_token = flow.sign_in()["refresh_token"]
    stub.delay_token_response(0.3, after_processing=False)
    stub.delay_token_response(0.3, after_processing=True, times=2)
    elapsed = []
    for _ in range(4):
        started = time.monotonic()
        response = flow.refresh(refresh_token)
        elapsed.append(time.monotonic() - started)
        assert response.status_code == 200, response.text
        refresh_token = response.json()["refresh_token"]
    assert [seconds >= 0.3 for seconds in elapsed] == [True, True, True, False]
    assert len(stub.token_requests("refresh_token")) == 4


@pytest.mark.parametrize("after_processing", [False, True])
def test_stopping_the_stub_ends_a_token_delay(
    after_processing: bool, stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, stub.issuer)
    tokens = flow.sign_in()
    stub.delay_token_response(60, after_processing=after_processing)
    with ThreadPoolExecutor(1) as pool:
        pending = send_in_background(
            pool,
            "POST",
            flow.metadata["token_endpoint"],
            data={
                "grant_type": "refresh_token",
                "client_id": CLIENT_ID,
                "refresh_token": tokens["refresh_token"],
            },
        )
        eventually(lambda: stub.token_requests("refresh_token"), "a refresh", 5, 0.01)
        started = time.monotonic()
        stub.stop()
        assert time.monotonic() - started < 3
        response = pending.result(timeout=5)
    assert response.status_code == 200, response.text
    assert response.json()["refresh_token"] != tokens["refresh_token"]


def test_a_refresh_can_narrow_the_scope_and_name_a_resource(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    tokens = flow.sign_in("openid profile email")
    resource = "https://api.example/v1?tenant=7"
    response = flow.refresh(tokens["refresh_token"], scope="openid email", resource=resource)
    assert response.status_code == 200, response.text
    narrowed = response.json()
    assert narrowed["scope"] == "openid email"
    assert shared_stub.access_token_info(narrowed["access_token"]) == {
        "sub": "1001",
        "scope": "openid email",
        "audience": resource,
        "expires_at": pytest.approx(time.time() + 3600, abs=10),
        "acr": "urn:stub:acr:pwd",  # the first acr the stub offers: none was asked for
        "active": True,
    }
    assert flow.userinfo(narrowed["access_token"]).json() == {
        "sub": "1001",
        "email": "alice@example.com",
        "email_verified": True,
    }
    # The new refresh token kept the whole scope (RFC 6749 section 6): profile is still in it.
    response = flow.refresh(narrowed["refresh_token"], scope="openid profile")
    assert response.status_code == 200, response.text
    other = response.json()
    assert other["scope"] == "openid profile"
    other_info = shared_stub.access_token_info(other["access_token"])
    assert other_info is not None and other_info["audience"] is None
    full = flow.refresh(other["refresh_token"]).json()
    assert full["scope"] == "openid profile email"
    assert shared_stub.access_token_info(full["access_token"]) == {
        "sub": "1001",
        "scope": "openid profile email",
        "audience": None,
        "expires_at": pytest.approx(time.time() + 3600, abs=10),
        "acr": "urn:stub:acr:pwd",  # the first acr the stub offers: none was asked for
        "active": True,
    }


def test_a_refresh_beyond_the_grant_or_with_a_bad_resource_is_refused(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    refresh_token = flow.sign_in("openid email")["refresh_token"]
    for scope in ("openid profile", "openid email offline_access", "openid admin"):
        wider = flow.refresh(refresh_token, scope=scope)
        assert (wider.status_code, wider.json()["error"]) == (400, "invalid_scope"), scope
    for resource in (
        "/v1",
        "api.example",
        "https://api.example/v1#part",
        "https://api example/",
        "",
        ["https://a.example/", "https://b.example/"],
    ):
        refused = flow.refresh(refresh_token, resource=resource)
        assert (refused.status_code, refused.json()["error"]) == (400, "invalid_target"), resource
    assert flow.refresh(refresh_token, scope="openid").status_code == 200  # nothing used it up


def test_access_token_info_follows_revocation_and_knows_only_access_tokens(
    shared_stub: StubProvider, http: httpx2.Client
) -> None:
    flow = Flow(http, shared_stub.issuer)
    tokens = flow.sign_in()
    assert shared_stub.access_token_info("never-issued") is None
    assert shared_stub.access_token_info(tokens["refresh_token"]) is None
    info = shared_stub.access_token_info(tokens["access_token"])
    assert info is not None and info["active"] is True and info["sub"] == "1001"
    http.post(
        flow.metadata["revocation_endpoint"],
        data={"token": tokens["access_token"], "client_id": CLIENT_ID},
    )
    assert shared_stub.access_token_info(tokens["access_token"]) == {**info, "active": False}


def test_refresh_token_ttl_expires_refresh_tokens_only(http: httpx2.Client) -> None:
    with pytest.raises(ValueError, match="refresh_token_ttl"):
        StubProvider(refresh_token_ttl=0)
    with StubProvider(refresh_token_ttl=1) as stub:
        flow = Flow(http, stub.issuer)
        first, second = flow.sign_in(), flow.sign_in()
        rotated = flow.refresh(first["refresh_token"])
        assert rotated.status_code == 200
        last_issued = time.monotonic()
        stub.refresh_token_ttl = None
        lasting = flow.sign_in()
        time.sleep(max(0.0, last_issued + 1.05 - time.monotonic()))
        for expired in (second["refresh_token"], rotated.json()["refresh_token"]):
            refused = flow.refresh(expired)
            assert (refused.status_code, refused.json()["error"]) == (400, "invalid_grant")
        assert flow.userinfo(second["access_token"]).status_code == 200
        assert flow.refresh(lasting["refresh_token"]).status_code == 200


def test_the_device_flow_gives_the_approver_tokens_once(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    two_users.device_interval = 0  # read at each issue, so no poll here is too fast
    flow = Flow(http, two_users.issuer)
    response = flow.device_authorization()
    assert response.headers["cache-control"] == "no-store"
    grant = response.json()
    assert USER_CODE.fullmatch(grant["user_code"]), grant
    assert grant["verification_uri"] == two_users.base_url + "/device"
    assert grant["verification_uri_complete"] == (
        f"{two_users.base_url}/device?user_code={grant['user_code']}"
    )
    assert (grant["expires_in"], grant["interval"]) == (600, 0)
    assert len(grant["device_code"]) >= 32
    assert refusal(flow.poll(grant["device_code"])) == (400, "authorization_pending")
    two_users.approve_device(grant["user_code"], "2002")
    response = flow.poll(grant["device_code"])
    assert response.status_code == 200, response.text
    tokens = response.json()
    assert (tokens["token_type"], tokens["expires_in"]) == ("Bearer", 3600)
    assert tokens["scope"] == "openid profile email"
    assert tokens["access_token"] and tokens["refresh_token"]
    assert jwt.get_unverified_header(tokens["id_token"])["kid"] == two_users.signing_kid
    claims = flow.id_token_claims(tokens["id_token"])
    assert (claims["iss"], claims["aud"], claims["sub"]) == (two_users.issuer, CLIENT_ID, "2002")
    assert claims["name"] == "Bob Example" and claims["email"] == "bob@example.com"
    assert {"exp", "iat", "auth_time", "at_hash"} <= claims.keys()
    assert "nonce" not in claims and "workspace_id" not in claims
    assert claims["auth_time"] == pytest.approx(time.time(), abs=10)
    assert flow.userinfo(tokens["access_token"]).json()["sub"] == "2002"
    assert refusal(flow.poll(grant["device_code"])) == (400, "invalid_grant")  # redeemed once
    refreshed = flow.refresh(tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    assert refusal(flow.refresh(tokens["refresh_token"])) == (400, "invalid_grant")  # rotated
    assert len(two_users.device_polls(grant["user_code"])) == 3
    assert two_users.device_polls_too_fast(grant["user_code"]) == 0
    assert len(two_users.token_requests(DEVICE_GRANT)) == 3


def test_the_verification_page_approves_or_denies_as_the_user_chooses(
    http: httpx2.Client,
) -> None:
    users = [StubUser("1001", "Alice Example"), BOB]
    with StubProvider(users=users, auto_approve=None, device_interval=0) as stub:
        flow = Flow(http, stub.issuer)
        grant = flow.start_device()
        page = http.get(grant["verification_uri_complete"])
        action, user_code = device_form(page)
        assert (action, user_code) == ("/device", grant["user_code"])
        assert "Sign in as Alice Example" in page.text and "Sign in as Bob Example" in page.text
        assert ">Deny</button>" in page.text
        assert refusal(flow.poll(grant["device_code"])) == (400, "authorization_pending")
        typed = user_code.lower().replace("-", "")  # case and dash do not matter
        approved = http.post(stub.base_url + action, data={"user_code": typed, "sub": "2002"})
        assert approved.status_code == 200 and "Signed in as Bob Example" in approved.text
        tokens = flow.poll(grant["device_code"]).json()
        assert flow.id_token_claims(tokens["id_token"])["sub"] == "2002"
        again = http.post(stub.base_url + action, data={"user_code": user_code, "sub": "1001"})
        assert again.status_code == 400 and "already" in again.text

        assert device_form(http.get(grant["verification_uri"]))[1] == ""  # a blank form
        other = flow.start_device()
        denied = http.post(
            stub.base_url + action, data={"user_code": other["user_code"], "deny": "1"}
        )
        assert denied.status_code == 200 and "Device sign-in denied" in denied.text
        assert refusal(flow.poll(other["device_code"])) == (400, "access_denied")
        for data in ({"user_code": "BCDF-GHJK", "sub": "1001"}, {"user_code": "", "deny": "1"}):
            unknown = http.post(stub.base_url + action, data=data)
            assert unknown.status_code == 400 and "Unknown code" in unknown.text
        third = flow.start_device()
        nobody = http.post(
            stub.base_url + action, data={"user_code": third["user_code"], "sub": "9"}
        )
        assert nobody.status_code == 400 and "Unknown user" in nobody.text
        assert refusal(flow.poll(third["device_code"])) == (400, "authorization_pending")


def test_auto_approve_completes_a_device_sign_in_at_its_complete_uri(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    two_users.device_interval = 0
    two_users.approve_as("2002")
    flow = Flow(http, two_users.issuer)
    grant = flow.start_device()
    device_form(http.get(grant["verification_uri"]))  # without the code, the page asks
    assert refusal(flow.poll(grant["device_code"])) == (400, "authorization_pending")
    page = http.get(grant["verification_uri_complete"])
    assert page.status_code == 200 and "Signed in as Bob Example" in page.text
    tokens = flow.poll(grant["device_code"]).json()
    assert flow.id_token_claims(tokens["id_token"])["sub"] == "2002"
    two_users.approve_as(None)
    pending = flow.start_device()
    device_form(http.get(pending["verification_uri_complete"]))  # nobody is approved: it asks
    with pytest.raises(ValueError, match="nobody to approve as"):
        two_users.approve_device(pending["user_code"])
    two_users.approve_device(pending["user_code"], "1001")
    tokens = flow.poll(pending["device_code"]).json()
    assert flow.id_token_claims(tokens["id_token"])["sub"] == "1001"


def test_a_denied_device_code_gets_access_denied(stub: StubProvider, http: httpx2.Client) -> None:
    stub.device_interval = 0
    flow = Flow(http, stub.issuer)
    grant = flow.start_device()
    stub.deny_device(grant["user_code"])
    for _ in range(2):
        assert refusal(flow.poll(grant["device_code"])) == (400, "access_denied")
    with pytest.raises(ValueError, match="is denied, no longer pending"):
        stub.approve_device(grant["user_code"])
    with pytest.raises(ValueError, match="names none of the users"):
        stub.approve_device(flow.start_device()["user_code"], "9999")


def test_revoking_a_user_denies_a_device_code_approved_but_not_redeemed(
    stub: StubProvider, http: httpx2.Client
) -> None:
    stub.device_interval = 0
    flow = Flow(http, stub.issuer)
    grant = flow.start_device()
    stub.approve_device(grant["user_code"])
    assert stub.revoke_user("1001") == 0
    assert refusal(flow.poll(grant["device_code"])) == (400, "access_denied")


def test_an_expired_device_code_gets_expired_token(stub: StubProvider, http: httpx2.Client) -> None:
    stub.device_interval, stub.device_code_ttl = 0, 30
    flow = Flow(http, stub.issuer)
    grant = flow.start_device()
    assert grant["expires_in"] == 30
    approved = flow.start_device()
    stub.approve_device(approved["user_code"])
    for user_code in (grant["user_code"], approved["user_code"]):
        stub.expire_device_code(user_code)
    for device_code in (grant["device_code"], approved["device_code"]):
        assert refusal(flow.poll(device_code)) == (400, "expired_token")
    with pytest.raises(ValueError, match="is expired, no longer pending"):
        stub.approve_device(grant["user_code"])
    page = http.get(grant["verification_uri_complete"])  # the stub auto-approves: too late
    assert page.status_code == 400 and "already" in page.text
    with pytest.raises(ValueError, match="device_code_ttl"):
        StubProvider(device_code_ttl=0)
    with pytest.raises(ValueError, match="device_interval"):
        StubProvider(device_interval=-1)


def test_polling_faster_than_the_interval_is_told_to_slow_down_by_five_seconds(
    http: httpx2.Client,
) -> None:
    with StubProvider(device_interval=1) as stub:
        flow = Flow(http, stub.issuer)
        grant = flow.start_device()
        assert grant["interval"] == 1
        device_code, user_code = grant["device_code"], grant["user_code"]
        assert refusal(flow.poll(device_code)) == (400, "authorization_pending")
        time.sleep(1.05)
        assert refusal(flow.poll(device_code)) == (400, "authorization_pending")  # on time
        assert stub.device_polls_too_fast(user_code) == 0
        assert refusal(flow.poll(device_code)) == (400, "slow_down")  # at once: too fast
        assert stub.device_polls_too_fast(user_code) == 1
        time.sleep(1.05)  # enough before, but the interval is 6 s now
        assert refusal(flow.poll(device_code)) == (400, "slow_down")
        assert stub.device_polls_too_fast(user_code) == 2
        stub.approve_device(user_code)
        response = flow.poll(device_code)  # too fast again, but an approval is not held back
        assert response.status_code == 200, response.text
        polls = stub.device_polls(user_code)
        assert len(polls) == 5 and polls == sorted(polls)
        assert polls[1] - polls[0] >= 1 and polls[3] - polls[2] >= 1
        assert stub.device_polls_too_fast(user_code) == 3


def test_slow_down_next_poll_slows_down_a_poll_that_came_on_time(
    stub: StubProvider, http: httpx2.Client
) -> None:
    stub.device_interval = 0
    flow = Flow(http, stub.issuer)
    grant = flow.start_device()
    device_code, user_code = grant["device_code"], grant["user_code"]
    stub.slow_down_next_poll(user_code)
    assert refusal(flow.poll(device_code)) == (400, "slow_down")
    assert stub.device_polls_too_fast(user_code) == 0  # it came on time
    stub.approve_device(user_code)
    stub.slow_down_next_poll(user_code)
    assert refusal(flow.poll(device_code)) == (400, "slow_down")  # the approval waits
    assert flow.poll(device_code).status_code == 200
    assert len(stub.device_polls(user_code)) == 3
    assert stub.device_polls_too_fast(user_code) == 2  # the interval was 5 s, then 10 s


def test_device_knobs_refuse_an_unknown_user_code(shared_stub: StubProvider) -> None:
    knobs: list[Callable[[str], object]] = [
        shared_stub.approve_device,
        shared_stub.deny_device,
        shared_stub.expire_device_code,
        shared_stub.slow_down_next_poll,
        shared_stub.device_polls,
        shared_stub.device_polls_too_fast,
    ]
    for knob in knobs:
        with pytest.raises(KeyError, match="no device authorization has the user code 'BCDF-GHJK'"):
            knob("BCDF-GHJK")


def test_bad_device_requests_are_refused(http: httpx2.Client) -> None:
    other = StubClient("other-app", ["http://127.0.0.1/cb"])
    with StubProvider(clients=[StubClient(CLIENT_ID, [REDIRECT_URI]), other]) as stub:
        flow = Flow(http, stub.issuer)
        endpoint = flow.metadata["device_authorization_endpoint"]
        assert refusal(http.post(endpoint, data={"client_id": "nobody"})) == (400, "invalid_client")
        assert refusal(http.post(endpoint, data={})) == (400, "invalid_client")
        assert refusal(flow.device_authorization("openid admin")) == (400, "invalid_scope")
        malformed = flow.device_authorization(workspace_id="abc")
        assert refusal(malformed) == (400, "invalid_request")
        assert "workspace_id" in malformed.json()["error_description"]
        grant = flow.start_device(scope="")
        stub.approve_device(grant["user_code"])
        assert refusal(flow.poll("never-issued")) == (400, "invalid_grant")
        assert refusal(flow.poll(grant["device_code"], "other-app")) == (400, "invalid_grant")
        missing = http.post(
            flow.metadata["token_endpoint"],
            data={"grant_type": DEVICE_GRANT, "client_id": CLIENT_ID},
        )
        assert refusal(missing) == (400, "invalid_request")
        stub.fail_token_endpoint(status=503)
        assert refusal(flow.poll(grant["device_code"])) == (503, "server_error")
        assert stub.device_polls(grant["user_code"]) == []  # refused before the grant saw it
        tokens = flow.poll(grant["device_code"]).json()
        assert tokens["scope"] == "openid"  # what an empty scope means, as in the code flow
        assert flow.id_token_claims(tokens["id_token"])["sub"] == "1001"


def test_a_device_sign_in_into_a_workspace_keeps_it_and_refuses_non_members(
    two_users: StubProvider, http: httpx2.Client
) -> None:
    two_users.device_interval = 0
    flow = Flow(http, two_users.issuer)
    grant = flow.start_device(workspace_id="42")
    two_users.approve_device(grant["user_code"])
    tokens = flow.poll(grant["device_code"]).json()
    claims = flow.id_token_claims(tokens["id_token"])
    assert (claims["sub"], claims["workspace_id"]) == ("1001", "42")
    assert flow.userinfo(tokens["access_token"]).json()["workspace_id"] == "42"
    refreshed = flow.refresh(tokens["refresh_token"]).json()
    assert flow.userinfo(refreshed["access_token"]).json()["workspace_id"] == "42"
    for sub, workspace_id in (("2002", "42"), ("1001", "99")):
        refused = flow.start_device(workspace_id=workspace_id)
        two_users.approve_device(refused["user_code"], sub)  # refused, as the page would
        assert refusal(flow.poll(refused["device_code"])) == (400, "access_denied")
    two_users.approve_as("2002")
    page_refused = flow.start_device(workspace_id="7")
    page = http.get(page_refused["verification_uri_complete"])
    assert page.status_code == 200 and "Bob Example is not a member" in page.text
    assert refusal(flow.poll(page_refused["device_code"])) == (400, "access_denied")
