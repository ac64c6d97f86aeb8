"""Sign-in fixtures (pytest plugin): a stub provider, a daemon signed up to it, a browser."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import httpx2
import pytest

from signin_broker.oidc.code_flow import DeterministicSecrets
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support.commands import BIN

SEED = "contract-5.3c-seed"
BEGIN = "/auth/oauth2/id-provider"
CALLBACK = BEGIN + "/callback"


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    with StubProvider() as provider:
        yield provider


@pytest.fixture(scope="module")
def shared_stub() -> Iterator[StubProvider]:
    """One stub for a module's tests that leave it as they found it (its records grow)."""
    with StubProvider() as provider:
        yield provider


@pytest.fixture(scope="module")
def shared_broker(shared_stub: StubProvider) -> Iterator[DaemonProcess]:
    """A daemon signed in to shared_stub, for a module's tests that leave it as they found it.

    Read-only calls and refusals share it; a test that signs out, changes the policy,
    the folders or the clock starts its own daemon (the `broker` fixture and the like).
    """
    folder = short_temp_dir()
    daemon = signed_in_daemon(shared_stub, folder / "run" / "broker.sock")
    yield daemon
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def expected() -> DeterministicSecrets:
    """The daemon's sign-in values, predicted: each sign-in takes a state, a nonce, a verifier."""
    return DeterministicSecrets(SEED)


@pytest.fixture
def broker(stub: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    env = {"SIGNIN_BROKER_TEST_SECRETS_SEED": SEED}
    with DaemonProcess(socket_path, "--issuer", stub.issuer, env=env) as daemon:
        yield daemon


@pytest.fixture
def browser() -> Iterator[Browser]:
    with Browser() as b:
        yield b


def sign_in(browser: Browser, daemon: DaemonProcess, start: str = "/user/login") -> httpx2.Response:
    """Drive the whole flow from `start`; returns the daemon's answer to the callback.

    A callback that sends the browser back to the provider (the sign-in begun again with
    DPoP, once, after its code was refused without a proof and with one) is followed.
    """
    callback = daemon.web_url + CALLBACK
    response = browser.follow(browser.get(daemon.web_url + start), until=callback)
    assert location(response).startswith(callback), location(response)
    answer = browser.get(location(response))
    if answer.is_redirect and not urljoin(callback, location(answer)).startswith(daemon.web_url):
        again = browser.follow(answer, until=callback)
        assert location(again).startswith(callback), location(again)
        answer = browser.get(location(again))
    return answer


def cli_login(socket_path: Path, *flags: str) -> tuple[subprocess.Popen[str], str]:
    """Start `signin-broker login --no-browser`: the process, and the address it prints."""
    login = subprocess.Popen(
        [str(BIN / "signin-broker"), "--socket", str(socket_path), "login", "--no-browser",
         *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert login.stderr is not None
    url = next(line.strip() for line in login.stderr if line.strip().startswith("http://"))
    return login, url


def login_through_the_cli(
    broker: DaemonProcess, browser: Browser, *flags: str
) -> tuple[subprocess.Popen[str], str]:
    """Run `signin-broker login --no-browser`, and open the address it prints as a user would."""
    login, url = cli_login(broker.socket_path, "--wait", "30", *flags)
    assert url.startswith(broker.web_url + BEGIN + "?sign_in=")
    response = browser.follow(browser.get(url), until=broker.web_url + CALLBACK)
    browser.get(location(response))
    return login, url


def signed_in_daemon(stub: StubProvider, socket_path: Path, *args: str, **kw) -> DaemonProcess:
    """A daemon signed in as the stub's auto-approved user through the loopback page."""
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, *args, **kw)
    try:
        daemon.start()
        with Browser() as browser:
            sign_in(browser, daemon)
    except BaseException:
        if daemon.alive:  # a module's fixture fails before any test's cleanup could see it
            daemon.stop()
        raise
    return daemon


def authorizations(stub: StubProvider) -> int:
    """How many times the stub's authorization endpoint was asked: each is a sign-in."""
    return len([r for r in stub.requests if r.path == "/oauth/v2/authorize"])
