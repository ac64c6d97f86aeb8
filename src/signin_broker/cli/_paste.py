"""Paste-back sign-in: the browser runs on another device, the person pastes where it ended.

For a headless machine whose provider offers no device sign-in. The daemon's loopback
page cannot be reached from the other device, so this command asks the page for the
provider's authorize address itself, prints it, and reads back the address the
browser ended on (the page's callback, which failed to load over there). It then
delivers that callback to the page as the browser would have; the page checks the
state and redeems the code as usual, and its verifier never leaves the daemon.
Standard library only; nothing secret goes on a command line.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from typing import TextIO
from urllib.parse import urlsplit

from ._failures import PasteError

MAX_PASTED_LENGTH = 8192


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # we want the Location, not to follow it


_OPENER = urllib.request.build_opener(_NoRedirects)


def authorize_address(begin_url: str) -> str:
    """The provider's authorize address the daemon's begin page redirects to."""
    try:
        with _OPENER.open(begin_url, timeout=30) as response:
            status, location = response.status, str(response.headers.get("Location", ""))
    except urllib.error.HTTPError as error:  # a redirect not followed arrives as one
        status, location = error.code, str(error.headers.get("Location", ""))
    if status not in (302, 303, 307) or not location.startswith(("https://", "http://")):
        raise PasteError(f"the sign-in page did not send an authorize address (HTTP {status})")
    return location


def callback_of(pasted: str, begin_url: str) -> str:
    """The pasted address, if it is this daemon's callback; raise PasteError otherwise."""
    pasted = pasted.strip()
    begin, target = urlsplit(begin_url), urlsplit(pasted)
    if len(pasted) > MAX_PASTED_LENGTH:
        raise PasteError("the pasted address is too long")
    if (target.scheme, target.netloc, target.path) != (
        begin.scheme,
        begin.netloc,
        begin.path + "/callback",
    ):
        raise PasteError(
            f"that is not the address the sign-in ended on: it starts with"
            f" {begin.scheme}://{begin.netloc}{begin.path}/callback"
        )
    if "state=" not in target.query:
        raise PasteError("the pasted address has no state: copy the whole address")
    return pasted


def deliver(callback: str) -> str:
    """Hand the callback to the daemon's page, as the browser would have.

    Returns the provider's address where the page sends the browser once more (the
    sign-in begun again with DPoP, once: the provider refused the code without a proof
    and with one); "" otherwise, the outcome arriving as an event.
    """
    try:
        with _OPENER.open(callback, timeout=60):
            return ""
    except urllib.error.HTTPError as error:  # a redirect not followed, or an error page
        status, location = error.code, str(error.headers.get("Location", ""))
    elsewhere = urlsplit(location).netloc not in ("", urlsplit(callback).netloc)
    again = status in (302, 303, 307) and location.startswith(("https://", "http://"))
    return location if again and elsewhere else ""


def paste_back(begin_url: str, read: TextIO = sys.stdin, say: TextIO = sys.stderr) -> None:
    """Print the authorize address, read where the browser ended, and deliver it.

    A sign-in the page begins again with DPoP asks for a second pass, at most.
    """
    address = authorize_address(begin_url)
    for attempt in range(2):
        print(
            ("Open this address in a browser on any device and sign in:\n\n" if attempt == 0
             else "The identity provider wants this sign-in bound to this device's key (DPoP):"
             " open this address and sign in once more:\n\n")
            + f"    {address}\n\n"
            "The browser then fails to load a page starting with"
            f" {begin_url.split('?', 1)[0]}/callback.\n"
            "Copy that whole address from its address bar and paste it here:",
            file=say,
        )  # fmt: skip
        line = read.readline(MAX_PASTED_LENGTH + 2)
        if not line:
            raise PasteError("nothing was pasted")
        address = deliver(callback_of(line, begin_url))
        if not address:
            return
