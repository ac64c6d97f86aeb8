"""The stub provider's few HTML pages: the sign-in choice, device verification and messages.

Every value that comes from a request or a test is escaped here.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from .models import StubUser

_STYLE = """
:root { color-scheme: light dark; --accent: #2f6fde; --line: #d9dde3; }
body { margin: 0; font: 16px/1.5 system-ui, sans-serif; background: Canvas; color: CanvasText; }
main { max-width: 28rem; margin: 4rem auto; padding: 0 1.25rem; }
h1 { font-size: 1.4rem; }
form { display: grid; gap: .6rem; }
button { border: 0; border-radius: .5rem; padding: .6rem 1rem; font: inherit; cursor: pointer;
         background: var(--accent); color: white; font-weight: 600; }
button.deny { background: transparent; color: var(--accent); border: 1px solid var(--line); }
input { font: inherit; padding: .5rem .75rem; border: 1px solid var(--line); border-radius: .5rem;
        letter-spacing: .15em; text-transform: uppercase; }
p.note { opacity: .7; font-size: .9rem; }
"""
_NOTE = '<p class="note">A stub identity provider for tests: no password is asked.</p>'


def _page(title: str, content: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{content}</main></body></html>\n"
    )


def consent(
    client_id: str,
    users: Iterable[StubUser],
    action: str,
    parameters: Iterable[tuple[str, str]],
) -> str:
    """The page that asks who signs in: one button per user, and Deny.

    The buttons POST the original authorization request back, plus `sub` or `deny`.
    """
    hidden = "".join(
        f'<input type="hidden" name="{escape(name)}" value="{escape(value)}">'
        for name, value in parameters
    )
    return _page(
        f"Sign in to {client_id}",
        f"<h1>Sign in to {escape(client_id)}</h1>"
        f'<form method="post" action="{escape(action)}">{hidden}{_choices(users)}</form>'
        f"{_NOTE}",
    )


def device_verification(user_code: str, users: Iterable[StubUser], action: str) -> str:
    """The page where a user enters the code a device shows, then approves or denies it.

    The code comes filled in from verification_uri_complete; the buttons POST it back,
    plus `sub` or `deny`.
    """
    return _page(
        "Sign in a device",
        "<h1>Sign in a device</h1>"
        f'<form method="post" action="{escape(action)}">'
        '<label for="user_code">The code the device shows</label>'
        f'<input id="user_code" name="user_code" value="{escape(user_code)}" '
        'autocomplete="off" required>'
        f"{_choices(users)}</form>{_NOTE}",
    )


def display_name(user: StubUser) -> str:
    """What a page calls a user."""
    return user.name or user.preferred_username or user.sub


def _choices(users: Iterable[StubUser]) -> str:
    """One button per user, then Deny."""
    buttons = "".join(
        f'<button name="sub" value="{escape(user.sub)}">'
        f"Sign in as {escape(display_name(user))}</button>"
        for user in users
    )
    return f'{buttons}<button class="deny" name="deny" value="1">Deny</button>'


def message(title: str, text: str) -> str:
    """A page that says one thing."""
    return _page(title, f"<h1>{escape(title)}</h1><p>{escape(text)}</p>")
