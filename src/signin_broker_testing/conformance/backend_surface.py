"""The headless service as a surface: the example sync agent, a separate process, read by its log.

A background program has no screen to sign anyone in on (contract I3): the person
signs in on the device's loopback page, as on the web surface, and what is checked is
the service's side: that it learns the outcome (its journal lines), that its calls
carry the person's token (the provider's userinfo, as the TV's), that it stops at a
sign-out or revocation and resumes at the next sign-in. Its "request" is a sync asked
for with SIGUSR1, the way `systemctl --user kill -s USR1` asks a running service.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx2

from ..lines import Lines
from ..processes import stop
from .stage import Stage
from .surfaces import OUTCOME_SECONDS, Attempt, Verdict, Web

SYNCED = "synced as "
NOT_SYNCED = ("not synced:", "paused:")
REFUSED_BY_SERVER = "the server answered HTTP"


class Service:
    """`python -m signin_broker.examples.sync_agent` on the stage's daemon, and its log lines."""

    def __init__(self, stage: Stage) -> None:
        userinfo = str(stage.discovery["userinfo_endpoint"])
        self.process = subprocess.Popen(  # noqa: S603 - our own module, no shell
            [sys.executable, "-m", "signin_broker.examples.sync_agent", userinfo,
             "--interval", "3600"],  # only when asked (SIGUSR1) or resumed
            env={**os.environ, "SIGNIN_BROKER_SOCKET": str(stage.running.socket_path)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        assert self.process.stdout is not None  # noqa: S101 - PIPE gives one
        self.lines = Lines(self.process.stdout)
        self.lines.wait_for(SYNCED, *NOT_SYNCED)  # its first turn: it knows where it stands

    def sync_now(self) -> str:
        """Ask for a sync; the line that says how it went."""
        self.lines.drain()
        self.process.send_signal(signal.SIGUSR1)
        return self.lines.wait_for(SYNCED, REFUSED_BY_SERVER, *NOT_SYNCED)

    def close(self) -> None:
        """SIGTERM, as systemd stops it; SIGKILL if it does not stop."""
        stop(self.process, OUTCOME_SECONDS)


class Backend(Web):
    """The sync agent, with the person signing in on the loopback page (Web's begin)."""

    name = "backend"

    @staticmethod
    def service(stage: Stage) -> Service:
        """The stage's agent, started before anything else happens on the surface."""
        return stage.part("backend", lambda: Service(stage))

    def begin(self, stage: Stage, *, redirect_to: str = "", workspace_id: str = "") -> Attempt:
        """The service runs first (it must see the sign-in happen); the person uses the page."""
        self.service(stage)
        return super().begin(stage, redirect_to=redirect_to, workspace_id=workspace_id)

    def outcome(self, stage: Stage, attempt: Attempt, delivered: httpx2.Response | None) -> Verdict:
        """The service's journal line telling the outcome the page told the person.

        Lines about other callbacks (a forged one refused meanwhile, N1) are passed
        over; the service must learn this sign-in's outcome, or the case fails.
        """
        page = super().outcome(stage, attempt, delivered)
        wanted = "sync-agent: sign-in: " if page.ok else "sync-agent: a sign-in failed:"
        return Verdict(page.ok, self.service(stage).lines.wait_for(wanted))

    def request(self, stage: Stage) -> str | None:
        """A sync: the line naming the user; None when it did not sync or the server refused."""
        line = self.service(stage).sync_now()
        return line if SYNCED in line else None

    def daemon_serves(self, stage: Stage) -> bool:
        """The broker still gave it a token (the server may refuse it: that is the provider's)."""
        line = self.service(stage).sync_now()
        return SYNCED in line or REFUSED_BY_SERVER in line

    def home(self, stage: Stage) -> tuple[bool, str]:
        """What the service reports when asked: syncing as the user, or waiting for a sign-in."""
        line = self.service(stage).sync_now()
        return SYNCED in line, line

    def sign_out(self, stage: Stage) -> Verdict:
        """The person signs out on the device (`signin-broker logout`); the service pauses."""
        service = self.service(stage)
        done = subprocess.run(  # noqa: S603 - our own command, no shell
            [sys.executable, "-m", "signin_broker.cli", "--socket",
             str(stage.running.socket_path), "logout"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=OUTCOME_SECONDS, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return Verdict(False, done.stderr.strip())
        line = service.lines.wait_for("paused:")
        return Verdict(True, line)
