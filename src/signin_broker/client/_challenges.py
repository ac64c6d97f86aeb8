"""A resource server's step-up challenge (RFC 9470 section 3), read from WWW-Authenticate.

    WWW-Authenticate: Bearer error="insufficient_user_authentication",
        error_description="A different authentication level is required",
        acr_values="myACR", max_age=5

The header's grammar is RFC 9110 section 11.6.1's: challenges separated by commas,
each an auth-scheme then a token68 or auth-params (`name=token` or a quoted-string
with backslash escapes). Anything that does not parse, and anything over a few
kilobytes, reads as no challenge: a server's garbage must not make a client ask for
a sign-in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

STEP_UP_ERROR = "insufficient_user_authentication"
MAX_HEADER_CHARACTERS = 8192

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")
_QUOTED = re.compile(r'"((?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[\t\x20-\x7e\x80-\xff])*)"')
_SPACE = re.compile(r"[ \t]*")
_ESCAPED = re.compile(r"\\(.)")
_ACR_VALUE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,256}")  # as the daemon checks them
MAX_AGE_SECONDS = 2**31 - 1


class _Garbage(Exception):
    """The header does not follow RFC 9110's challenge grammar."""


def challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """The challenges of one header value: (lower-case scheme, params by lower-case name).

    _Garbage when it does not parse.
    """
    found: list[tuple[str, dict[str, str]]] = []
    at = 0
    while True:
        at = _skip(header, at, ",")
        if at >= len(header):
            return found
        scheme = _TOKEN.match(header, at)
        if scheme is None:
            raise _Garbage
        params: dict[str, str] = {}
        found.append((scheme.group().lower(), params))
        at = _params(header, scheme.end(), params)


def _params(header: str, at: int, params: dict[str, str]) -> int:
    """Read a challenge's auth-params (or skip its token68); where the next challenge starts."""
    spaced = _skip(header, at, "")
    if spaced == at or spaced >= len(header):
        return at  # no parameters: a comma or the end follows the scheme
    at = spaced
    token68 = _TOKEN68.match(header, at)
    if token68 is not None:
        after = _skip(header, token68.end(), "")
        if after >= len(header) or header[after] == ",":
            return after
    while at < len(header):
        name = _TOKEN.match(header, at)
        if name is None:
            raise _Garbage
        equals = _skip(header, name.end(), "")
        if header[equals : equals + 1] != "=":
            if not params:
                raise _Garbage
            return at  # the next challenge's scheme
        start = _skip(header, equals + 1, "")
        quoted, plain = _QUOTED.match(header, start), _TOKEN.match(header, start)
        if quoted is not None:
            params[name.group().lower()] = _ESCAPED.sub(r"\1", quoted.group(1))
            at = quoted.end()
        elif plain is not None:
            params[name.group().lower()] = plain.group()
            at = plain.end()
        else:
            raise _Garbage
        at = _skip(header, at, "")
        if at < len(header) and header[at] != ",":
            raise _Garbage
        at = _skip(header, at, ",")
    return at


def _skip(header: str, at: int, also: str) -> int:
    """The position after any spaces and tabs (and `also`) from `at`."""
    while at < len(header) and header[at] in " \t" + also:
        at += 1
    return at


def step_up_of(headers: Iterable[str]) -> tuple[str, int | None] | None:
    """The acr_values and max_age a Bearer step-up challenge asks for; None when none does.

    A challenge with neither (or a max_age that is no whole number) asks for nothing
    the broker could do, so it is no step-up either.
    """
    for header in headers:
        if len(header) > MAX_HEADER_CHARACTERS:
            continue
        try:
            found = challenges(header)
        except _Garbage:
            continue
        for scheme, params in found:
            if scheme != "bearer" or params.get("error") != STEP_UP_ERROR:
                continue
            acr_values = params.get("acr_values", "").split(" ")
            if not all(_ACR_VALUE.fullmatch(value) for value in acr_values if value):
                continue  # the daemon would refuse them: no sign-in can follow
            max_age = _seconds(params.get("max_age"))
            if any(acr_values) or max_age is not None:
                return " ".join(value for value in acr_values if value), max_age
    return None


def _seconds(max_age: str | None) -> int | None:
    """max_age as a number of seconds; None for none, or one no daemon takes."""
    if max_age is None or not (max_age.isascii() and max_age.isdigit()):
        return None
    seconds = int(max_age)
    return seconds if seconds <= MAX_AGE_SECONDS else None
