"""Sign-in fixtures (pytest plugin): a stub provider, a daemon signed up to it, a browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from signin_broker.session.signin import DeterministicSecrets
from signin_broker.testing import StubProvider
from support.browser import Browser, location
from support.daemon import DaemonProcess

SEED = "contract-5.3c-seed"
CALLBACK = "/auth/oauth2/id-provider/callback"


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    with StubProvider() as provider:
        yield provider


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
    """Drive the whole flow from `start`; returns the daemon's answer to the callback."""
    response = browser.follow(browser.get(daemon.web_url + start), until=daemon.web_url + CALLBACK)
    assert location(response).startswith(daemon.web_url + CALLBACK), location(response)
    return browser.get(location(response))
