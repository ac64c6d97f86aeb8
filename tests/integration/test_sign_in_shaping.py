"""Shaping the sign-in request: login_hint, prompt, other authorize parameters, the browser."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, BrokerError
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from support.commands import BIN

CALLBACK = "/auth/oauth2/id-provider/callback"


def authorize_params(stub: StubProvider) -> dict[str, str]:
    """The parameters of the last authorize request the provider received."""
    (last, *_) = reversed([r for r in stub.requests if r.path == stub.paths.authorize])
    return last.params


def test_the_login_options_reach_the_providers_authorize_request(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    opened = tmp_path / "opened.json"
    recorder = tmp_path / "browser.py"  # a browser command that notes what it was given
    recorder.write_text(f"import json, sys\njson.dump(sys.argv[1:], open({str(opened)!r}, 'w'))\n")
    recorder.chmod(recorder.stat().st_mode | stat.S_IXUSR)
    login = subprocess.Popen(
        [str(BIN / "signin-broker"), "--socket", str(socket_path), "login", "--wait", "30",
         "--login-hint", "alice@example.com", "--prompt", "select_account",
         "--ui-locales", "de en", "--param", "access_type=offline",
         "--browser-command", f"{sys.executable} {recorder} --new-window {{url}}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for _ in range(100):  # the command runs in the background: wait for its note
        if (opened.exists() and opened.stat().st_size) or login.poll() is not None:
            break
        time.sleep(0.1)
    argv = json.loads(opened.read_text())
    assert argv[0] == "--new-window" and argv[1].startswith(daemon.web_url + "/auth/")
    with Browser() as browser:
        ended = location(browser.follow(browser.get(argv[1]), until=daemon.web_url + CALLBACK))
        browser.get(ended)
    _, err = login.communicate(timeout=30)
    assert login.returncode == 0, err
    sent = authorize_params(stub)
    assert sent["login_hint"] == "alice@example.com"
    assert sent["prompt"] == "select_account"
    assert sent["ui_locales"] == "de en"
    assert sent["access_type"] == "offline"
    assert sent["code_challenge_method"] == "S256"  # the daemon's own are untouched


@pytest.mark.parametrize(
    ("params", "complaint"),
    [
        ({"state": "chosen"}, "sets state itself"),
        ({"redirect_uri": "https://evil.example/"}, "sets redirect_uri itself"),
        ({"prompt": "whatever"}, "prompt must be"),
        ({"Login_Hint": "x"}, "lower-case"),
        ({"login_hint": "a\nb"}, "printable"),
    ],
)
def test_parameters_the_daemon_sets_or_cannot_check_are_refused(
    stub: StubProvider, socket_path: Path, params: dict[str, str], complaint: str
) -> None:
    DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    with BrokerClient(socket_path) as client, pytest.raises(BrokerError) as caught:
        client.begin_sign_in(authorize_params=params)
    assert caught.value.code.name == "INVALID_ARGUMENT"
    assert complaint in caught.value.message


def test_a_page_address_cannot_add_authorize_parameters(
    stub: StubProvider, socket_path: Path
) -> None:
    """Only what the app asked for over the socket is sent; the query of the page is not."""
    DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    with BrokerClient(socket_path) as client:
        started = client.begin_sign_in(authorize_params={"login_hint": "bob"})
    with Browser() as browser:
        response = browser.get(started.url + "&prompt=none&login_hint=mallory")
    authorize = location(response)
    assert "login_hint=bob" in authorize and "mallory" not in authorize
    assert "prompt=" not in authorize


def test_the_daemons_setting_applies_to_every_sign_in_and_a_sign_in_may_override_it(
    stub: StubProvider, socket_path: Path
) -> None:
    DaemonProcess(
        socket_path,
        "--issuer",
        stub.issuer,
        "--authorize-params",
        "access_type=offline&prompt=login",
    ).start()
    with BrokerClient(socket_path) as client:
        started = client.begin_sign_in(authorize_params={"prompt": "select_account"})
    with Browser() as browser:
        authorize = location(browser.get(started.url))
    assert "access_type=offline" in authorize
    assert "prompt=select_account" in authorize and "prompt=login" not in authorize
