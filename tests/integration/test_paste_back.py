"""`signin-broker login --paste`: the browser on another device, the address pasted back."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.models import DEFAULT_CLIENT
from support.commands import BIN

CALLBACK = "/auth/oauth2/id-provider/callback"


def start_paste_login(daemon: DaemonProcess) -> tuple[subprocess.Popen[str], str]:
    """Start `login --paste` and read the authorize address it prints."""
    login = subprocess.Popen(
        [str(BIN / "signin-broker"), "--socket", str(daemon.socket_path), "login", "--paste",
         "--wait", "30"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return login, next_address(login)


def next_address(login: subprocess.Popen[str]) -> str:
    """The next provider's address `login --paste` prints."""
    assert login.stderr is not None
    for line in login.stderr:
        if line.strip().startswith("http") and "/callback" not in line:
            return line.strip()
    raise AssertionError(f"no authorize address printed (exit {login.wait(10)})")


def ended_on(daemon: DaemonProcess, authorize: str) -> str:
    """Where a browser on another device ends: the daemon's callback, which it cannot load."""
    with Browser() as elsewhere:  # never talks to the daemon's page
        ended = location(elsewhere.follow(elsewhere.get(authorize), until=daemon.web_url))
    assert ended.startswith(daemon.web_url + CALLBACK + "?")
    return ended


def test_a_sign_in_finishes_with_the_address_the_other_device_ended_on(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    login, authorize = start_paste_login(daemon)
    assert authorize.startswith(stub.issuer)  # the provider's, not the loopback page's
    _, err = login.communicate(ended_on(daemon, authorize) + "\n", timeout=30)
    assert login.returncode == 0, err
    assert "Signed in as" in err
    assert "code=" not in err  # the pasted code is not echoed


def test_an_address_that_is_not_this_daemons_callback_is_refused(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    login, _ = start_paste_login(daemon)
    forged = f"http://127.0.0.2:9{CALLBACK}?code=x&state=y"
    _, err = login.communicate(forged + "\n", timeout=30)
    assert login.returncode == 1
    assert "not the address the sign-in ended on" in err
    assert not daemon.logs_with(msg="signed in")


def test_a_provider_that_spent_the_code_for_want_of_dpop_gets_one_more_pass(
    socket_path: Path,
) -> None:
    """It refused the code without a proof and with one: a second address, with dpop_jkt."""
    must_prove = replace(DEFAULT_CLIENT, dpop_bound_access_tokens=True)
    with StubProvider(clients=[must_prove], dpop=True) as stub:
        daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
        login, authorize = start_paste_login(daemon)
        assert login.stdin is not None
        login.stdin.write(ended_on(daemon, authorize) + "\n")
        login.stdin.flush()
        again = next_address(login)
        assert "dpop_jkt=" in again and "dpop_jkt=" not in authorize
        _, err = login.communicate(ended_on(daemon, again) + "\n", timeout=30)
        assert login.returncode == 0, err
        assert "Signed in as" in err
        with BrokerClient(socket_path) as broker:
            assert broker.get_token().dpop_bound_by == "provider"
        daemon.stop()
