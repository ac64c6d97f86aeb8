"""Step-up (RFC 9470) against a real provider that offers acr values (panva's oidc-provider).

A resource server of the test's own asks the provider for each access token's acr
(token introspection, RFC 7662) and answers a token of a weaker sign-in with RFC
9470's challenge, as an API that needs a stronger sign-in would.
"""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import httpx2
import pytest

from signin_broker.client import BrokerClient, BrokerError, EventKind
from signin_broker.httpx import BrokerAuth
from signin_broker_testing.browser import Browser
from signin_broker_testing.ledger import SecretLedger
from support.commands import BIN
from support.events import watching
from support.loopback_http import LoopbackServer, QuietHandler
from support.providers import CALLBACK, CLIENT_ID, RealProvider, through_provider_pages
from support.providers.checks import signed_in_daemon, token_of

WAIT_SECONDS = 60  # for a real provider's pages under a loaded machine


class StepUpApi(LoopbackServer):
    """An API that serves only tokens of a sign-in with one of `acr_values` (space-separated)."""

    def __init__(self, provider: RealProvider, acr_values: str) -> None:
        self.introspection = str(provider.discovery()["introspection_endpoint"])
        self.acr_values = acr_values
        self.seen: list[str] = []
        super().__init__(self._handler())
        self.url = self.origin + "/me"

    def acr_of(self, token: str) -> str | None:
        """The token's acr as the provider says; None when it is not active."""
        answer = httpx2.post(
            self.introspection, data={"token": token, "client_id": CLIENT_ID}, timeout=10
        ).json()
        return str(answer.get("acr", "")) if answer.get("active") else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                _, _, token = self.headers.get("Authorization", "").partition("Bearer ")
                api.seen.append(token)
                acr = api.acr_of(token) if token else None
                challenge = ""
                if acr is None:
                    status, body = 401, {"error": "invalid_token"}
                elif acr not in api.acr_values.split():
                    status, body = 401, {"error": "insufficient_user_authentication"}
                    challenge = (
                        'Bearer error="insufficient_user_authentication", error_description="A'
                        ' different authentication level is required",'
                        f' acr_values="{api.acr_values}"'
                    )
                else:
                    status, body = 200, {"acr": acr}
                data = json.dumps(body).encode()
                self.send_response(status)
                if challenge:
                    self.send_header("WWW-Authenticate", challenge)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def a_step_up_waits_for_a_sign_in_at_the_stronger_acr(
    provider: RealProvider, socket_path: Path, weaker: str, stronger: str
) -> None:
    """`token --acr-values` and an httpx auth's 401 wait for one sign-in at the stronger acr.

    Meanwhile another app gets the current token; after it, the token's acr is the
    stronger one and the API served the request sent once more.
    """
    daemon = signed_in_daemon(provider, socket_path)
    with BrokerClient(socket_path) as app:
        before = token_of(app)
    assert before.acr == weaker, before
    auth = BrokerAuth(socket_path=socket_path)
    command = [str(BIN / "signin-broker"), "--socket", str(socket_path), "token"]
    with (
        StepUpApi(provider, stronger) as api,
        watching(socket_path) as events,
        BrokerClient(socket_path) as other_app,
        httpx.Client(auth=auth, timeout=WAIT_SECONDS) as http,
        ThreadPoolExecutor(1) as pool,
    ):
        cli = subprocess.Popen(
            [*command, "--acr-values", stronger, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        served = pool.submit(http.get, api.url)
        told = events.wait_for(EventKind.SIGN_IN_PROGRESS, timeout=WAIT_SECONDS)
        meanwhile = [token_of(other_app) for _ in range(3)]  # served while the step-up waits
        url = re.search(r"sign in at (http://\S+)", told.detail)
        assert url, told.detail
        callback = daemon.web_url + CALLBACK
        with Browser() as browser:
            pages = browser.follow(browser.get(url.group(1)), until=callback)
            landed = browser.get(through_provider_pages(browser, pages, provider, callback))
        assert landed.status_code == 303, landed.text
        printed, said = cli.communicate(timeout=WAIT_SECONDS)
        answer = served.result(WAIT_SECONDS)
    auth.close()
    assert cli.returncode == 0, said
    shown = json.loads(printed)
    SecretLedger.note(shown["access_token"])
    assert shown["acr"] == stronger and shown["auth_time_unix"] > 0
    assert [token.acr for token in meanwhile] == [weaker] * 3
    assert {token.access_token for token in meanwhile} == {before.access_token}
    assert (answer.status_code, answer.json()) == (200, {"acr": stronger})
    assert api.seen == [before.access_token, shown["access_token"]]  # one retry
    with BrokerClient(socket_path) as app:
        assert token_of(app).acr == stronger
    daemon.stop()


def an_acr_value_it_does_not_list_is_refused(provider: RealProvider, socket_path: Path) -> None:
    """A step-up for a value outside its acr_values_supported is INVALID_ARGUMENT at once.

    The provider's discovery document is what the daemon reads: the values it lists are
    the only ones an app may ask for, and the refusal names them.
    """
    listed = provider.discovery()["acr_values_supported"]
    assert isinstance(listed, list) and listed, listed
    daemon = signed_in_daemon(provider, socket_path)
    with BrokerClient(socket_path) as app, pytest.raises(BrokerError) as refused:
        app.get_token(acr_values=f"{listed[-1]} urn:rig:gold")
    assert not daemon.logs_with(msg="a token request waits for a step-up sign-in")
    daemon.stop()
    assert refused.value.code.name == "INVALID_ARGUMENT"
    assert f"its acr_values_supported: {', '.join(listed)})" in refused.value.message
