"""The loopback web pages: small, self-contained HTML (no scripts, no external assets).

Every value that comes from outside (names, e-mail, messages) is escaped here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from ..._version import __version__
from ...identities import name_of
from ...session.accounts.records import AccountInfo
from . import BEGIN_PATH

_STYLE = """
:root { color-scheme: light dark; --accent: #2f6fde; --muted: #6b7280; --line: #d9dde3; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
       background: Canvas; color: CanvasText; }
main { max-width: 44rem; margin: 4rem auto; padding: 0 1.25rem; }
header { display: flex; align-items: center; gap: .6rem; margin-bottom: 2rem; }
header .mark { width: 2rem; height: 2rem; border-radius: .5rem; background: var(--accent);
               color: white; display: grid; place-items: center; font-weight: 700; }
header .name { font-weight: 600; letter-spacing: .01em; }
h1 { font-size: 1.6rem; margin: 0 0 .5rem; }
p.lead { color: var(--muted); margin-top: 0; }
.card { border: 1px solid var(--line); border-radius: .75rem; padding: 1.25rem 1.5rem;
        margin: 1.25rem 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1.25rem; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
table { width: 100%; border-collapse: collapse; font-size: .95rem; }
th, td { text-align: left; padding: .4rem .5rem; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 500; }
code { font: .9em ui-monospace, SFMono-Regular, Menlo, monospace; }
.button { display: inline-block; border: 0; border-radius: .5rem; padding: .6rem 1.1rem;
          background: var(--accent); color: white; font: inherit; font-weight: 600;
          text-decoration: none; cursor: pointer; }
.button.quiet { background: transparent; color: var(--accent); border: 1px solid var(--line); }
.error h1 { color: #c2410c; }
footer { margin-top: 3rem; color: var(--muted); font-size: .85rem; }
"""


def _layout(title: str, body: str, *, css_class: str = "") -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · signin-broker</title><style>{_STYLE}</style></head>"
        f'<body><main class="{css_class}">'
        '<header><span class="mark">sb</span><span class="name">signin-broker</span></header>'
        f"{body}"
        f"<footer>signin-broker {__version__} · this page is served by your own computer"
        " and only to you</footer></main></body></html>"
    )


@dataclass(frozen=True, slots=True)
class WaitingDevice:
    """A device sign-in waiting for the person at the desk: its code, address and QR code."""

    user_code: str
    verification_uri: str
    qr_svg: str  # an <svg> element made by daemon.qr from the address (no user input)


def _waiting(devices: Sequence[WaitingDevice]) -> str:
    return "".join(
        '<section class="card" data-device-sign-in>'
        "<h2>A device is waiting for your sign-in</h2>"
        f'<p>Open <a href="{escape(device.verification_uri)}">'
        f"{escape(device.verification_uri)}</a> and enter <code>{escape(device.user_code)}"
        f"</code>, or scan the code with your phone:</p>{device.qr_svg}</section>"
        for device in devices
    )


def _stronger(step_ups: Sequence[tuple[str, str]]) -> str:
    return "".join(
        '<section class="card" data-step-up>'
        "<h2>An app needs a stronger sign-in</h2>"
        f"<p>A token request for <code>{escape(account)}</code> waits for it.</p>"
        f'<p><a class="button" href="{escape(url)}">Sign in again</a></p></section>'
        for account, url in step_ups
    )


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """A provider the person may sign in at, for the landing page's buttons."""

    alias: str  # "" for the main one
    host: str  # the issuer's host, so the person knows where the button leads


def landing(waiting: Sequence[WaitingDevice] = (), providers: Sequence[ProviderChoice] = ()) -> str:
    """The anonymous home: what this is, and a way in per provider (default first). No user data."""
    buttons = f'<p><a class="button" data-cta="sign-in" href="{BEGIN_PATH}">'
    buttons += "Sign in with your identity provider</a></p>"
    if len(providers) > 1:
        cta = ' data-cta="sign-in"'  # the default provider's, first
        buttons = "".join(
            f'<p><a class="button"{cta if i == 0 else ""} data-provider="{escape(p.alias)}"'
            f' href="{BEGIN_PATH}?provider={quote(name_of(p.alias))}">'
            f"Sign in at {escape(name_of(p.alias))} ({escape(p.host)})</a></p>"
            for i, p in enumerate(providers)
        )
    return _layout(
        "Sign in",
        "<h1>Sign in once, for every app on this computer</h1>"
        '<p class="lead">Apps on this computer ask signin-broker for your sign-in instead'
        f" of asking you again.</p>{buttons}{_waiting(waiting)}",
    )


def dashboard(
    account: AccountInfo,
    others: list[AccountInfo],
    waiting: Sequence[WaitingDevice] = (),
    step_ups: Sequence[tuple[str, str]] = (),
) -> str:
    """The signed-in home: who, until when, which apps used the sign-in, what waits.

    `step_ups`: (account, address) of each step-up sign-in a token request waits for.
    """
    now = time.time()
    name = account.display_name or account.platform_user_id
    rows = "".join(
        f"<tr><td><code>{escape(app.executable)}</code></td><td>{app.last_pid}</td>"
        f"<td>{escape(_ago(now - app.last_used))}</td><td>{app.tokens_issued}</td></tr>"
        for app in account.apps
    )
    apps = (
        "<table><thead><tr><th>Program</th><th>Last pid</th><th>Last token</th>"
        f"<th>Tokens</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else '<p class="lead">No app has asked for a token yet. Try'
        " <code>signin-broker token</code>.</p>"
    )
    also = (
        "<p>Also signed in: "
        + ", ".join(escape(other.display_name or other.id) for other in others)
        + "</p>"
        if others
        else ""
    )
    return _layout(
        name,
        f'<h1 data-user="{escape(account.id)}">Signed in as {escape(name)}</h1>'
        f'<p class="lead">{escape(account.email)}</p>'
        '<section class="card"><dl>'
        f"<dt>Account</dt><dd><code>{escape(account.id)}</code></dd>"
        f"<dt>Access token</dt><dd>{escape(_until(account.access_token_expires_at - now))}</dd>"
        f"<dt>Signed in</dt><dd>{escape(_ago(now - account.signed_in_at))}</dd>"
        "</dl></section>"
        f'<section class="card"><h2>Apps using this sign-in</h2>{apps}</section>'
        f"{also}{_waiting(waiting)}{_stronger(step_ups)}"
        '<form method="post" action="/logout">'
        '<button class="button quiet" type="submit">Sign out</button></form>',
    )


def logout_confirmation() -> str:
    """GET /logout asks first: a link alone must not be able to sign the user out."""
    return _layout(
        "Sign out",
        "<h1>Sign out?</h1>"
        '<p class="lead">Apps on this computer will no longer get tokens until you sign in'
        " again.</p>"
        '<form method="post" action="/logout"><button class="button" type="submit">'
        'Sign out</button> <a class="button quiet" href="/dashboard">Stay signed in</a></form>',
    )


def error(title: str, message: str, *, status_hint: str = "") -> str:
    """A failed sign-in or a refused request, said plainly, with a way forward."""
    hint = f"<p><code>{escape(status_hint)}</code></p>" if status_hint else ""
    return _layout(
        title,
        f"<h1>{escape(title)}</h1><p>{escape(message)}</p>{hint}"
        f'<p><a class="button" href="{BEGIN_PATH}">Try again</a> '
        '<a class="button quiet" href="/">Home</a></p>',
        css_class="error",
    )


def _ago(seconds: float) -> str:
    return "just now" if seconds < 5 else f"{_span(seconds)} ago"


def _until(seconds: float) -> str:
    return "expired" if seconds <= 0 else f"valid for {_span(seconds)} more"


def _span(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
