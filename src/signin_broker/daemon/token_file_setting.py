"""The `[token_files.<name>]` tables of the config file: the token files the daemon keeps fresh.

Each names a file the daemon writes an account's access token into, and rewrites before
the token it holds is due, for a program that reads a bearer token from a file and
cannot ask the socket (Prometheus' `credentials_file`, curl's `-H @file`, systemd's
`LoadCredential=`). Its keys: `path` (absolute), `account` (empty: the default one; any
name a request may use), `scopes` and `audience` (a down-scoped token, within what the
account has), and `format`: the bare `token`, an `Authorization:` `header` line, `json`
with its expiry, or an `env` file. The file is the app `file:<name>` in the app policy
and the audit. Like a `[providers.<alias>]` table, a later config file's keys win over
an earlier one's, key by key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..identities import AppId, AppKind
from ..session.validation import check_account, check_audience, check_scopes

TOKEN_FILES_TABLE = "token_files"  # noqa: S105 - a table's name
TOKEN_FILE_KEYS = ("path", "account", "scopes", "audience", "format")
FORMATS = ("token", "header", "json", "env")
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAX_TOKEN_FILES = 64


@dataclass(frozen=True, slots=True)
class TokenFileSetting:
    """One token file as configured: where, of which account and token, in which format."""

    name: str
    path: Path
    account: str  # "" for the default account
    scopes: tuple[str, ...]  # empty: the sign-in's
    audience: str  # "" for none (RFC 8707)
    format: str  # one of FORMATS
    source: str = ""  # "from /home/alice/.config/signin-broker/config.toml"

    @property
    def app(self) -> str:
        """Its name as an app, in the app policy and the audit."""
        return str(AppId(AppKind.FILE, self.name))


def parse_token_files(
    tables: Mapping[str, Mapping[str, object]], files: Mapping[str, Sequence[Path]]
) -> tuple[TokenFileSetting, ...]:
    """The tables checked, in their order; ValueError names the table and what is wrong."""
    if len(tables) > MAX_TOKEN_FILES:
        raise ValueError(f"at most {MAX_TOKEN_FILES} [{TOKEN_FILES_TABLE}.<name>] tables")
    settings = []
    for name, table in tables.items():
        where = f"[{TOKEN_FILES_TABLE}.{name}] in {', '.join(map(str, files.get(name, ())))}"
        try:
            settings.append(_one(name, table, where))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    paths = [setting.path for setting in settings]
    twice = sorted({str(path) for path in paths if paths.count(path) > 1})
    if twice:
        raise ValueError(f"two token files name the same path {twice[0]}; give each its own")
    return tuple(settings)


def _one(name: str, table: Mapping[str, object], where: str) -> TokenFileSetting:
    if not NAME.fullmatch(name):
        raise ValueError(
            "a token file's name is 1 to 32 lower-case letters, digits, - or _, starting"
            " with a letter or digit"
        )
    path_text = _text(table.get("path", ""), "path")
    path = Path(path_text).expanduser()
    if not path_text or not path.is_absolute() or path.name in ("", ".", ".."):
        raise ValueError("path must be the absolute path of a file, e.g. /run/user/1000/tokens/api")
    form = _text(table.get("format", "token"), "format")
    if form not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    scopes = table.get("scopes", [])
    if isinstance(scopes, str):
        scopes = scopes.split()
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise ValueError('scopes must be a list of scopes, e.g. ["read"]')
    return TokenFileSetting(
        name=name,
        path=path,
        account=check_account(_text(table.get("account", ""), "account")),
        scopes=check_scopes(scopes),
        audience=check_audience(_text(table.get("audience", ""), "audience")),
        format=form,
        source=f"from {where.partition(' in ')[2]}",
    )


def _text(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")  # noqa: TRY004 - the settings' ValueError
    return value.strip()
