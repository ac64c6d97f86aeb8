"""The terminal UI as a surface: `signin-broker tui` in a pseudo-terminal, read off its screen.

The person presses keys and reads what the 80x24 screen shows, nothing else: a device
sign-in's code, address, polling interval and expiry come from the screen; the
outcome is the screen's message or its refusal; the "authenticated request" is the
account line the TUI keeps current from the daemon (it renews nothing itself, so
T8's one renewal at 50 s is the daemon's, shown on the screen).
"""

from __future__ import annotations

import re
import sys
import time
from urllib.parse import quote

import httpx2

from ..terminal import Terminal
from .stage import Stage
from .surfaces import OUTCOME_SECONDS, Attempt, Surface, Verdict

SIGNED_IN_LINE = re.compile(r"^ *>? *(\S+)  (.*)  signed in, token .*$", re.MULTILINE)
SIGN_IN_SCREEN = "Sign in with a code"


class Tui(Surface):
    """`signin-broker tui`, driven by keys in a pty."""

    name = "tui"
    device = True

    def terminal(self, stage: Stage, workspace_id: str = "") -> Terminal:
        """The stage's TUI, started for the workspace of the first sign-in asked of it."""

        def start() -> Terminal:
            try:
                import prompt_toolkit  # noqa: F401 - what `signin-broker tui` runs on
                import pyte  # noqa: F401 - what reads its screen
            except ImportError as error:
                raise AssertionError(
                    f"the tui surface needs {error.name}: pip install pyte prompt_toolkit"
                ) from None
            command = [
                sys.executable,
                "-m",
                "signin_broker.cli",
                "--socket",
                str(stage.running.socket_path),
                "tui",
            ]
            terminal = Terminal(
                [*command, "--workspace", workspace_id] if workspace_id else command
            )
            terminal.wait_for("Accounts", "signin-broker  ·  daemon")
            return terminal

        return stage.part("tui", start)

    def begin(self, stage: Stage, *, redirect_to: str = "", workspace_id: str = "") -> Attempt:
        """Press s; read the code, the address, the interval and the expiry off the screen."""
        terminal = self.terminal(stage, workspace_id)
        terminal.press("s")
        deadline = time.monotonic() + OUTCOME_SECONDS
        while True:
            shown = terminal.wait_for("and enter the code", "Checking every", "expires in")
            attempt = _read_attempt(shown)
            if attempt is not None:
                return attempt
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen lacks the code, address or times:\n{shown}")
            time.sleep(0.1)  # drawn in part yet

    def outcome(self, stage: Stage, attempt: Attempt, delivered: httpx2.Response | None) -> Verdict:
        """The screen's message once the sign-in ends: signed in, or the refusal as it came."""
        terminal = self.terminal(stage)
        deadline = time.monotonic() + OUTCOME_SECONDS
        while time.monotonic() < deadline:
            shown = terminal.text()
            if "Sign-in failed:" in shown:
                said = shown.split("Sign-in failed:", 1)[1]
                if "Press esc" in said:  # the sign-in screen: the refusal in full
                    said = said.split("Press esc", 1)[0]
                    terminal.press("\x1b")
                else:  # the message line under the accounts
                    said = said.split("\n", 1)[0]
                return Verdict(False, " ".join(said.split()))
            if ": signed in as " in shown:
                line = next(line for line in shown.splitlines() if ": signed in as " in line)
                return Verdict(True, line.strip())
            time.sleep(0.1)
        return Verdict(False, f"the screen showed no outcome:\n{terminal.text()}")

    def request(self, stage: Stage) -> str | None:
        """The home screen's account line with a live token; None when it shows none."""
        signed_in, shown = self.home(stage)
        found = SIGNED_IN_LINE.search(shown)
        return found.group(0).strip() if signed_in and found else None

    def home(self, stage: Stage) -> tuple[bool, str]:
        """The home screen as it stands a tick after now (it reloads every second).

        From a sign-in's screen the person goes back with esc (the sign-in keeps waiting).
        """
        terminal = self.terminal(stage)
        if SIGN_IN_SCREEN in terminal.text():
            terminal.press("\x1b")
        time.sleep(1.2)
        shown = terminal.wait_for("Accounts")
        return SIGNED_IN_LINE.search(shown) is not None, shown

    def sign_out(self, stage: Stage) -> Verdict:
        """o, then y to the question; the screen's message."""
        terminal = self.terminal(stage)
        terminal.press("o")
        terminal.wait_for("Sign out ")
        terminal.press("y")
        shown = terminal.wait_for("signed out")
        line = next(line for line in shown.splitlines() if "signed out" in line)
        return Verdict(True, line.strip())


def _read_attempt(shown: str) -> Attempt | None:
    """The sign-in as the screen shows it; None while a part of it is not drawn."""
    lines = [line.strip() for line in shown.splitlines()]
    after = next((n for n, line in enumerate(lines) if line.endswith("and enter the code")), -1)
    code = lines[after + 1].split()[-1] if 0 <= after < len(lines) - 1 and lines[after + 1] else ""
    address = _found(r"Open (https?://\S+)$", shown)
    expiry = re.search(r"expires in (\d+):(\d\d)", shown)
    interval = _found(r"Checking every (\d+) s", shown)
    if not (code and address and expiry and interval):
        return None
    return Attempt(
        url=f"{address}?user_code={quote(code)}",  # the person types the code there
        user_code=code,
        verification_uri=address,
        interval=int(interval),
        expires_at_unix=int(time.time()) + int(expiry[1]) * 60 + int(expiry[2]),
    )


def _found(pattern: str, text: str) -> str:
    """What the screen shows where the pattern's group points; "" when it is not there."""
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1) if match else ""
