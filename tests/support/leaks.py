"""Finds secrets in log lines: whole, cut short, or glued to other text.

A secret counts as leaked when its first WINDOW characters appear anywhere in a run of
token characters, so a token logged whole, truncated to a prefix, or after a "Bearer"
or "token=" is found. An ID token (a JWT) is looked for by its signature: its header
is the same in every ID token and its payload starts alike, so neither says which
token it was, while the signature is its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from signin_broker_testing.daemon import DaemonProcess

WINDOW = 12  # 72 random bits of a urlsafe secret: no line holds them by chance
TOKEN_RUN = re.compile(r"[A-Za-z0-9_~-]{%d,}" % WINDOW)  # noqa: UP031 - a regex's braces
JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.([A-Za-z0-9_-]+)")


@dataclass(frozen=True, slots=True)
class Leak:
    """A log line that holds a secret, and the daemon that wrote it."""

    secret: str
    line: str
    daemon: str

    def __str__(self) -> str:
        shown = self.secret[:6] + "..."  # enough to find it in the run, not to use it
        return f"{shown} in a log line of {self.daemon}: {self.line[:300]}"


class SecretIndex:
    """The secrets to look for, by their first WINDOW characters."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._by_start: dict[str, str] = {}
        for secret in secrets:
            jwt = JWT.fullmatch(secret)
            for part in [jwt.group(1)] if jwt else secret.split("."):
                if len(part) >= WINDOW:
                    self._by_start[part[:WINDOW]] = secret

    def __len__(self) -> int:
        return len(self._by_start)

    def found_in(self, text: str) -> list[str]:
        """The secrets `text` holds (whole or from their start on), each once."""
        found: dict[str, None] = {}
        for run in TOKEN_RUN.findall(text):
            for start in range(len(run) - WINDOW + 1):
                secret = self._by_start.get(run[start : start + WINDOW])
                if secret is not None:
                    found[secret] = None
        return list(found)


def leaks(daemons: Iterable[DaemonProcess], secrets: Iterable[str]) -> list[Leak]:
    """Every log line of these daemons that holds one of these secrets."""
    index = SecretIndex(secrets)
    if not index:
        return []
    found: list[Leak] = []
    seen: set[str] = set()  # many debug lines repeat word for word
    for daemon in daemons:
        for line in list(daemon.lines):
            if line in seen:
                continue
            seen.add(line)
            name = " ".join(daemon.args[3:])  # its flags, to tell the daemons apart
            found += [Leak(secret, line, name) for secret in index.found_in(line)]
    return found
