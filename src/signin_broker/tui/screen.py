"""The board drawn as lines of styled text that fit the terminal (80x24 and up).

Styles are class names (`screen.STYLES` gives them meaning): reverse video, bold and
the terminal's own ANSI colours only, so the screen reads on light and dark themes,
and with NO_COLOR (prompt_toolkit then draws in one colour) it loses nothing but hue.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import PurePath

from ..client import Account, App, AppDecision
from .board import Board, SignInView, Tone
from .qr import half_block_rows

Fragment = tuple[str, str]  # (style, text)
Line = list[Fragment]

STYLES = {
    "title": "bold",
    "heading": "bold underline",
    "selected": "reverse",
    "key": "bold",
    "good": "ansigreen bold",
    "bad": "ansired bold",
    "ask": "ansiyellow bold",
    "code": "bold reverse",
    "qr": "fg:ansiblack bg:ansiwhite",  # dark modules on a light ground, on any theme
    "dim": "italic",
}
KEYS_HOME: tuple[tuple[str, str], ...] = (
    ("s", "sign in"),
    ("b", "browser link"),
    ("↑↓", "select"),
    ("d", "default"),
    ("o", "sign out"),
    ("x", "remove"),
    ("q", "quit"),
)
BESIDE_QR = 38  # columns the steps need beside the QR code
KEYS_SIGN_IN = (("esc", "back"), ("q", "quit"))
KEYS_AWAY = (("q", "quit"),)
KEYS_ASK = (("y", "allow once"), ("a", "allow always"), ("n", "deny"))
KEYS_QUESTION = (("y", "yes"), ("n", "no"))


def draw(board: Board, width: int, height: int, now: float | None = None) -> list[Line]:
    """The whole screen: a header, the body, the message line and the keys, in `height` rows."""
    now = time.time() if now is None else now
    if board.unreachable:
        body = _unreachable(board)
    elif (view := board.showing_sign_in) is not None:
        body = _sign_in(view, width, height - 4, now)
    else:
        body = _home(board, now)
    top = [_header(board), []]
    bottom = [_message(board), _keys(board)]
    room = max(0, height - len(top) - len(bottom))
    body = body[:room] + [[] for _ in range(room - len(body))]
    return [_fit(line, width) for line in top + body + bottom]


def as_text(lines: list[Line]) -> str:
    """The screen without styles, as a person reads it (tests and screen captures)."""
    return "\n".join("".join(text for _, text in line).rstrip() for line in lines)


def _fit(line: Line, width: int) -> Line:
    """Cut a line at the terminal's width (a cut is marked with an ellipsis)."""
    out: Line = []
    room = width
    for style, text in line:
        if len(text) > room:
            out.append((style, text[: max(0, room - 1)] + "…"))
            return out
        out.append((style, text))
        room -= len(text)
    return out


def _header(board: Board) -> Line:
    status = board.status
    if board.unreachable:
        return [("class:title", " signin-broker"), ("", "  ·  "), ("class:bad", "not connected")]
    if status is None:
        return [("class:title", " signin-broker"), ("", "  ·  connecting…")]
    provider = status.issuer or "no provider configured"
    return [
        ("class:title", " signin-broker"),
        ("", f"  ·  daemon {status.version} (pid {status.pid})  ·  {provider}"),
    ]


def _unreachable(board: Board) -> list[Line]:
    said = [] if "not running" in board.unreachable else [[("", f" ({board.unreachable})")]]
    return [
        [("class:bad", " The signin-broker daemon is not running.")],
        *said,
        [],
        [("", " Start it with one of:")],
        [("class:key", "   systemctl --user start signin-broker.socket")],
        [("", "     (after "), ("class:key", "signin-broker install-service"), ("", " once)")],
        [("class:key", "   signin-brokerd &")],
        [],
        [("class:dim", f" Socket: {board.socket_path}")],
        [("class:dim", " This screen connects by itself as soon as the daemon answers.")],
    ]


def _home(board: Board, now: float) -> list[Line]:
    lines: list[Line] = [[("class:heading", " Accounts")]]
    if not board.accounts:
        lines.append(
            [("", " Nobody is signed in. Press "), ("class:key", "s"), ("", " to sign in.")]
        )
    for index, account in enumerate(board.accounts):
        lines.append(_account_line(account, now, selected=index == board.selected))
        if account.at_risk:  # cut at the edge if long: status has it whole
            lines.append([("class:bad", "   at risk: "), ("", account.at_risk)])
    status = board.status
    for ended in status.ended_sessions if status is not None else ():
        lines.append(
            [
                # What to do first: a long reason is cut at the edge (status has it whole).
                ("class:bad", f"   {ended.account} {ended.kind.name}"),
                ("", f", press s to sign in again: {ended.reason}"),
            ]
        )
    if board.sign_in is not None:  # hidden: it still waits
        lines.append([("class:ask", "   A sign-in waits for approval; press s to see its code.")])
    lines.append([])
    waiting = board.waiting
    if waiting:
        lines.append([("class:heading", " Waiting for your answer")])
        for app in waiting:
            lines.append(
                [
                    ("class:ask", f" ! {app_name(app)}"),
                    ("", " asks for a token  "),
                    ("class:dim", app.id),
                ]
            )
        lines.append(
            [("", "   "), *_key_hints(KEYS_ASK), ("", f"(answers {app_name(waiting[0])})")]
        )
        lines.append([])
    lines.append([("class:heading", " Apps")])
    if not board.apps:
        lines.append([("class:dim", " No app has asked for a token yet.")])
    for app in board.apps:
        lines.append([("", " " + _app_line(app)), ("class:dim", f"  {app.id}")])
    return lines


def _account_line(account: Account, now: float, *, selected: bool) -> Line:
    style = "class:selected" if selected else ""
    name = account.display_name or account.platform_user_id
    default = " (default)" if account.is_default else ""
    left = account.access_token_expires_at_unix - now
    if account.access_token_expires_at_unix == 0:
        token = ("class:bad", "no token: sign in again")
    elif left <= 0:
        token = ("class:bad", "token expired")
    else:
        renew = "" if account.next_refresh_unix else ", not renewable"
        token = ("class:good", f"signed in, token {_duration(left)} left{renew}")
    return [(style, f" {'>' if selected else ' '} {account.id}  {name}{default}  "), token]


def _app_line(app: App) -> str:
    decision = {
        AppDecision.ALLOW: "allowed",
        AppDecision.DENY: "denied",
        AppDecision.ASK: "asks each time",
    }.get(app.decision, "default")
    used = time.strftime("%H:%M:%S", time.localtime(app.last_used_unix))
    last = f"{app.tokens_issued} tokens, last at {used}" if app.last_used_unix else "no tokens yet"
    return f"{app_name(app)}  {decision}  {last}"


def app_name(app: App) -> str:
    """What a person calls an app: its script's or program's file name (the id says the rest)."""
    return PurePath(app.script.removeprefix("-m ") or app.executable).name or app.id


def _sign_in(view: SignInView, width: int, room: int, now: float) -> list[Line]:
    """A device sign-in: the QR code beside the steps, the address in full under them.

    Without room for the QR code (or for a browser sign-in) the steps fill the width.
    """
    start = view.start
    qr = half_block_rows(start.url) if start.device and not view.failure else []
    beside = bool(qr) and len(qr) + 1 <= room and len(qr[0]) + 3 + BESIDE_QR <= width
    if start.device:
        steps: list[Line] = [
            [("class:heading", "Sign in with a code")],
            [],
            [("", "Scan the QR code with a phone, or open" if beside else "Open")],
            [("", "the address below on another device")],
            [("", "and enter the code")],
            [("class:code", f" {start.user_code} ")],
            [],
        ]
    else:
        steps = [
            [("class:heading", "Sign in in a browser")],
            [],
            [("", "Open this address in a browser on this machine:")],
            [("class:key", start.url)],
            [],
        ]
    steps += _sign_in_progress(view, now, width - 2)
    address = [  # in full: split over lines when the terminal is narrower than it
        [("", " "), ("class:key", part)]
        for part in textwrap.wrap(
            f"Open {start.verification_uri}", width - 1, break_on_hyphens=False
        )
    ]
    if not start.device:
        address = []
    if not beside:
        return [[("", " "), *line] for line in steps] + address
    blank = " " * len(qr[0])
    joined: list[Line] = [
        [
            ("", " "),
            ("class:qr", qr[row] if row < len(qr) else blank),
            ("", "  "),
            *(steps[row] if row < len(steps) else []),
        ]
        for row in range(max(len(qr), len(steps)))
    ]
    return [*joined, *address]


def _sign_in_progress(view: SignInView, now: float, width: int) -> list[Line]:
    start = view.start
    if view.failure:  # in full, as the provider said it
        said = [[("class:bad", part)] for part in textwrap.wrap(view.failure, max(20, width))]
        return [
            [("class:bad", "Sign-in failed:")],
            *said,
            [],
            [("", "Press esc, then s to try again.")],
        ]
    lines: list[Line] = [[("", f"Waiting for your approval… {_duration(now - view.began_at)}")]]
    if start.device:
        lines.append([("", f"Checking every {start.interval_seconds} s;")])
    left = max(0.0, start.expires_at_unix - now)
    lines.append([("", f"the sign-in expires in {_duration(left)}.")])
    if view.progress:
        lines.append([("class:dim", view.progress)])
    return lines


def _message(board: Board) -> Line:
    if board.question is not None:
        return [("class:ask", f" {board.question.text} "), *_key_hints(KEYS_QUESTION)]
    style = {Tone.GOOD: "class:good", Tone.BAD: "class:bad", Tone.INFO: ""}[board.tone]
    return [(style, f" {board.message}")] if board.message else []


def _keys(board: Board) -> Line:
    keys: tuple[tuple[str, str], ...]
    if board.unreachable:
        keys = KEYS_AWAY
    elif board.showing_sign_in is not None:
        keys = KEYS_SIGN_IN
    else:
        keys = KEYS_HOME
    return [("", " "), *_key_hints(keys)]


def _key_hints(keys: tuple[tuple[str, str], ...]) -> Line:
    line: Line = []
    for key, what in keys:
        line += [("class:key", key), ("", f" {what}  ")]
    return line


def _duration(seconds: float) -> str:
    """42 s, 9:48, 1:02:03: short enough for a status line."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"
