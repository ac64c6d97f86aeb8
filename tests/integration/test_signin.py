"""Browser sign-in beyond the contract table: bad callbacks, guards, other providers, apps, CLI."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from signin_broker.client import BrokerClient, BrokerError, EventKind, NotSignedIn, SignInState
from signin_broker_testing import StubPaths, StubProvider
from signin_broker_testing.browser import Browser, location, query_of
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.other_user import other_user, run_as
from support.signin import (
    BEGIN,
    CALLBACK,
    cli_login,
    login_through_the_cli,
    sign_in,
    signed_in_daemon,
)


def begun_state(browser: Browser, daemon: DaemonProcess, stub: StubProvider) -> str:
    """Begin a sign-in and stop before the provider; returns its state."""
    to_provider = browser.follow(browser.get(daemon.web_url + BEGIN), until=stub.base_url)
    return query_of(location(to_provider))["state"]


def assert_refused(daemon: DaemonProcess, response: httpx2.Response, error_code: str) -> None:
    assert response.status_code == 200
    assert "Sign-in failed" in response.text and error_code in response.text
    assert response.headers.get_list("set-cookie") == []
    daemon.expect_log(flow="oauth", error_code=error_code)
    assert daemon.alive
    with BrokerClient(daemon.socket_path) as client:
        assert client.status().sign_in_state is SignInState.SIGNED_OUT


@pytest.mark.parametrize(
    ("query", "error_code"),
    [
        ("code=abc", "state_mismatch"),  # no state
        ("code=abc&state=", "state_mismatch"),
        ("state=STATE", "invalid_request"),  # no code
        ("code=abc&state=STATE" + "x" * 5000, "invalid_request"),  # oversized
        ("code=" + "c" * 5000 + "&state=STATE", "invalid_request"),
    ],
)
def test_bad_callbacks_get_a_page_no_cookie_and_a_log_record(
    broker: DaemonProcess, stub: StubProvider, browser: Browser, query: str, error_code: str
) -> None:
    state = begun_state(browser, broker, stub)
    response = browser.get(f"{broker.web_url}{CALLBACK}?{query.replace('STATE', state)}")
    assert_refused(broker, response, error_code)


def test_provider_declining_gives_a_page_and_an_event(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    stub.deny_next_authorization()
    with BrokerClient(broker.socket_path) as client:
        events = client.watch_events(timeout=20)
        next(events)
        response = sign_in(browser, broker)
        assert_refused(broker, response, "access_denied")
        failed = next(events)
    assert failed.kind is EventKind.SIGN_IN_FAILED
    assert "declined" in failed.detail


def test_the_providers_error_description_arrives_as_printable_text_only(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    """It reaches the page and the event, but no control character (a log or terminal
    escape) and no more than 200 characters of it."""
    state = begun_state(browser, broker, stub)
    said = "Not a member of workspace 7\n\x1b[2Jforged line\r" + "x" * 500
    with BrokerClient(broker.socket_path) as client:
        events = client.watch_events(timeout=20)
        next(events)
        page = browser.get(
            broker.web_url + CALLBACK,
            params={"state": state, "error": "access_denied", "error_description": said},
        )
        failed = next(events)
    assert failed.kind is EventKind.SIGN_IN_FAILED
    assert "Not a member of workspace 7" in failed.detail and "forged line" in failed.detail
    assert not any(c in failed.detail for c in "\n\r\x1b")
    assert failed.detail.count("x") <= 200
    assert "Not a member of workspace 7" in page.text and "\x1b" not in page.text


def test_a_replayed_callback_is_refused(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    replay = browser.history[-1].url  # the callback that succeeded
    other = Browser()
    response = other.get(str(replay))
    other.close()
    assert response.status_code == 200 and "state_mismatch" in response.text
    assert response.headers.get_list("set-cookie") == []
    assert len(stub.token_requests("authorization_code")) == 1


def test_wrong_host_header_is_refused_and_localhost_is_redirected(
    broker: DaemonProcess,
) -> None:
    port = urlsplit(broker.web_url).port
    rebound = httpx2.get(broker.web_url + "/", headers={"Host": f"evil.example:{port}"})
    assert rebound.status_code == 421
    local = httpx2.get(broker.web_url + "/dashboard", headers={"Host": f"localhost:{port}"})
    assert local.status_code == 302
    assert location(local) == f"{broker.web_url}/dashboard"


def test_pages_carry_a_strict_content_security_policy(broker: DaemonProcess) -> None:
    response = httpx2.get(broker.web_url + "/")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"


def test_another_users_browser_is_refused(broker: DaemonProcess) -> None:
    user = other_user()
    assert run_as(user, broker.web_url + "/", "http-get") == {"status": 403}
    broker.expect_log(msg="refused a browser of another user")


def test_unknown_pages_are_404(broker: DaemonProcess) -> None:
    assert httpx2.get(broker.web_url + "/admin").status_code == 404


def test_second_app_gets_the_token_and_reaches_userinfo_as_the_same_user(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    """I3 in miniature; tests/conformance/test_isolation_cases.py runs it as another program."""
    sign_in(browser, broker)
    authorizations = [r for r in stub.requests if r.path == "/oauth/v2/authorize"]
    app = subprocess.run(
        [sys.executable, "-c", SECOND_APP, str(broker.socket_path), stub.issuer],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert app.returncode == 0, app.stderr
    assert json.loads(app.stdout) == {"sub": "1001", "name": "Alice Example"}
    assert [r for r in stub.requests if r.path == "/oauth/v2/authorize"] == authorizations


SECOND_APP = """
import json, sys, httpx2
from signin_broker import BrokerClient
socket_path, issuer = sys.argv[1:3]
with BrokerClient(socket_path) as broker:
    token = broker.get_token(min_ttl_seconds=60)
    assert token.account == "user:1001"
headers = {"Authorization": token.authorization}
claims = httpx2.get(issuer + "/oauth/v2/userinfo", headers=headers).json()
print(json.dumps({"sub": claims["sub"], "name": claims["name"]}))
"""


def test_sign_out_ends_the_session_here_and_at_the_provider(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    with BrokerClient(broker.socket_path) as client:
        token = client.get_token()
        result = client.sign_out()
        assert result.was_signed_in
        # A one-time link to the loopback page, which alone knows the id_token_hint.
        assert result.logout_url.startswith(broker.web_url + "/logout/provider?end=")
        provider_logout = location(browser.get(result.logout_url))
        assert provider_logout.startswith(stub.base_url + "/logout?")
        assert query_of(provider_logout)["post_logout_redirect_uri"] == broker.web_url + "/"
        with pytest.raises(NotSignedIn):
            client.get_token()
        assert not client.sign_out().was_signed_in
    revoked = {
        r.params.get("token_type_hint") for r in stub.requests if r.path == "/oauth/v2/revoke"
    }
    assert revoked == {"refresh_token", "access_token"}
    userinfo = httpx2.get(
        stub.issuer + "/oauth/v2/userinfo", headers={"Authorization": token.authorization}
    )
    assert userinfo.status_code == 401
    assert browser.get(broker.web_url + "/dashboard").status_code == 302


def test_sign_in_against_a_provider_known_only_by_its_issuer_url(
    socket_path: Path, browser: Browser
) -> None:
    """No stub-specific paths in the daemon: another layout, found through discovery."""
    paths = StubPaths(
        authorize="/realms/test/protocol/openid-connect/auth",
        token="/realms/test/protocol/openid-connect/token",
        userinfo="/realms/test/protocol/openid-connect/userinfo",
        jwks="/realms/test/protocol/openid-connect/certs",
        logout="/realms/test/protocol/openid-connect/logout",
        revocation="/realms/test/protocol/openid-connect/revoke",
    )
    with (
        StubProvider(paths=paths, issuer_path="/realms/test") as other,
        DaemonProcess(socket_path, "--issuer", other.issuer) as daemon,
    ):
        final = sign_in(browser, daemon)
        assert location(final) == "/dashboard"
        assert any(r.path == paths.authorize for r in other.requests)
        assert any(r.path == paths.token for r in other.requests)
        assert any(r.path == paths.jwks for r in other.requests)
        with BrokerClient(socket_path) as client:
            assert client.get_token().account == "user:1001"
            link = client.sign_out().logout_url
        assert location(browser.get(link)).startswith(other.base_url + paths.logout)


def test_a_provider_whose_discovery_names_another_issuer_is_refused(
    socket_path: Path, stub: StubProvider, browser: Browser
) -> None:
    lying_issuer = stub.issuer.replace("127.0.0.1", "localhost")
    with DaemonProcess(socket_path, "--issuer", lying_issuer) as daemon:
        response = browser.get(daemon.web_url + BEGIN)
        assert response.status_code == 502
        assert html.escape(f"names issuer {stub.issuer!r}, not {lying_issuer!r}") in response.text
        assert "network" not in response.text  # it answers: no connection to check
        daemon.expect_log(error_code="provider_misconfigured")


def test_an_issuer_set_with_a_trailing_slash_the_provider_lacks_is_named_on_page_and_cli(
    socket_path: Path, stub: StubProvider, browser: Browser
) -> None:
    """The page says what the CLI says: set issuer exactly as the provider states it."""
    fix = html.escape(f"set issuer to exactly {stub.issuer!r}")
    with DaemonProcess(socket_path, "--issuer", stub.issuer + "/"):
        login, url = cli_login(socket_path, "--wait", "30")
        page = browser.get(url)
        _, err = login.communicate(timeout=30)
    assert page.status_code == 502
    assert fix in page.text
    assert login.returncode == 1
    assert "sign-in failed: provider_misconfigured" in err
    assert html.unescape(fix) in err


def test_rotated_provider_keys_are_fetched_again(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    stub.rotate_keys(keep_previous=False)
    second = Browser()
    final = sign_in(second, broker)
    second.close()
    assert location(final) == "/dashboard"
    jwks_fetches = [r for r in stub.requests if r.path == "/.well-known/jwks.json"]
    assert len(jwks_fetches) == 2


def test_cli_login_opens_the_page_and_finishes_when_the_daemon_reports_the_session(
    broker: DaemonProcess, browser: Browser
) -> None:
    login, url = login_through_the_cli(broker, browser, "--json")
    out, err = login.communicate(timeout=30)
    assert login.returncode == 0, err
    event = json.loads(out)
    assert event["kind"] == "signed_in"
    assert event["account"] == "user:1001"
    assert event["sign_in_id"] == query_of(url)["sign_in"]


def test_cli_login_reports_a_failed_sign_in(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    stub.fail_token_endpoint(status=400, error="invalid_grant")
    login, _ = login_through_the_cli(broker, browser)
    _, err = login.communicate(timeout=30)
    assert login.returncode == 1
    assert "sign-in failed: invalid_code" in err


def test_cli_login_ends_at_once_when_the_page_cannot_reach_the_provider(
    stub: StubProvider, socket_path: Path, browser: Browser
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    stub.outage("stopped")
    try:
        login, url = cli_login(socket_path, "--wait", "120")
        page = browser.get(url)
        assert page.status_code == 503
        _, err = login.communicate(timeout=30)  # told by the daemon, not its 120 s wait
    finally:
        stub.outage(None)
    assert login.returncode == 1
    assert "sign-in failed: provider_unavailable" in err
    daemon.stop()


def test_status_after_a_sign_in_says_when_the_provider_last_answered(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    status = signin_broker("--socket", str(socket_path), "status")
    assert "last answered" in status.stdout and "not contacted yet" not in status.stdout
    daemon.stop()


def test_no_token_or_code_ever_appears_in_the_logs(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    stub.fail_token_endpoint(status=400, error="invalid_grant")
    sign_in(Browser(), broker)  # a failed one too
    with BrokerClient(broker.socket_path) as client:
        token = client.get_token()
        client.sign_out()
    broker.stop()
    secrets_seen = {token.access_token}
    for request in stub.requests:
        for name in ("code", "refresh_token", "access_token", "id_token", "token", "code_verifier"):
            if len(request.params.get(name, "")) >= 8:
                secrets_seen.add(request.params[name])
    log = broker.output()
    assert len(secrets_seen) >= 4
    for secret in secrets_seen:
        assert secret not in log


def test_status_reports_the_sign_in_page(broker: DaemonProcess) -> None:
    with BrokerClient(broker.socket_path) as client:
        status = client.status()
    assert status.web_url == broker.web_url + "/"
    assert status.issuer == broker.wait_for_log("ready")["issuer"]


def test_begin_sign_in_over_the_api_returns_the_page_with_an_id(broker: DaemonProcess) -> None:
    with BrokerClient(broker.socket_path) as client:
        start = client.begin_sign_in()
    assert start.url == f"{broker.web_url}{BEGIN}?sign_in={start.sign_in_id}"
    assert start.expires_at_unix > time.time() + 500
    assert os.environ.get("SIGNIN_BROKER_TEST_SECRETS_SEED") is None  # the test hook stays local


def test_begin_sign_in_with_redirect_to_lands_the_browser_there(
    broker: DaemonProcess, browser: Browser
) -> None:
    deep = "/dashboard?tab=apps&q=a b"
    with BrokerClient(broker.socket_path) as client:
        start = client.begin_sign_in(redirect_to=deep)
    assert start.url == (
        f"{broker.web_url}{BEGIN}?sign_in={start.sign_in_id}&redirect_to=%2Fdashboard%3Ftab%3Dapps%26q%3Da%20b"
    )
    to_callback = browser.follow(browser.get(start.url), until=broker.web_url + CALLBACK)
    landed = browser.get(location(to_callback))
    assert location(landed) == "/dashboard?tab=apps&q=a%20b"


def test_begin_sign_in_refuses_a_redirect_to_for_a_device_or_of_any_length(
    broker: DaemonProcess,
) -> None:
    with BrokerClient(broker.socket_path) as client:
        with pytest.raises(BrokerError) as device:
            client.begin_sign_in(device=True, redirect_to="/dashboard")
        with pytest.raises(BrokerError) as long:
            client.begin_sign_in(redirect_to="/" + "a" * 2048)
    assert device.value.code.name == "INVALID_ARGUMENT"
    assert device.value.message == (
        "redirect_to and authorize_params apply to a browser sign-in, not a device one"
    )
    assert long.value.code.name == "INVALID_ARGUMENT"
    assert long.value.message == "redirect_to must be at most 2048 characters"
