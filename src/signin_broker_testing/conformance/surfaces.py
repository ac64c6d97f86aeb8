"""The four surfaces a person or an app signs in from, each driven the way it is really used.

- web: the loopback pages, through a browser (an HTTP client that keeps cookies);
- cli: the bundled `signin-broker` command, run as a subprocess;
- desktop: the SDK, with the sign-in completed in the browser;
- tv: the SDK's device sign-in (RFC 8628), approved at the provider's verification page.

Every surface answers the same questions, so every case runs unchanged on each: begin
a sign-in, learn its outcome, make an authenticated request, show its home, sign out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import quote

import httpx2

from signin_broker.client import BrokerError, Event, EventKind, NotSignedIn, SignInState

from ..browser import location
from .stage import BEGIN, Stage

OUTCOME_SECONDS = 30  # a sign-in's outcome arrives in well under this


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the surface told its user: success or not, in its own words."""

    ok: bool
    text: str
    response: httpx2.Response | None = None  # web: the daemon's answer to the callback


@dataclass
class Attempt:
    """A sign-in begun through a surface: the address the person opens, and its tracking."""

    url: str
    sign_in_id: str = ""
    user_code: str = ""
    verification_uri: str = ""
    interval: int = 0
    expires_at_unix: int = 0
    process: subprocess.Popen[str] | None = field(default=None, repr=False)  # cli
    events: Iterator[Event] | None = field(default=None, repr=False)  # desktop, tv


class Surface:
    """The questions every case asks; each surface answers them its own way."""

    name: ClassVar[str]
    device: ClassVar[bool] = False  # signs in with a device code instead of the browser

    def begin(self, stage: Stage, *, redirect_to: str = "", workspace_id: str = "") -> Attempt:
        """Start a sign-in the way this surface's user does."""
        raise NotImplementedError

    def outcome(self, stage: Stage, attempt: Attempt, delivered: httpx2.Response | None) -> Verdict:
        """What the surface reports once the provider's answer reached the daemon."""
        raise NotImplementedError

    def request(self, stage: Stage) -> str | None:
        """An authenticated request: text naming the account or user; None if sign-in is needed."""
        raise NotImplementedError

    def daemon_serves(self, stage: Stage) -> bool:
        """Whether the daemon still gives this surface's user a session (I2's question).

        The authenticated request asks only the daemon on every surface but tv.
        """
        return self.request(stage) is not None

    def home(self, stage: Stage) -> tuple[bool, str]:
        """The surface's first view: (signed in?, what it shows)."""
        raise NotImplementedError

    def sign_out(self, stage: Stage) -> Verdict:
        """Sign out the way this surface's user does."""
        raise NotImplementedError


class Web(Surface):
    """The loopback pages in a browser."""

    name = "web"

    def begin(self, stage: Stage, *, redirect_to: str = "", workspace_id: str = "") -> Attempt:
        """The sign-in link; a same-origin redirect_to is visited as the protected deep link."""
        if redirect_to.startswith("/") and not redirect_to.startswith(("//", "/\\")):
            return Attempt(url=stage.web_url + redirect_to)
        query = f"redirect_to={quote(redirect_to, safe='')}" if redirect_to else ""
        if workspace_id:
            query += ("&" if query else "") + f"workspace_id={workspace_id}"
        return Attempt(url=f"{stage.web_url}/user/login" + (f"?{query}" if query else ""))

    def outcome(self, stage: Stage, attempt: Attempt, delivered: httpx2.Response | None) -> Verdict:
        """Signed in: a redirect that sets the session cookie; else the error page."""
        if delivered is None:
            raise AssertionError("the web surface learns the outcome from the callback's answer")
        cookies = delivered.headers.get_list("set-cookie")
        if delivered.status_code in (302, 303) and cookies:
            return Verdict(True, location(delivered), delivered)
        return Verdict(False, delivered.text, delivered)

    def request(self, stage: Stage) -> str | None:
        """GET /dashboard: 200 with the user, or a redirect into the OAuth flow."""
        page = stage.browser.get(stage.web_url + "/dashboard")
        if page.status_code == 200:
            return page.text
        if page.status_code == 302 and location(page).startswith(BEGIN):
            return None
        raise AssertionError(f"/dashboard answered {page.status_code}, not 200 or 302 to sign-in")

    def home(self, stage: Stage) -> tuple[bool, str]:
        """GET /: the landing page, or a redirect to the dashboard."""
        page = stage.browser.get(stage.web_url + "/")
        if page.status_code == 200:
            return False, page.text
        if page.status_code == 302 and location(page) == "/dashboard":
            return True, stage.browser.follow(page).text
        raise AssertionError(f"/ answered {page.status_code}, neither landing nor dashboard")

    def sign_out(self, stage: Stage) -> Verdict:
        """The dashboard's sign-out button: a same-origin POST /logout."""
        answer = stage.browser.post(stage.web_url + "/logout", headers={"Origin": stage.web_url})
        cleared = [c for c in answer.headers.get_list("set-cookie") if "max-age=0" in c.lower()]
        ok = answer.status_code in (302, 303) and bool(cleared)
        return Verdict(ok, location(answer) if ok else answer.text, answer)


class Cli(Surface):
    """The bundled `signin-broker` command."""

    name = "cli"

    def begin(self, stage: Stage, *, redirect_to: str = "", workspace_id: str = "") -> Attempt:
        """`signin-broker login --no-browser`, and the address it prints for the person."""
        flags = ["--redirect-to", redirect_to] if redirect_to else []
        flags += ["--workspace", workspace_id] if workspace_id else []
        process = subprocess.Popen(  # noqa: S603 - our own command, no shell
            [
                *self._command(stage),
                "login",
                "--no-browser",
                "--wait",
                str(OUTCOME_SECONDS),
                *flags,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in process.stderr or ():  # ends when the command exits
            if line.strip().startswith("http://"):
                return Attempt(url=line.strip(), process=process)
        _, said = process.communicate(timeout=OUTCOME_SECONDS)
        raise AssertionError(f"`signin-broker login` printed no address: {said.strip()}")

    def outcome(self, stage: Stage, attempt: Attempt, delivered: httpx2.Response | None) -> Verdict:
        """The command's exit status and last words."""
        if attempt.process is None:
            raise AssertionError("no login command is running")
        _, said = attempt.process.communicate(timeout=OUTCOME_SECONDS + 10)
        return Verdict(attempt.process.returncode == 0, said.strip())

    def request(self, stage: Stage) -> str | None:
        """`signin-broker token --json`: the token's account; exit 4 means sign-in required."""
        done = self._run(stage, "token", "--json")
        if done.returncode == 4:
            return None
        if done.returncode != 0:
            raise AssertionError(f"`signin-broker token` failed: {done.stderr.strip()}")
        account: str = json.loads(done.stdout)["account"]
        return account

    def home(self, stage: Stage) -> tuple[bool, str]:
        """`signin-broker status`."""
        done = self._run(stage, "status")
        if done.returncode != 0:
            raise AssertionError(f"`signin-broker status` failed: {done.stderr.strip()}")
        state = next(
            (
                line.split(None, 1)[1]
                for line in done.stdout.splitlines()
                if line.startswith("sign-in")
            ),
            "",
        )
        return state.strip() == "signed in", done.stdout

    def sign_out(self, stage: Stage) -> Verdict:
        """`signin-broker logout`."""
        done = self._run(stage, "logout")
        return Verdict(done.returncode == 0 and "Signed out" in done.stderr, done.stderr.strip())

    @staticmethod
    def _command(stage: Stage) -> list[str]:
        return [
            sys.executable,
            "-m",
            "signin_broker.cli",
            "--socket",
            str(stage.running.socket_path),
        ]

    def _run(self, stage: Stage, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - our own command, no shell
            [*self._command(stage), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=OUTCOME_SECONDS,
            check=False,
        )


class Desktop(Surface):
    """A desktop app on the SDK: it begins the sign-in, the browser completes it."""

    name = "desktop"

    def begin(self, stage: Stage, *, redirect_to: str = "", workspace_id: str = "") -> Attempt:
        """BeginSignIn, watching events first so the outcome cannot be missed."""
        events = stage.client.watch_events(timeout=OUTCOME_SECONDS + 10)
        next(events)  # the snapshot
        started = stage.client.begin_sign_in(
            device=self.device, redirect_to=redirect_to, workspace_id=workspace_id
        )
        return Attempt(
            url=started.url,
            sign_in_id=started.sign_in_id,
            user_code=started.user_code,
            verification_uri=started.verification_uri,
            interval=started.interval_seconds,
            expires_at_unix=started.expires_at_unix,
            events=events,
        )

    def outcome(self, stage: Stage, attempt: Attempt, delivered: httpx2.Response | None) -> Verdict:
        """The SIGNED_IN or SIGN_IN_FAILED event of this sign-in."""
        if attempt.events is None:
            raise AssertionError("no event stream is open")
        try:
            for event in attempt.events:
                if event.sign_in_id != attempt.sign_in_id:
                    continue
                if event.kind in (EventKind.SIGNED_IN, EventKind.SIGN_IN_FAILED):
                    return Verdict(event.kind is EventKind.SIGNED_IN, event.detail)
        except BrokerError as error:
            return Verdict(False, f"no outcome event: {error.code.name}")
        return Verdict(False, "the event stream ended without an outcome")

    def request(self, stage: Stage) -> str | None:
        """GetToken: the token's account."""
        try:
            return stage.client.get_token().account
        except NotSignedIn:
            return None

    def home(self, stage: Stage) -> tuple[bool, str]:
        """GetStatus: the sign-in state and the default account."""
        status = stage.client.status()
        return status.sign_in_state is SignInState.SIGNED_IN, status.default_account

    def sign_out(self, stage: Stage) -> Verdict:
        """SignOut."""
        result = stage.client.sign_out()
        return Verdict(result.was_signed_in, "signed out" if result.was_signed_in else "was not")


class Tv(Desktop):
    """A TV app: a device sign-in, then the provider's userinfo with the token it gets."""

    name = "tv"
    device = True

    def request(self, stage: Stage) -> str | None:
        """GetToken, then userinfo at the provider: "<sub> <name>"; None when either refuses.

        The TV's request is the one to the provider: its 401 is the contract's "401".
        """
        try:
            token = stage.client.get_token()
        except NotSignedIn:
            return None
        userinfo = str(stage.discovery["userinfo_endpoint"])
        answer = httpx2.get(userinfo, headers={"Authorization": token.authorization}, timeout=15)
        if answer.status_code == 401:
            return None
        if answer.status_code != 200:
            raise AssertionError(f"userinfo answered {answer.status_code} to the TV's token")
        claims = answer.json()
        return f"{claims.get('sub')} {claims.get('name', '')}"

    def daemon_serves(self, stage: Stage) -> bool:
        """GetToken alone: a token the provider refuses but the daemon still hands out counts."""
        return super().request(stage) is not None
