"""The user's app policy file: which apps may get tokens, of which accounts and scopes.

The file is TOML in the config folder (`apps.toml`), one `[[apps]]` table per app.
The user may edit it by hand; `signin-broker apps allow|deny` writes it through the
daemon. It is re-read whenever it changes on disk; a file that does not parse is
reported (log, `signin-broker apps`) and the last good policy stays in force, so a
typo never opens or closes everything at once.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
import stat as stat_module
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...identities import AppId, AppKind
from ...session.validation import check_origins, check_scope
from ...store.files import write_atomically

log = logging.getLogger(__name__)

SHA256 = re.compile(r"[0-9a-f]{64}")
HEADER = """\
# signin-broker app policy: which apps may get tokens from the broker.
# decision: "allow", "deny" or "ask" (each request waits for `signin-broker apps allow|deny`).
# accounts: only these accounts (default: all); scopes: at most these (default: the sign-in's);
# sha256: only this build of the executable (or script); id_token: may have the ID token too.
# origins: a browser extension (app "browser:<browser>/<id>") gets tokens for these web
# origins only; without them, for none.
# Written by `signin-broker apps`; hand edits are read when the file changes.
"""


class Decision(enum.StrEnum):
    """What the user decided for an app."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class PolicyError(Exception):
    """The policy file cannot be used; the message says where and why."""


@dataclass(frozen=True, slots=True)
class AppRule:
    """The user's decision for one app."""

    app: str
    decision: Decision
    accounts: tuple[str, ...] = ()  # empty: every account
    scopes: tuple[str, ...] = ()  # empty: the scopes of the sign-in
    sha256: str = ""  # pins the program file; "" accepts any
    id_token: bool = False  # may have the account's ID token as well (never by default)
    origins: tuple[str, ...] = ()  # a browser extension's web origins; empty: none


def parse(text: str, source: str = "apps.toml") -> dict[str, AppRule]:
    """The rules of a policy file, by app; PolicyError says what is wrong."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{source} is not valid TOML: {error}") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise PolicyError(f"{source} nests too deeply to be read") from None
    unknown = sorted(set(document) - {"apps"})
    if unknown:
        raise PolicyError(f"{source}: unknown key {unknown[0]!r}; only [[apps]] tables belong here")
    tables = document.get("apps", [])
    if not isinstance(tables, list):
        raise PolicyError(f"{source}: apps must be an array of tables ([[apps]])")
    rules: dict[str, AppRule] = {}
    for number, table in enumerate(tables, start=1):
        try:
            rule = _rule(table)
        except (TypeError, ValueError) as error:
            raise PolicyError(f"{source}: app entry {number}: {error}") from None
        if rule.app in rules:
            raise PolicyError(f"{source}: app entry {number}: {rule.app!r} is listed twice")
        rules[rule.app] = rule
    return rules


KEYS = ("app", "decision", "accounts", "scopes", "sha256", "id_token", "origins")


def _rule(table: object) -> AppRule:
    if not isinstance(table, Mapping):
        raise TypeError("must be a table")
    unknown = sorted(set(table) - {*KEYS})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}")
    app = table.get("app")
    if not isinstance(app, str) or not app.strip():
        raise ValueError("app must be the app's id (see `signin-broker apps`)")
    try:
        decision = Decision(str(table.get("decision")))
    except ValueError:
        raise ValueError('decision must be "allow", "deny" or "ask"') from None
    sha256 = table.get("sha256", "")
    if not isinstance(sha256, str) or (sha256 and not SHA256.fullmatch(sha256)):
        raise ValueError("sha256 must be 64 lower-case hex digits")
    id_token = table.get("id_token", False)
    if not isinstance(id_token, bool):
        raise TypeError("id_token must be true or false")
    if id_token and decision is not Decision.ALLOW:
        raise ValueError('id_token = true needs decision = "allow"')
    origins = check_origins(_strings(table.get("origins", []), "origins"))
    if origins and AppId.parse(app.strip()).kind is not AppKind.BROWSER:
        raise ValueError('origins are a browser extension\'s (app = "browser:<browser>/<id>")')
    return AppRule(
        app=app.strip(),
        decision=decision,
        accounts=_strings(table.get("accounts", []), "accounts"),
        scopes=tuple(check_scope(scope) for scope in _strings(table.get("scopes", []), "scopes")),
        sha256=sha256,
        id_token=id_token,
        origins=origins,
    )


def _strings(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"{name} must be a list of non-empty strings")
    return tuple(value)


def render(rules: Iterable[AppRule]) -> str:
    """The policy file for these rules (parse(render(r)) gives r back)."""
    parts = [HEADER]
    for rule in sorted(rules, key=lambda r: r.app):
        lines = [
            "",
            "[[apps]]",
            f"app = {_quoted(rule.app)}",
            f"decision = {_quoted(rule.decision)}",
        ]
        if rule.accounts:
            lines.append(f"accounts = [{', '.join(map(_quoted, rule.accounts))}]")
        if rule.scopes:
            lines.append(f"scopes = [{', '.join(map(_quoted, rule.scopes))}]")
        if rule.sha256:
            lines.append(f"sha256 = {_quoted(rule.sha256)}")
        if rule.id_token:
            lines.append("id_token = true")
        if rule.origins:
            lines.append(f"origins = [{', '.join(map(_quoted, rule.origins))}]")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


def _quoted(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


class PolicyFile:
    """The rules as last read from the file, re-read when the file changes on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rules: dict[str, AppRule] = {}
        self.error = ""
        self._seen: tuple[int, int, int, int] | None = None  # see _signature

    def refresh(self) -> None:
        """Re-read the file if it changed; keep the last good rules when it is broken."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            if self._seen is not None:
                log.info("the app policy file is gone; no app has a recorded decision")
            self._seen, self.rules, self.error = None, {}, ""
            return
        signature = _signature(stat)
        if signature == self._seen:
            return
        self._seen = signature
        try:
            self.rules = parse(_read_policy(self.path), str(self.path))
        except (PolicyError, OSError, UnicodeDecodeError) as error:
            self.error = f"{error}; the last good policy stays in force"
            log.error(  # noqa: TRY400 - the reason says it all; no traceback
                "the app policy file cannot be used", extra={"reason": self.error}
            )
            return
        self.error = ""
        log.info("app policy read", extra={"file": str(self.path), "apps": len(self.rules)})

    def save(self, rules: dict[str, AppRule]) -> None:
        """Write the rules (0600, atomically) and use them."""
        write_atomically(self.path, render(rules.values()).encode())
        self._seen = _signature(self.path.stat())
        self.rules, self.error = dict(rules), ""


def _signature(stat: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a changed file from the one last read: inode, size, mtime and ctime."""
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


MAX_POLICY_BYTES = 1 << 20


def _read_policy(path: Path) -> str:
    """The policy file's text: a regular file (a FIFO would stall the daemon), bounded."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            raise PolicyError(f"{path} is not a regular file")
        data = os.read(fd, MAX_POLICY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(f"{path} is larger than {MAX_POLICY_BYTES} bytes")
    return data.decode("utf-8")
