"""`signin-broker tui` in a real pseudo-terminal (80x24), read off the screen as a person would.

Each step's screen is kept as text in artifacts/tui/ for a reviewer to look at.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker.daemon.apps.policy import AppRule, Decision
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.terminal import Terminal
from support.apps import App, outcome, policy_path, write_policy
from support.commands import BIN
from support.signin import signed_in_daemon

CAPTURES = Path(__file__).parents[2] / "artifacts" / "tui"
ESC = "\x1b"


def tui(socket_path: Path, **env: str) -> Terminal:
    """The TUI on the daemon at socket_path, in a fresh 80x24 pty."""
    return Terminal(
        [str(BIN / "signin-broker"), "--socket", str(socket_path), "tui"], env={**os.environ, **env}
    )


@pytest.fixture
def daemon(stub: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as running:
        yield running


def code_on(screen: str) -> str:
    lines = [line.strip() for line in screen.splitlines()]
    return lines[
        next(n for n, line in enumerate(lines) if line.endswith("enter the code")) + 1
    ].split()[-1]


def test_a_device_sign_in_step_by_step_refused_then_approved_then_signed_out(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    with tui(daemon.socket_path) as screen:
        home = screen.wait_for("Nobody is signed in. Press s to sign in.")
        screen.capture(CAPTURES / "1-home-nobody-signed-in.txt")
        assert "Alice" not in home
        screen.press("s")
        shown = screen.wait_for("and enter the code", "Open http://")
        screen.capture(CAPTURES / "2-sign-in-with-a-code.txt")
        code = code_on(shown)
        assert re.fullmatch(r"[A-Z]{4}-[A-Z]{4}", code), shown
        verification = stub.issuer.split("/oauth")[0]
        assert f"Open {verification}/device" in shown  # the address in full, not cut at 80
        assert "▀" in shown and "█" in shown  # the QR code is drawn beside the steps
        assert "Checking every" in shown and "expires in 9:" in shown

        stub.deny_device(code)
        refused = screen.wait_for("Sign-in failed:", "the sign-in was denied")
        screen.capture(CAPTURES / "3-refused-by-the-provider.txt")
        assert "access_denied" in refused or "denied" in refused

        screen.press(ESC)
        screen.wait_for("Nobody is signed in")
        screen.press("s")
        code = code_on(screen.wait_for("and enter the code", "Open http://"))
        stub.approve_device(code)
        signed_in = screen.wait_for("user:1001: signed in as Alice Example")
        screen.capture(CAPTURES / "4-signed-in.txt")
        assert re.search(
            r"> user:1001  Alice Example \(default\)  signed in, token \d+:\d\d left", signed_in
        )

        screen.press("o")
        screen.wait_for("Sign out user:1001?")
        screen.press("n")
        screen.wait_for("Nothing changed.")
        with BrokerClient(daemon.socket_path) as client:
            assert [a.id for a in client.accounts()] == ["user:1001"]
        screen.press("o")
        screen.wait_for("Sign out user:1001?")
        screen.capture(CAPTURES / "5-sign-out-asks-first.txt")
        screen.press("y")
        screen.wait_for("signed out", "Nobody is signed in")
        assert any(r.path.endswith("/revoke") for r in stub.requests)  # and at the provider
        screen.press("q")
        assert screen.process.wait(10) == 0


def test_an_app_that_asks_is_answered_from_the_keyboard_once_always_and_deny(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    # With new apps asked about, the person allows the bundled command once (as for
    # `signin-broker token`): an app that asks reads no accounts until allowed.
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "ask")
    console = f"{os.path.realpath(sys.executable)} {BIN / 'signin-broker'}"
    write_policy(socket_path, AppRule(console, Decision.ALLOW))
    mail, spy = App(tmp_path, "mail"), App(tmp_path, "spy")
    with tui(socket_path) as screen:
        screen.wait_for("user:1001  Alice Example")
        first = mail.start(socket_path, "token")
        asking = screen.wait_for("Waiting for your answer", f"! {mail.name}")
        screen.capture(CAPTURES / "6-an-app-asks.txt")
        assert "y allow once" in asking and "a allow always" in asking and "n deny" in asking
        screen.press("y")
        assert outcome(first)["account"] == "user:1001"
        screen.wait_for("allowed this once")
        assert (
            not policy_path(socket_path).exists()
            or mail.id not in policy_path(socket_path).read_text()
        )  # once: nothing recorded

        second = mail.start(socket_path, "token")  # it asks again
        screen.wait_for(f"! {mail.name}")
        screen.press("a")
        assert outcome(second)["account"] == "user:1001"
        screen.wait_for(f"{mail.name}: allowed (1 waiting request answered)")
        assert mail.id in policy_path(socket_path).read_text()
        assert mail.run(socket_path, "token")["ok"]  # allowed from now on, no question

        denied = spy.start(socket_path, "token")
        screen.wait_for(f"! {spy.name}")
        screen.press("n")
        refused = outcome(denied)
        assert refused["ok"] is False and refused["code"] == "PERMISSION_DENIED"
        screen.wait_for(f"{spy.name}: denied")
        screen.capture(CAPTURES / "7-answered.txt")
    daemon.stop()


def test_a_revocation_at_the_provider_shows_on_the_screen(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2")
    with tui(socket_path) as screen:
        screen.wait_for("user:1001  Alice Example")
        stub.revoke_user("1001")
        shown = screen.wait_for("the provider ended the session", "REVOKED")
        screen.capture(CAPTURES / "8-revoked.txt")
        assert "signed in, token" not in shown
        assert "press s to sign in again" in shown
    daemon.stop()


def test_without_the_daemon_it_says_how_to_start_it_and_connects_once_it_runs(
    stub: StubProvider, socket_path: Path
) -> None:
    with tui(socket_path) as screen:
        shown = screen.wait_for("The signin-broker daemon is not running.")
        screen.capture(CAPTURES / "9-no-daemon.txt")
        assert "systemctl --user start signin-broker.socket" in shown
        assert str(socket_path) in shown
        with DaemonProcess(socket_path, "--issuer", stub.issuer):
            screen.wait_for("Nobody is signed in", "signin-broker  ·  daemon", timeout=30)


def colours(screen: Terminal) -> set[str]:
    """Every foreground and background colour on the screen but the terminal's default."""
    with screen._lock:
        cells = [char for row in screen.screen.buffer.values() for char in row.values()]
    return {c for char in cells for c in (char.fg, char.bg)} - {"default"}


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_colours_are_the_terminals_own_and_none_with_no_color(
    daemon: DaemonProcess, no_color: bool
) -> None:
    with tui(daemon.socket_path, **({"NO_COLOR": "1"} if no_color else {})) as screen:
        screen.wait_for("Nobody is signed in")
        screen.press("s")
        screen.wait_for("and enter the code", "Open http://")
        seen = colours(screen)
    if no_color:
        assert seen == set()
    else:  # the QR code in black on white (it must scan on dark themes); named colours only
        assert "black" in seen and seen & {"white", "brightwhite"}, seen
        assert all(not re.fullmatch(r"[0-9a-f]{6}", colour) for colour in seen), seen


def test_without_a_terminal_or_prompt_toolkit_it_says_what_is_needed(socket_path: Path) -> None:
    import subprocess

    piped = subprocess.run(
        [str(BIN / "signin-broker"), "--socket", str(socket_path), "tui"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert piped.returncode == 1 and "needs a terminal" in piped.stderr
    missing = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.modules['prompt_toolkit'] = None\n"
         "from signin_broker.cli.main import main; sys.exit(main(['tui']))"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert missing.returncode == 1
    assert "pip install prompt_toolkit" in missing.stderr
    assert json.dumps(missing.stderr).count("Traceback") == 0
