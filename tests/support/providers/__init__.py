"""Real OpenID providers nobody here wrote, run on loopback for the interoperability tests.

Each provider is a subprocess installed from its package registry at a pinned version
(see dot.py and node.py). It registers one public client whose redirect URI is the
daemon's callback on 127.0.0.1 with no port (RFC 8252 7.3: any port is accepted), and
prints one JSON line per token request (grant type, status, whether a refresh token
came back; never a token), so tests can count refresh grants at the provider.

Two test controls sit beside each provider's own behaviour: it pauses itself (SIGSTOP,
as a stalled host would) right after computing the answer to the next refresh once a
test has dropped a flag file in its folder, and its user's sessions can be revoked the
way its admin would (see each provider's `revoke_user`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import urljoin

import httpx2

from signin_broker.daemon.options import env_name
from signin_broker_testing import processes
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from support.service_accounts import new_secret

CLIENT_ID = "signin-broker"
KIOSK_ID = "kiosk"  # a confidential client allowed the client credentials grant only
SERVICE_TOKEN_TTL = 2  # seconds: its tokens' lifetime, whatever a person's are
CALLBACK = "/auth/oauth2/id-provider/callback"
REDIRECT_URI = "http://127.0.0.1" + CALLBACK  # no port: the provider must accept any
USER_EMAIL = "alice@example.com"  # the test user's, at every provider
START_TIMEOUT_SECONDS = 60.0
MAX_PAGES = 5  # login, consent, and room to spare
PAUSE_FLAG = "pause-at-next-refresh"  # in the provider's folder; the provider removes it
# What a user must tell the daemon about a provider beside its issuer and client id, and
# why; a provider fixture tells it nothing else (tests/unit/test_provider_fixtures.py).
# A fixture that switched one of the broker's defaults off to pass would hide a bug in
# the default: every everyday tool must work on the defaults.
MUST_SET = {
    "scopes": "offline_access, where the provider issues a refresh token only for it",
    "device_client_id": "a client of its own for device sign-in, where a client has one grant",
    "client_secret_file": "a confidential client's secret",
}
REFRESH_SCOPES = {"offline_access"}


def beyond_what_a_user_must_set(args: Sequence[str]) -> list[str]:
    """The daemon flags in `args` (`--name value` pairs) beyond the issuer, the client id,
    and MUST_SET: for scopes, beyond those a refresh token needs. Empty when there are none.
    """
    beyond = []
    for flag, value in zip(args[::2], args[1::2], strict=True):
        name = flag.removeprefix("--").replace("-", "_")
        if name in ("issuer", "client_id"):
            continue
        if name not in MUST_SET or (name == "scopes" and set(value.split()) - REFRESH_SCOPES):
            beyond.append(f"{flag} {value}")
    return beyond


class RealProvider:
    """A provider subprocess: start it, wait for its discovery document, read its log, stop it."""

    name: ClassVar[str]
    version: ClassVar[str]
    credentials: ClassVar[dict[str, str]]  # what the scripted browser types into its forms
    declines: ClassVar[tuple[str, ...]] = ()  # names of its pages' buttons that say no
    daemon_settings: ClassVar[dict[str, str]] = {}  # what else the daemon must be told, by name

    @classmethod
    def revoke_user(cls, folder: Path, issuer: str, sub: str) -> None:
        """Revoke every token and grant of user `sub` by the provider's own admin means.

        A classmethod: the conformance hook (interop_hooks.py) has only the folder and
        the issuer of the running provider.
        """
        raise NotImplementedError

    def __init__(self, folder: Path, access_token_ttl: int) -> None:
        self.folder = folder
        self.access_token_ttl = access_token_ttl
        self.kiosk_secret = new_secret()  # KIOSK_ID's, for a service account
        self.issuer = ""
        self.lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None

    def command(self) -> tuple[list[str], dict[str, str]]:
        """The command line and extra environment that start the provider."""
        raise NotImplementedError

    def base_url(self) -> str:
        """Where to look for the discovery document, once the process has said enough."""
        raise NotImplementedError

    def start(self) -> Self:
        """Start the process and wait (bounded) until its discovery document answers."""
        argv, env = self.command()
        stderr = (self.folder / "stderr.log").open("w")
        self.process = subprocess.Popen(
            argv, cwd=self.folder, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
        stderr.close()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not (document := self._discovery_if_up()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{self.name} did not start:\n{self.stderr()}")
            time.sleep(0.1)
        self.issuer = document["issuer"]  # exactly as the provider states it
        return self

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def _discovery_if_up(self) -> dict[str, Any] | None:
        try:
            base = self.base_url()
        except LookupError:
            return None  # not listening yet
        with contextlib.suppress(httpx2.HTTPError, ValueError):
            answer = httpx2.get(base + "/.well-known/openid-configuration", timeout=5)
            if answer.status_code == 200:
                return dict(answer.json())
        return None

    def discovery(self) -> dict[str, Any]:
        answer = httpx2.get(self.issuer + "/.well-known/openid-configuration", timeout=10)
        answer.raise_for_status()
        return dict(answer.json())

    def records(self) -> list[dict[str, Any]]:
        """The JSON lines the provider printed (other output is ignored)."""
        found = []
        for line in list(self.lines):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    found.append(record)
        return found

    def token_requests(self, grant_type: str) -> list[dict[str, Any]]:
        """Token requests of this grant type that reached the provider, in order."""
        return [
            r for r in self.records() if r.get("event") == "token" and r["grant_type"] == grant_type
        ]

    def stderr(self) -> str:
        return (self.folder / "stderr.log").read_text(errors="replace")[-4000:]

    def daemon_args(self) -> list[str]:
        """What the daemon is told: the issuer URL, the client id, and daemon_settings."""
        settings = [
            arg
            for name, value in self.daemon_settings.items()
            for arg in ("--" + name.replace("_", "-"), value)
        ]
        return ["--issuer", self.issuer, "--client-id", CLIENT_ID, *settings]

    def daemon_env(self) -> dict[str, str]:
        """daemon_settings as environment variables, for daemons started by someone else."""
        return {env_name(name): value for name, value in self.daemon_settings.items()}

    def revoke(self, sub: str) -> None:
        """Revoke user `sub` at this provider (see revoke_user)."""
        self.revoke_user(self.folder, self.issuer, sub)

    def pause_at_next_refresh(self) -> None:
        """Have the provider stop itself once it has computed its next refresh answer."""
        (self.folder / PAUSE_FLAG).touch()

    def wait_paused(self, timeout: float) -> None:
        """Wait (bounded) until the provider has paused itself mid-refresh."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while not (self.paused() and any(r.get("event") == "paused" for r in self.records())):
            assert time.monotonic() < deadline, f"{self.name} did not pause within {timeout} s"
            time.sleep(0.05)

    def paused(self) -> bool:
        """Whether the process is stopped (state T in /proc)."""
        assert self.process is not None
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def resume(self) -> None:
        """SIGCONT: the provider sends the answer it was about to send."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.resume()  # a stopped process would not act on SIGTERM
            processes.stop(self.process, 10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Forms(HTMLParser):
    """The forms of a page that POST: their action and their fields' preset values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "form" and attributes.get("method", "").lower() == "post":
            self.forms.append((attributes.get("action", ""), {}))
        elif tag == "input" and self.forms and attributes.get("name"):
            self.forms[-1][1][attributes["name"]] = attributes.get("value", "")
        elif tag == "button" and self.forms and attributes.get("name"):  # the first: "accept"
            self.forms[-1][1].setdefault(attributes["name"], attributes.get("value", ""))


def sign_in(browser: Browser, daemon: DaemonProcess, provider: RealProvider) -> httpx2.Response:
    """Sign in through the daemon's page and the provider's own login and consent pages.

    Returns the daemon's answer to the callback; a callback that sends the browser back
    to the provider (a sign-in begun again with DPoP, once) is followed there.
    """
    callback = daemon.web_url + CALLBACK
    response = browser.follow(browser.get(daemon.web_url + "/user/login"), until=callback)
    answer = browser.get(through_provider_pages(browser, response, provider, callback))
    if answer.is_redirect and not urljoin(callback, location(answer)).startswith(daemon.web_url):
        again = browser.follow(answer, until=callback)
        answer = browser.get(through_provider_pages(browser, again, provider, callback))
    return answer


def through_provider_pages(
    browser: Browser,
    response: httpx2.Response,
    provider: type[RealProvider] | RealProvider,
    callback: str,
) -> str:
    """Fill in the provider's pages from `response` on; the callback address it sends back to.

    Each page's first POST form is submitted with the provider's credentials filled
    in where it has such fields.
    """
    for _ in range(MAX_PAGES):
        if response.is_redirect and location(response).startswith(callback):
            return location(response)
        assert response.status_code == 200, f"{response.status_code} from {response.url}"
        parser = _Forms()
        parser.feed(response.text)
        assert parser.forms, f"no form at {response.url}:\n{response.text[:2000]}"
        action, fields = parser.forms[0]
        for name, value in provider.credentials.items():
            if name in fields:
                fields[name] = value
        submitted = browser.post(urljoin(str(response.url), action), data=fields)
        response = browser.follow(submitted, until=callback)
    raise AssertionError(f"still on {provider.name}'s pages after {MAX_PAGES} forms")


def approve_device(browser: Browser, provider: RealProvider, address: str) -> None:
    """Approve a device sign-in as its person would, from the address with the code in it.

    Sign in, confirm: every page's first POST form is submitted (credentials filled in,
    the buttons that say no left out) until a page has none, the provider's "done".
    """
    response = browser.follow(browser.get(address))
    for _ in range(MAX_PAGES + 2):  # the code's confirmation and its outcome, beside sign-in
        assert response.status_code == 200, f"{response.status_code} from {response.url}"
        parser = _Forms()
        parser.feed(response.text)
        if not parser.forms:
            return
        action, fields = parser.forms[0]
        for name in provider.declines:
            fields.pop(name, None)
        for name, value in provider.credentials.items():
            if name in fields:
                fields[name] = value
        response = browser.follow(browser.post(urljoin(str(response.url), action), data=fields))
    raise AssertionError(f"still on {provider.name}'s pages after {MAX_PAGES + 2} forms")
