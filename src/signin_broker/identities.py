"""Ids written and read one way: an account's `[<alias>/]user:<sub>[:workspace:<id>]`, an app's.

A tenant is a user plus an optional workspace (docs/contract.md §10); an account of a
provider other than the main one is prefixed with its alias, as a `sub` is unique only
at its issuer (OpenID Connect Core 2). A `sub` may be any string of up to 255 ASCII
characters (Salesforce's is a URL), so the characters the form uses to separate its
parts, and any that could not be shown or typed, are percent-encoded: ":", "%",
whitespace and anything unprintable or non-ASCII. A sub without them reads as itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import quote, unquote

PROVIDER_ALIAS = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAIN_ALIAS = ""  # the main provider's alias: its accounts' ids carry none
MAIN_NAME = "main"  # how a person names the main provider (no other may be called so)
_FORM = re.compile(
    rf"(?:(?P<provider>{PROVIDER_ALIAS.pattern})/)?"
    r"user:(?P<user>[^:\s]+)(?::workspace:(?P<workspace>[^:\s]+))?"
)
# What a sub keeps as it is: printable ASCII but the separator ":" and the escape "%".
_PLAIN = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in ":%")


def alias_named(name: str) -> str:
    """The alias of the provider a person names ("main" is the main provider's)."""
    return MAIN_ALIAS if name == MAIN_NAME else name


def name_of(alias: str) -> str:
    """How a person names the provider with this alias."""
    return alias or MAIN_NAME


@dataclass(frozen=True, slots=True)
class AccountId:
    """One account: its user (the provider's `sub`), workspace and provider alias."""

    user: str
    workspace: str = ""
    provider: str = ""  # "" for the main provider

    def __post_init__(self) -> None:
        if not self.user:
            raise ValueError("an account needs its user (the provider's sub)")
        if self.provider and not PROVIDER_ALIAS.fullmatch(self.provider):
            raise ValueError(f"{self.provider!r} is not a provider alias")

    def __str__(self) -> str:
        tenant = f"user:{quote(self.user, safe=_PLAIN)}"
        if self.workspace:
            tenant += f":workspace:{quote(self.workspace, safe=_PLAIN)}"
        return f"{self.provider}/{tenant}" if self.provider else tenant

    @classmethod
    def parse(cls, text: str) -> AccountId:
        """The account an id names; ValueError when it is not one."""
        form = _FORM.fullmatch(text)
        if form is None:
            raise ValueError(
                f"{text[:80]!r} is not an account id ([<alias>/]user:<id>[:workspace:<id>])"
            )
        return cls(unquote(form["user"]), unquote(form["workspace"] or ""), form["provider"] or "")


class AppKind(StrEnum):
    """Who vouches for an app's identity: the kernel's view of its program, or a sandbox."""

    PROGRAM = "program"
    FLATPAK = "flatpak"  # the app id in the sandbox's /.flatpak-info
    SNAP = "snap"  # the snap's name in its enforced AppArmor label
    FORWARD = "forward"  # whatever connects on the forward's socket (its name)
    BROWSER = "browser"  # an extension, through the broker's native host: "<browser>/<id>"
    FILE = "file"  # a token file the daemon writes (`[token_files.<name>]`), read by any program


_SANDBOXES = {kind.value for kind in AppKind if kind is not AppKind.PROGRAM}
# A browser extension's id, as its browser names it: Chromium's 32 letters a-p (from its
# key), Firefox's add-on id (an e-mail-like name, or a GUID in braces).
CHROMIUM_EXTENSION_ID = re.compile(r"[a-p]{32}")
FIREFOX_EXTENSION_ID = re.compile(
    r"[A-Za-z0-9._+-]{1,80}@[A-Za-z0-9._-]{1,80}"
    r"|\{[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\}"
)


@dataclass(frozen=True, slots=True)
class AppId:
    """An app as the policy file, the audit and `signin-broker apps` name it.

    A sandboxed app is `<kind>:<its id>` ("flatpak:org.example.App", "snap:name"), and so
    is every connection on a forward ("forward:name", the socket vouching for it), a
    browser extension ("browser:chromium/<extension id>", the browser that started the
    broker's native host vouching for it) and a token file the daemon writes
    ("file:name", whoever can read it); any other is its executable and, after a
    space, what an interpreter runs ("/usr/bin/python3 /home/alice/app.py"). Read here
    alone: a path may hold a colon, and only a known sandbox's prefix makes a sandbox.
    """

    kind: AppKind
    name: str  # the sandbox's id, or the program's executable ("" when unreadable)
    script: str = ""  # a program's script or `-m module`; "" for a native one or a sandbox

    @classmethod
    def parse(cls, text: str) -> AppId:
        """The app a text names (the policy file's key, an RPC's argument)."""
        head, space, script = text.partition(" ")
        kind, colon, name = head.partition(":")
        if colon and kind in _SANDBOXES and name and not space:
            return cls(AppKind(kind), name)
        return cls(AppKind.PROGRAM, head, script)

    @property
    def sandboxed(self) -> bool:
        """Whether a sandbox, forward, browser or file names it (it has no program file to pin)."""
        return self.kind is not AppKind.PROGRAM

    def __str__(self) -> str:
        if self.sandboxed:
            return f"{self.kind}:{self.name}"
        return f"{self.name} {self.script}" if self.script else self.name
