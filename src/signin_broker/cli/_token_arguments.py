"""`signin-broker token`'s command line read without argparse, for the shapes scripts use.

argparse and the `re` it imports are about 10 ms of a one-shot whose whole budget beyond
Python's start is 13. This reads a line only where it reads it exactly as the command's
argparse parsers would: options by their full names, as `--name VALUE` or `--name=VALUE`,
the global ones before the command or after it. Anything else (help, an abbreviation, a
value that starts with '-', a number or a format argparse would refuse, a stray word,
shell completion) is left to argparse, which reads it or says what is wrong.
tests/unit/test_token_arguments.py holds the two readings to the same answers.
"""

from __future__ import annotations

from ..locations import DEFAULT_TIMEOUT_SECONDS
from ._token import DEFAULT_ENV_NAME, FORMATS

TYPE_CHECKING = False  # not typing's: see signin_broker/__init__.py
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


class TokenArguments:
    """What argparse's namespace holds for `token`, with the same defaults."""

    def __init__(self) -> None:
        self.command = "token"
        self.json = False
        self.socket: str | None = None
        self.timeout = DEFAULT_TIMEOUT_SECONDS
        self.account = ""
        self.scopes: list[str] = []
        self.min_ttl = 0
        self.audience = ""
        self.format = "bare"
        self.id_token = False
        self.env_name = DEFAULT_ENV_NAME
        self.method = ""
        self.url = ""
        self.nonce = ""
        self.acr_values = ""
        self.max_age: int | None = None


def _format(value: str) -> str:
    if value not in FORMATS:
        raise ValueError(value)
    return value


# An option's full name: its attribute, and how its value is read (None: a flag).
GLOBAL_OPTIONS: dict[str, tuple[str, Callable[[str], object] | None]] = {
    "--socket": ("socket", str),
    "--timeout": ("timeout", float),
}
TOKEN_OPTIONS: dict[str, tuple[str, Callable[[str], object] | None]] = {
    **GLOBAL_OPTIONS,
    "--json": ("json", None),
    "--account": ("account", str),
    "--scope": ("scopes", str),  # appended
    "--min-ttl": ("min_ttl", int),
    "--audience": ("audience", str),
    "--format": ("format", _format),
    "--id-token": ("id_token", None),
    "--env-name": ("env_name", str),
    "--method": ("method", str),
    "--url": ("url", str),
    "--nonce": ("nonce", str),
    "--acr-values": ("acr_values", str),
    "--max-age": ("max_age", int),
}


def read_token_arguments(argv: Sequence[str]) -> TokenArguments | None:
    """The `token` command's arguments, or None where argparse must read the line."""
    arguments = TokenArguments()
    options = GLOBAL_OPTIONS
    words = iter(argv)
    for word in words:
        if word == "token" and options is GLOBAL_OPTIONS:
            options = TOKEN_OPTIONS
            continue
        name, equals, value = word.partition("=")
        if name not in options:
            return None
        attribute, read = options[name]
        if read is None:
            if equals:  # argparse: "ignored explicit argument"
                return None
            setattr(arguments, attribute, True)
            continue
        if not equals:
            following = next(words, None)
            if following is None or following.startswith("-"):
                return None
            value = following
        elif value == "--":  # argparse drops a "--" even from `--socket=--`
            return None
        try:
            given = read(value)
        except ValueError:
            return None
        if attribute == "scopes":
            arguments.scopes.append(value)
        else:
            setattr(arguments, attribute, given)
    return arguments if options is TOKEN_OPTIONS else None
