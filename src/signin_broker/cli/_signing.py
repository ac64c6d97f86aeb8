"""Signing in and out: `login` (browser, device code or pasted address) and `logout`.

A sign-in is begun over the API and its outcome awaited among the daemon's events, so
no event is missed between the two; the person is sent where it happens: their browser
(a command of their choosing, or the system's), a code and a QR code for another
device, or a prompt for the address another device's browser ended on.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import webbrowser
from collections.abc import Iterator

from ..client import (
    BrokerClient,
    BrokerError,
    Event,
    EventKind,
    SignInStart,
    SignOutResult,
    TokenRevocation,
)
from ..tui.qr import terminal_qr, wants_colour
from ._failures import PasteError
from ._output import print_json
from ._paste import paste_back


def login(client: BrokerClient, args: argparse.Namespace) -> int:
    """Begin a sign-in, send the user to the browser, and wait until the daemon reports it."""
    events = client.watch_events(timeout=args.wait)
    next(events)  # the snapshot: from here on no event can be missed
    try:
        authorize_params = _authorize_params(args)
    except ValueError as error:
        print(f"signin-broker: {error}", file=sys.stderr)
        return 2
    started = client.begin_sign_in(
        workspace_id=args.workspace,
        device=args.device,
        redirect_to=args.redirect_to,
        authorize_params=authorize_params,
        provider=args.provider,
    )
    if not _show_sign_in(started, args):
        return 1
    print("Waiting for the sign-in to complete...", file=sys.stderr)
    try:
        return _outcome(events, started.sign_in_id, args)
    except BrokerError as error:
        if error.code.name == "DEADLINE_EXCEEDED":
            print(
                f"signin-broker: sign-in did not complete within {args.wait:g} s", file=sys.stderr
            )
            return 1
        raise


def _show_sign_in(started: SignInStart, args: argparse.Namespace) -> bool:
    """Send the person where the sign-in happens; False when that failed (and why, said)."""
    if started.device:
        _show_device_code(started)
    elif args.paste:
        try:
            paste_back(started.url)
        except PasteError as error:
            print(f"signin-broker: {error}", file=sys.stderr)
            return False
    elif args.no_browser or not _open_browser(started.url, args.browser_command):
        print(f"Open this address to sign in:\n\n    {started.url}\n", file=sys.stderr)
    else:
        print(f"Opened your browser at {started.url}", file=sys.stderr)
    return True


def _authorize_params(args: argparse.Namespace) -> dict[str, str]:
    """The authorize parameters the login options ask for (the daemon checks them)."""
    params = {
        name: value
        for name, value in (
            ("login_hint", args.login_hint),
            ("prompt", args.prompt),
            ("acr_values", args.acr_values),
            ("ui_locales", args.ui_locales),
        )
        if value
    }
    for pair in args.param:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise ValueError(f"--param takes NAME=VALUE, not {pair!r}")
        params[name] = value
    return params


def _outcome(events: Iterator[Event], sign_in_id: str, args: argparse.Namespace) -> int:
    """Wait for this sign-in's outcome among the daemon's events."""
    for event in events:
        if event.sign_in_id != sign_in_id:
            continue  # another sign-in, e.g. in a second browser tab
        if event.kind is EventKind.SIGNED_IN:
            if args.json:
                return print_json(event)
            said = event.detail[:1].upper() + event.detail[1:]  # keeps "Alice Example"
            print(f"{said} ({event.account}).", file=sys.stderr)
            return 0
        if event.kind is EventKind.SIGN_IN_FAILED:
            print(f"signin-broker: sign-in failed: {event.detail}", file=sys.stderr)
            return 1
        if event.kind is EventKind.SIGN_IN_PROGRESS and "slower" in event.detail:
            print(f"({event.detail})", file=sys.stderr)
    return 1


def _show_device_code(started: SignInStart) -> None:
    print(
        f"On your phone or computer, open\n\n    {started.verification_uri}\n\n"
        f"and enter the code\n\n    {started.user_code}\n\nor scan this code:\n",
        file=sys.stderr,
    )
    print(terminal_qr(started.url, colour=wants_colour(sys.stderr)), file=sys.stderr)


def _signed_out(result: SignOutResult) -> str:
    """What the provider did with the tokens, as it happened (never "revoked" by default)."""
    kept = "the tokens it issued stay valid until they expire"
    if result.revocation is TokenRevocation.REVOKED:
        return "Signed out; the provider revoked the tokens."
    if result.revocation is TokenRevocation.NOT_OFFERED:
        return f"Signed out here; the provider offers no token revocation, so {kept}."
    if result.revocation is TokenRevocation.FAILED:
        return (
            f"Signed out here; the provider did not revoke the tokens"
            f" ({result.revocation_error}), so {kept}."
        )
    return "Signed out."  # an older daemon does not say


def logout(client: BrokerClient, args: argparse.Namespace) -> int:
    """End an account's session."""
    result = client.sign_out(args.account)
    if args.json:
        return print_json(result)
    print(_signed_out(result) if result.was_signed_in else "Was not signed in.", file=sys.stderr)
    browser_command = os.environ.get("SIGNIN_BROKER_BROWSER", "")
    if args.browser and result.logout_url and not _open_browser(result.logout_url, browser_command):
        print(
            f"Open this address to sign out there too:\n\n    {result.logout_url}\n",
            file=sys.stderr,
        )
    elif result.logout_url and not args.browser:
        print(
            "`signin-broker logout --browser` also ends the provider's web session.",
            file=sys.stderr,
        )
    return 0


def _open_browser(url: str, command: str = "") -> bool:
    """Open url with the given command ({url} in it, else appended), or the system's browser."""
    words = shlex.split(command)
    if words:
        argv = [word.replace("{url}", url) for word in words]
        if not any("{url}" in word for word in words):
            argv.append(url)
        try:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)  # noqa: S603 - the user's own command, no shell
        except OSError as error:
            print(f"signin-broker: cannot run {words[0]!r}: {error.strerror}", file=sys.stderr)
            return False
        return True
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False
