"""Attacks on the id_token at sign-out: argv, JSON and RPC answers.

The id_token stays in the daemon: sign-out hands out a one-time link to the daemon's
own loopback page, which sends the owner's browser on to the provider with the
id_token_hint. Every user can read a browser's argv in `ps`, so the link must be worth
nothing to anyone else, and nothing once used.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import httpx2

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location, query_of
from signin_broker_testing.daemon import DaemonProcess
from support.commands import BIN
from support.other_user import other_user, run_as
from support.signin import sign_in

JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]*")
LINK_PATH = "/logout/provider"


def assert_no_id_token(text: str) -> None:
    assert "id_token" not in text
    assert not JWT.search(text), "a JWT (the id_token) was handed out"


def provider_logouts(stub: StubProvider) -> list[dict[str, str]]:
    return [r.params for r in stub.requests if r.path == "/logout"]


def follow_once(broker: DaemonProcess, stub: StubProvider, link: str) -> str:
    """Open the link as the owner's browser, on to the provider; the id_token_hint it got."""
    assert link.startswith(broker.web_url + LINK_PATH + "?"), link
    before = len(provider_logouts(stub))
    with httpx2.Client(timeout=10) as browser:
        hop = browser.get(link)
        assert hop.status_code in (302, 303), hop.text
        assert location(hop).startswith(stub.base_url + "/logout?")
        assert query_of(location(hop))["post_logout_redirect_uri"] == broker.web_url + "/"
        assert browser.get(location(hop)).status_code in (200, 302, 303)
    logouts = provider_logouts(stub)
    assert len(logouts) == before + 1
    hint = logouts[-1].get("id_token_hint", "")
    assert JWT.fullmatch(hint), "the provider got no id_token_hint"
    return hint


def assert_used_up(broker: DaemonProcess, stub: StubProvider, link: str) -> None:
    before = len(provider_logouts(stub))
    with httpx2.Client(timeout=10) as browser:
        again = browser.get(link)
    assert again.status_code == 410
    assert "location" not in again.headers
    assert_no_id_token(again.text)
    assert len(provider_logouts(stub)) == before
    assert broker.alive


def fake_browser(folder: Path) -> tuple[Path, Path]:
    """A BROWSER command that records the argv it was started with, and the record."""
    record = folder / "argv.json"
    script = folder / "fake-browser"
    script.write_text(
        f"#!{os.path.realpath(sys.executable)}\n"
        "import json, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps(sys.argv))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, record


def cli(broker: DaemonProcess, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(BIN / "signin-broker"), "--socket", str(broker.socket_path), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
        check=True,
    )
    assert_no_id_token(done.stdout + done.stderr)
    return done.stdout


def test_logout_browser_puts_no_id_token_on_the_browsers_command_line(
    broker: DaemonProcess, stub: StubProvider, browser: Browser, folder: Path
) -> None:
    sign_in(browser, broker)
    script, record = fake_browser(folder)
    cli(broker, "logout", "--browser", env={"BROWSER": str(script), "DISPLAY": ""})
    argv = json.loads(record.read_text())
    assert len(argv) == 2, argv
    assert_no_id_token(" ".join(argv))
    hint = follow_once(broker, stub, argv[1])
    assert hint not in " ".join(argv)
    assert_used_up(broker, stub, argv[1])
    assert hint not in broker.output()


def test_logout_json_prints_no_id_token(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    printed = json.loads(cli(broker, "logout", "--json"))
    assert printed["was_signed_in"] is True
    follow_once(broker, stub, printed["logout_url"])
    assert_used_up(broker, stub, printed["logout_url"])


def test_sign_out_rpc_hands_an_app_no_id_token(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    with BrokerClient(broker.socket_path) as app:
        result = app.sign_out()
    assert result.was_signed_in
    assert_no_id_token(result.logout_url)
    hint = follow_once(broker, stub, result.logout_url)
    assert_used_up(broker, stub, result.logout_url)
    assert hint not in broker.output()


def test_remove_account_rpc_hands_an_app_no_id_token(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    with BrokerClient(broker.socket_path) as app:
        logout_url, _ = app.remove_account("user:1001")
    assert_no_id_token(logout_url)
    follow_once(broker, stub, logout_url)
    assert_used_up(broker, stub, logout_url)


def test_remove_account_through_the_cli_prints_no_id_token(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    sign_in(browser, broker)
    printed = json.loads(cli(broker, "accounts", "remove", "user:1001", "--json"))
    follow_once(broker, stub, printed["logout_url"])


def test_another_user_cannot_spend_the_sign_out_link_read_from_ps(
    broker: DaemonProcess, stub: StubProvider, browser: Browser
) -> None:
    user = other_user()
    sign_in(browser, broker)
    with BrokerClient(broker.socket_path) as app:
        link = app.sign_out().logout_url
    assert run_as(user, link, "http-get") == {"status": 403}
    follow_once(broker, stub, link)  # the refusal did not use the link up
