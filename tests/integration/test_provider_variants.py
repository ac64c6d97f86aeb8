"""Providers that behave like real ones, signed in to through the daemon and a scripted browser.

An issuer ending in `/` (Auth0), RFC 9207's `iss` in the authorization response,
revocation listed only in RFC 8414 metadata below a path (django-oauth-toolkit), and
a refresh token issued only for offline_access with prompt=consent (panva oidc-provider).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx2
import pytest

from signin_broker.client import BrokerClient, SignInState
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.signin import CALLBACK, sign_in

OFFLINE_SCOPES = "openid profile email offline_access"
NO_REFRESH = "the provider issued no refresh token: sign in again when the token expires"


@pytest.fixture
def browser_() -> Iterator[Browser]:
    with Browser() as browser:
        yield browser


def _callback(browser: Browser, daemon: DaemonProcess) -> str:
    """Go through the provider; the callback address it sent the browser to, not yet opened."""
    response = browser.follow(
        browser.get(daemon.web_url + "/user/login"), until=daemon.web_url + CALLBACK
    )
    return location(response)


def _with_iss(url: str, iss: str | None) -> str:
    """The URL with its iss parameter replaced, or removed when None."""
    parts = urlsplit(url)
    params = [(k, v) for k, v in parse_qsl(parts.query) if k != "iss"]
    params += [] if iss is None else [("iss", iss)]
    return parts._replace(query=urlencode(params)).geturl()


@pytest.mark.parametrize("issuer_path", ["/", "/tenant/"])
def test_an_issuer_ending_in_a_slash_signs_in(socket_path: Path, issuer_path: str) -> None:
    with (
        StubProvider(issuer_path=issuer_path) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
        Browser() as browser,
    ):
        assert stub.issuer.endswith("/")
        assert location(sign_in(browser, daemon)) == "/dashboard"
        with BrokerClient(socket_path) as client:
            assert client.status().issuer == stub.issuer
            assert stub.access_token_info(client.get_token().access_token)


def test_a_provider_with_rfc9207_signs_in_and_its_iss_is_checked(
    socket_path: Path, browser_: Browser
) -> None:
    with (
        StubProvider(iss_parameter=True) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
    ):
        callback = _callback(browser_, daemon)
        assert dict(parse_qsl(urlsplit(callback).query))["iss"] == stub.issuer
        assert location(browser_.get(callback)) == "/dashboard"
        with BrokerClient(socket_path) as client:
            assert client.status().sign_in_state is SignInState.SIGNED_IN


@pytest.mark.parametrize("iss", [None, "http://127.0.0.1:1/attacker"])
def test_a_callback_with_a_missing_or_other_iss_is_refused(
    socket_path: Path, browser_: Browser, iss: str | None
) -> None:
    with (
        StubProvider(iss_parameter=True) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
    ):
        answer = browser_.get(_with_iss(_callback(browser_, daemon), iss))
        assert answer.status_code == 200
        assert "does not come from the identity provider" in answer.text
        assert answer.headers.get_list("set-cookie") == []
        daemon.expect_log(flow="oauth", error_code="iss_mismatch")
        assert not stub.token_requests("authorization_code")  # the code was never redeemed
        with BrokerClient(socket_path) as client:
            assert client.status().sign_in_state is SignInState.SIGNED_OUT


def test_revocation_listed_only_in_rfc8414_metadata_is_used(
    socket_path: Path, browser_: Browser
) -> None:
    with (
        StubProvider(
            issuer_path="/o", oauth_metadata="appended", oauth_metadata_only=["revocation_endpoint"]
        ) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
    ):
        assert "revocation_endpoint" not in httpx2.get(stub.discovery_url).json()
        sign_in(browser_, daemon)
        with BrokerClient(socket_path) as client:
            token = client.get_token().access_token
            client.sign_out()
        revoked = [r.params for r in stub.requests if r.path == stub.paths.revocation]
        assert {params.get("token_type_hint") for params in revoked} == {
            "refresh_token",
            "access_token",
        }
        assert (stub.access_token_info(token) or {}).get("active") is False


def test_offline_access_is_asked_with_consent_so_a_refresh_token_comes(
    socket_path: Path, browser_: Browser
) -> None:
    with (
        StubProvider(offline_access_needs_consent=True) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer, "--scopes", OFFLINE_SCOPES) as daemon,
    ):
        sign_in(browser_, daemon)
        (authorize,) = [r for r in stub.requests if r.path == stub.paths.authorize]
        assert authorize.params["prompt"] == "consent"
        with BrokerClient(socket_path) as client:
            assert client.status().default.next_refresh_unix > 0
        assert not daemon.logs_with(msg=NO_REFRESH)


def test_a_provider_that_issues_no_refresh_token_is_said_to_in_status_and_log(
    socket_path: Path, browser_: Browser
) -> None:
    with (
        StubProvider(offline_access_needs_consent=True) as stub,  # offline_access not asked
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
    ):
        sign_in(browser_, daemon)
        daemon.expect_log(msg=NO_REFRESH, account="user:1001")
        with BrokerClient(socket_path) as client:
            assert client.status().default.next_refresh_unix == 0
        shown = signin_broker("--socket", str(socket_path), "status")
        assert shown.returncode == 0, shown.stderr
        assert "none: the provider issued no refresh token" in shown.stdout
