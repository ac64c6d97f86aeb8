"""Contract table 5.3 on the web surface: T1-T8 and N1-N4 against the real daemon and stub.

Every "Then" item of the table is asserted. The daemon runs with deterministic sign-in
values (contract 5.3 c), so the state and PKCE challenge it must send are known here.
"""

from __future__ import annotations

import re
import time
from urllib.parse import urlsplit

import httpx2
import pytest
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from signin_broker.client import BrokerClient
from signin_broker.session.signin import DeterministicSecrets
from signin_broker.testing import StubProvider
from signin_broker.testing.browser import Browser, location, query_of
from signin_broker.testing.daemon import DaemonProcess
from support.signin import CALLBACK, sign_in

BEGIN = "/auth/oauth2/id-provider"


def assert_session_cookie_set(response: httpx2.Response) -> None:
    """Contract 2.8: Path=/, Secure, HttpOnly, SameSite=Lax."""
    cookies = response.headers.get_list("set-cookie")
    assert len(cookies) == 1, cookies
    attributes = {part.strip().lower() for part in cookies[0].split(";")[1:]}
    assert {"path=/", "secure", "httponly", "samesite=lax"} <= attributes, cookies[0]


def assert_no_cookie(response: httpx2.Response) -> None:
    assert response.headers.get_list("set-cookie") == []


def oauth_records(daemon: DaemonProcess, **fields: object) -> list[dict]:
    return daemon.logs_with(flow="oauth", **fields)


# -- T1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("start", [BEGIN, "/user/login"])
def test_T1_begin_redirects_to_the_authorize_endpoint_with_pkce_and_state(
    broker: DaemonProcess,
    stub: StubProvider,
    browser: Browser,
    expected: DeterministicSecrets,
    start: str,
) -> None:
    response = browser.follow(browser.get(broker.web_url + start), until=stub.base_url)
    assert response.status_code in (302, 303, 307)
    target = location(response)
    parts = urlsplit(target)
    assert parts.netloc == urlsplit(stub.issuer).netloc  # rule 3: the provider's host
    assert parts.path == "/oauth/v2/authorize"
    query = query_of(target)
    assert query["client_id"] == "signin-broker"
    assert query["redirect_uri"] == broker.web_url + CALLBACK  # rule 2, slug id-provider
    assert query["response_type"] == "code"
    assert "scope=openid+profile+email" in parts.query  # joined by +
    assert set(query["scope"].split()) >= {"openid", "profile", "email"}
    state, nonce, verifier = expected.state(), expected.nonce(), expected.code_verifier()
    assert query["state"] == state and len(state) >= 16
    assert query["nonce"] == nonce
    assert query["code_challenge"] == create_s256_code_challenge(verifier)
    assert query["code_challenge_method"] == "S256"


@pytest.mark.parametrize(
    "path", ["/auth/oauth2/ID-Provider", "/auth/oauth2/idprovider", "/auth/oauth2/id_provider"]
)
def test_T1_slug_is_exactly_id_provider(broker: DaemonProcess, browser: Browser, path: str) -> None:
    assert browser.get(broker.web_url + path).status_code == 404


# -- T2, T4, T6 -------------------------------------------------------------------------


def test_T2_callback_exchanges_the_code_validates_the_id_token_and_sets_the_cookie(
    broker: DaemonProcess, stub: StubProvider, browser: Browser, expected: DeterministicSecrets
) -> None:
    callback = sign_in(browser, broker)
    state, _nonce, verifier = expected.state(), expected.nonce(), expected.code_verifier()
    (token_post,) = stub.token_requests("authorization_code")
    assert token_post.method == "POST"
    assert token_post.params["client_id"] == "signin-broker"
    assert token_post.params["redirect_uri"] == broker.web_url + CALLBACK
    assert token_post.params["code_verifier"] == verifier
    assert token_post.params["code"]
    assert query_of(str(browser.history[-1].url))["state"] == state
    # The id_token was checked against the stub's published keys.
    assert any(r.path == "/.well-known/jwks.json" for r in stub.requests if r.at >= token_post.at)
    assert callback.status_code in (302, 303)
    assert_session_cookie_set(callback)
    assert location(callback) == "/dashboard"  # the authenticated home, not the landing
    later = browser.get(broker.web_url + "/dashboard")
    assert later.status_code == 200
    assert "Alice Example" in later.text and "alice@example.com" in later.text


def test_T4_authenticated_route_serves_the_user_without_oauth(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    authorizations = len([r for r in stub.requests if r.path == "/oauth/v2/authorize"])
    response = browser.get(broker.web_url + "/dashboard")
    assert response.status_code == 200
    assert 'data-user="user:1001"' in response.text
    assert "Signed in as Alice Example" in response.text
    assert len([r for r in stub.requests if r.path == "/oauth/v2/authorize"]) == authorizations


def test_T6_root_is_the_landing_when_anonymous_and_never_when_signed_in(
    broker: DaemonProcess, browser: Browser
) -> None:
    anonymous = browser.get(broker.web_url + "/")
    assert anonymous.status_code == 200
    assert 'data-cta="sign-in"' in anonymous.text
    assert "alice" not in anonymous.text.lower()  # no user data on the landing
    sign_in(browser, broker)
    signed_in = browser.get(broker.web_url + "/")
    assert signed_in.status_code == 302
    assert location(signed_in) == "/dashboard"
    dashboard = browser.follow(signed_in)
    assert 'data-cta="sign-in"' not in dashboard.text  # rule 8
    assert "Alice Example" in dashboard.text


# -- T3, N3 -----------------------------------------------------------------------------


def assert_failed_callback_like_T3(daemon: DaemonProcess, response: httpx2.Response) -> None:
    assert response.status_code == 200  # a user-facing page
    assert "Sign-in failed" in response.text
    assert "did not accept the sign-in code" in response.text
    assert_no_cookie(response)
    daemon.expect_log(flow="oauth", step="token_exchange", error_code="invalid_code")
    assert daemon.alive


def test_T3_failed_token_exchange_gives_an_error_page_no_cookie_and_a_log_record(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    stub.fail_token_endpoint(status=400, error="invalid_grant")
    response = sign_in(browser, broker)
    assert_failed_callback_like_T3(broker, response)
    assert browser.get(broker.web_url + "/dashboard").status_code == 302  # still anonymous


def test_N3_a_redeemed_code_posted_again_is_invalid_grant_and_handled_like_T3(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    (first,) = stub.token_requests("authorization_code")
    used_code = first.params["code"]
    # At the provider: the second redemption is refused.
    again = httpx2.post(stub.issuer + "/oauth/v2/token", data=first.params)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    # At the component: a fresh sign-in whose callback carries the used code.
    other = Browser()
    to_provider = other.follow(other.get(broker.web_url + BEGIN), until=stub.base_url)
    state = query_of(location(to_provider))["state"]
    response = other.get(f"{broker.web_url}{CALLBACK}?code={used_code}&state={state}")
    assert_failed_callback_like_T3(broker, response)
    other.close()


# -- T5 ---------------------------------------------------------------------------------


def test_T5_logout_clears_the_cookie_and_sends_the_browser_to_the_provider(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    old_cookie = dict(browser.cookies[urlsplit(broker.web_url).netloc])
    response = browser.post(broker.web_url + "/logout", headers={"Origin": broker.web_url})
    assert response.status_code in (302, 303)
    cleared = response.headers.get_list("set-cookie")
    assert len(cleared) == 1 and "max-age=0" in cleared[0].lower()
    target = location(response)
    assert target.startswith(stub.base_url + "/logout")
    assert query_of(target)["post_logout_redirect_uri"] == broker.web_url + "/"
    back = browser.follow(browser.get(target))  # the provider sends the browser home
    assert 'data-cta="sign-in"' in back.text
    # The next authenticated request, even with the old cookie, goes to the OAuth flow.
    replay = httpx2.get(
        broker.web_url + "/dashboard",
        headers={"Cookie": "; ".join(f"{k}={v}" for k, v in old_cookie.items())},
    )
    assert replay.status_code == 302
    assert location(replay).startswith(BEGIN + "?redirect_to=")


def test_T5_logout_by_get_only_asks_for_confirmation(
    broker: DaemonProcess, browser: Browser
) -> None:
    sign_in(browser, broker)
    page = browser.get(broker.web_url + "/logout")
    assert page.status_code == 200 and 'method="post"' in page.text
    assert browser.get(broker.web_url + "/dashboard").status_code == 200  # still signed in


def test_T5_logout_from_another_site_is_refused(broker: DaemonProcess, browser: Browser) -> None:
    sign_in(browser, broker)
    forged = browser.post(broker.web_url + "/logout", headers={"Origin": "https://evil.example"})
    assert forged.status_code == 403
    cross_site = browser.post(broker.web_url + "/logout", headers={"Sec-Fetch-Site": "cross-site"})
    assert cross_site.status_code == 403
    assert browser.get(broker.web_url + "/dashboard").status_code == 200


# -- T7, N4 -----------------------------------------------------------------------------


def test_T7_deep_link_survives_the_round_trip(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    deep = "/dashboard?tab=apps&q=a%20b"
    first = browser.get(broker.web_url + deep)
    assert first.status_code == 302
    assert query_of(location(first))["redirect_to"] == deep
    to_provider = browser.follow(first, until=stub.base_url)
    state = query_of(location(to_provider))["state"]
    to_callback = browser.follow(
        browser.get(location(to_provider)), until=broker.web_url + CALLBACK
    )
    assert query_of(location(to_callback))["state"] == state  # state survives
    final = browser.get(location(to_callback))
    assert_session_cookie_set(final)
    assert location(final) == deep


@pytest.mark.parametrize(
    "redirect_to",
    [
        "https://evil.example/steal",
        "//evil.example/steal",
        "/\\evil.example",
        "http://127.0.0.1:1/elsewhere",
        "javascript:alert(1)",
        "dashboard",
    ],
)
def test_N4_off_origin_redirect_to_falls_back_to_the_authenticated_home(
    broker: DaemonProcess, browser: Browser, redirect_to: str
) -> None:
    from urllib.parse import quote

    final = sign_in(browser, broker, start=f"{BEGIN}?redirect_to={quote(redirect_to, safe='')}")
    assert_session_cookie_set(final)
    assert location(final) == "/dashboard"


def test_T7_off_origin_redirect_to_in_a_deep_link_flow_lands_home(
    broker: DaemonProcess, browser: Browser
) -> None:
    final = sign_in(browser, broker, start="/user/login?redirect_to=https%3A%2F%2Fevil.example")
    assert location(final) == "/dashboard"


# -- T8 ---------------------------------------------------------------------------------


def test_T8_request_at_50s_of_a_60s_token_refreshes_exactly_once_without_reauth(
    stub: StubProvider, socket_path, browser: Browser
) -> None:
    stub.access_token_ttl = 60
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as broker:
        sign_in(browser, broker)
        (issue,) = stub.token_requests("authorization_code")
        with BrokerClient(socket_path) as app:
            first = app.get_token()
            assert 55 <= first.seconds_left() <= 60
            time.sleep(max(0.0, issue.at + 50 - time.time()))  # the request at 50 s
            served = app.get_token()
            assert served.access_token != first.access_token  # the new token is stored and used
            # Renewed by the request at 50 s, or before it by the daemon's background
            # renewal (at 75 % of the lifetime, less up to 15 % of jitter).
            assert served.expires_at_unix >= first.expires_at_unix + 30
            again = app.get_token()  # and kept: no second refresh
            assert again.access_token == served.access_token
        dashboard = browser.get(broker.web_url + "/dashboard")
        assert dashboard.status_code == 200  # no re-authentication prompt
    refreshes = stub.token_requests("refresh_token")
    assert len(refreshes) == 1
    assert len([r for r in stub.requests if r.path == "/oauth/v2/authorize"]) == 1


# -- N1, N2 -----------------------------------------------------------------------------


def test_N1_forged_callback_with_a_valid_code_but_another_state_is_refused(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    to_callback = browser.follow(
        browser.get(broker.web_url + BEGIN), until=broker.web_url + CALLBACK
    )
    code = query_of(location(to_callback))["code"]
    forged = browser.get(f"{broker.web_url}{CALLBACK}?code={code}&state=forged-state-0123456789")
    assert forged.status_code == 200 and "Sign-in failed" in forged.text
    assert_no_cookie(forged)
    assert stub.token_requests() == []  # the code was never redeemed
    (record,) = broker.expect_log(flow="oauth", error_code="state_mismatch")
    assert record["severity"] == "warn"
    assert browser.get(broker.web_url + "/dashboard").status_code == 302


def test_N2_an_off_origin_redirect_uri_gets_no_code(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    to_provider = browser.follow(browser.get(broker.web_url + BEGIN), until=stub.base_url)
    tampered = re.sub(
        r"redirect_uri=[^&]+",
        "redirect_uri=https%3A%2F%2Fevil.example%2Fcallback",
        location(to_provider),
    )
    response = browser.get(tampered)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    assert "location" not in response.headers  # no code delivered anywhere
    assert oauth_records(broker, step="callback") == []
    assert not any(r.path == CALLBACK for r in stub.requests)
