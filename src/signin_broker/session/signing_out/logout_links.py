"""One-time links to the provider's logout, so that the id_token never leaves the daemon.

A browser ends the provider's session at its end_session_endpoint, best with the
id_token as `id_token_hint`. Handed to an app, printed, or put on a browser's command
line (where every user reads it in `ps`), that URL would give the id_token away. Apps
get instead a link to the daemon's own loopback page, which serves only the daemon's
user: it redirects the browser to the provider with the hint, once, for a few minutes.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

LINK_PATH = "/logout/provider"
LINK_SECONDS = 300
MAX_LINKS = 32  # sign-outs are rare; the oldest link goes first


class LogoutLinks:
    """The pending links: a random id to the provider's logout URL, until used or expired."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._targets: dict[str, tuple[str, float]] = {}  # id: (provider URL, expires at)

    def create(self, page_url: str, target: str) -> str:
        """A link on the loopback page at page_url that sends a browser to target, once."""
        now = self._clock()
        self._targets = {k: v for k, v in self._targets.items() if v[1] > now}
        while len(self._targets) >= MAX_LINKS:
            del self._targets[next(iter(self._targets))]
        link_id = secrets.token_urlsafe(24)
        self._targets[link_id] = (target, now + LINK_SECONDS)
        return f"{page_url}{LINK_PATH}?end={link_id}"

    def take(self, link_id: str) -> str | None:
        """The target of a link, which is then used up; None when unknown or expired."""
        target, expires_at = self._targets.pop(link_id, ("", 0.0))
        return target if target and expires_at > self._clock() else None
