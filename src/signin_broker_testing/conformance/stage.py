"""One case's world: an identity provider, a fresh daemon signed up to it, a browser, an app.

Every case gets its own stage, so no case can lean on what another left behind: a new
stub provider (unless the run targets a given issuer), a new daemon with its own
folders, socket and loopback port, a new browser and a new SDK client.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

import httpx2

from signin_broker.client import BrokerClient

from .. import StubProvider, StubUser
from ..browser import Browser
from ..daemon import DaemonProcess, short_temp_dir
from .hooks import Hook

BEGIN = "/auth/oauth2/id-provider"
CALLBACK = BEGIN + "/callback"
STOP_SECONDS = 30  # generous: a whole grid shares two cores

# The stub's person: the contract's examples sign in a personal and a workspace account.
PERSON = StubUser(
    sub="1001",
    name="Alice Example",
    email="alice@example.com",
    preferred_username="alice",
    workspaces=("7",),
)


# I2 waits for the daemon to see a revocation. The I cases of all surfaces take turns at
# the given provider (one test person there), so each I2's wait adds to the grid's
# time: 5 s here rather than the default minute, which is the contract's bound.
REVALIDATE_SECONDS = 5


class Closeable(Protocol):
    """What a surface starts for a stage and the stage ends: a terminal, a service."""

    def close(self) -> object: ...


Part = TypeVar("Part", bound=Closeable)


class Skip(Exception):
    """The case cannot run here; the message says why (shown in the grid)."""


@dataclass(frozen=True, slots=True)
class Target:
    """What the cases run against: a fresh stub per case, or a given provider (I1, I2).

    Everything but `issuer` describes the given provider; a stub case uses the stub's
    own registration, a page on any free port, and the built-in person and admin.
    """

    issuer: str = ""  # "" for the stub
    client_id: str = ""  # the daemon's client id at the given provider
    page_port: int = 0  # the daemon's loopback page port there (0: any free one)
    admin_token: str = ""  # for I2: the provider's admin API, stub-compatible
    admin_revoke_url: str = ""  # "" for <issuer origin>/admin/revoke
    browser_login: Hook | None = None  # the person at the provider's login (hooks.py)
    approve_device: Hook | None = None  # the person approving a device code
    revoke: Hook | None = None  # the admin revoking the test user (I2)


class Stage:
    """A provider, a daemon, a browser and an SDK client; close() ends them all."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.folder = short_temp_dir()
        self.stub: StubProvider | None = None
        self.daemon: DaemonProcess | None = None
        self.browser = Browser()
        self._client: BrokerClient | None = None
        self._parts: dict[str, Closeable] = {}
        try:
            issuer, self.client_id = target.issuer, target.client_id
            if not issuer:
                # Device polls every second: the TV cases wait less, and gaps are still checked.
                self.stub = StubProvider([PERSON], device_interval=1).start()
                issuer, self.client_id = self.stub.issuer, self.stub.clients[0].client_id
            self.issuer = issuer
            self.daemon = DaemonProcess(
                self.folder / "run" / "broker.sock",
                "--issuer",
                issuer,
                "--client-id",
                self.client_id,
                "--http",  # after DaemonProcess's own 127.0.0.1:0, so this one counts
                f"127.0.0.1:{target.page_port}",
                "--key-store",
                "file",  # the keyring of the machine running the cases is left alone
                "--revalidate-seconds",
                str(REVALIDATE_SECONDS),
            )
            # Started once it is the stage's: one that never gets ready is still stopped.
            self.daemon.start()
            self.web_url = self.daemon.web_url
        except BaseException:
            self.close()
            raise

    @property
    def provider(self) -> StubProvider:
        """The in-process stub (cases that need its knobs skip against a given issuer)."""
        if self.stub is None:
            raise Skip("needs the stub provider's controls; this run targets a given issuer")
        return self.stub

    @property
    def running(self) -> DaemonProcess:
        """The daemon (started in __init__)."""
        if self.daemon is None:
            raise RuntimeError("the stage's daemon did not start")
        return self.daemon

    @property
    def client(self) -> BrokerClient:
        """An SDK client of this stage's daemon (the desktop and TV surfaces' app)."""
        if self._client is None:
            self._client = BrokerClient(self.running.socket_path, timeout=30)
        return self._client

    def part(self, name: str, start: Callable[[], Part]) -> Part:
        """What a surface runs for this stage (its TUI, its service): started once, closed last."""
        if name not in self._parts:
            self._parts[name] = start()
        return self._parts[name]  # type: ignore[return-value]  # started by `start` above

    def provider_origin(self) -> str:
        """scheme://host:port of the identity provider."""
        parts = urlsplit(self.issuer)
        return f"{parts.scheme}://{parts.netloc}"

    @functools.cached_property
    def discovery(self) -> dict[str, object]:
        """The provider's discovery document, fetched once per stage (it does not change)."""
        answer = httpx2.get(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
        answer.raise_for_status()
        document: dict[str, object] = answer.json()
        return document

    def close(self) -> None:
        """Stop everything the stage started and remove its folder.

        A daemon that outlives STOP_SECONDS after SIGTERM is killed, and that is
        reported (AssertionError) once all else is cleaned up: it is a defect.
        """
        for part in self._parts.values():
            part.close()
        if self._client is not None:
            self._client.close()
        self.browser.close()
        stuck = ""
        if self.daemon is not None and self.daemon.alive:
            try:
                self.daemon.stop(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                records = self.daemon.logs_with()
                stuck = str(records[-1].get("msg", "")) if records else "nothing"
                self.daemon.kill()
        if self.stub is not None:
            self.stub.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
        if stuck:
            raise AssertionError(
                f"the daemon did not stop within {STOP_SECONDS} s of SIGTERM"
                f" (its last log line: {stuck!r})"
            )
