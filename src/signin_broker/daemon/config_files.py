"""The config files: an organisation's managed defaults below the user's own file.

Git Credential Manager reads /etc/git-credential-manager/config.d; the broker reads
`signin-broker/config.toml`, then `signin-broker/config.d/*.toml` in name order, in each
of the system config folders ($XDG_CONFIG_DIRS, default /etc/xdg; the first one named
wins), then the user's file. A later file's value wins over an earlier one's, key by
key, and so do the keys of a `[providers.<alias>]` table. Each value remembers its
file, so the daemon can say which file set what.

A managed file someone else can change could send the user's sign-in to another
issuer: one that a user other than root or the user can write, or that sits in such a
folder, stops the daemon with the command that makes it safe.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import locations
from .options import OPTIONS, PROVIDER_KEYS, PROVIDERS_TABLE

DEFAULT_SYSTEM_CONFIG_DIRS = "/etc/xdg"
DROP_IN_FOLDER = "config.d"
KNOWN_KEYS = frozenset({option.name for option in OPTIONS} | {PROVIDERS_TABLE})


class ConfigError(Exception):
    """A config file cannot be used; the message names it and says why."""


@dataclass(slots=True)
class ConfigValues:
    """The files' values merged, and for each value the file it came from."""

    values: dict[str, object] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)
    providers: dict[str, dict[str, object]] = field(default_factory=dict)
    provider_sources: dict[str, dict[str, Path]] = field(default_factory=dict)
    provider_files: dict[str, list[Path]] = field(default_factory=dict)  # each table's files
    user_file: Path | None = None  # the user's own file, when one was read

    def add(self, path: Path, values: dict[str, object]) -> None:
        """Lay one file's values over those read before."""
        for key, value in values.items():
            if key != PROVIDERS_TABLE:
                self.values[key], self.sources[key] = value, path
        for alias, table in _provider_tables(path, values.get(PROVIDERS_TABLE, {})).items():
            self.provider_files.setdefault(alias, []).append(path)
            merged = self.providers.setdefault(alias, {})
            sources = self.provider_sources.setdefault(alias, {})
            for key, value in table.items():
                merged[key], sources[key] = value, path


def system_files(environ: Mapping[str, str]) -> list[Path]:
    """The managed files that exist, the least important first."""
    named = (environ.get("XDG_CONFIG_DIRS") or DEFAULT_SYSTEM_CONFIG_DIRS).split(":")
    folders = [Path(folder) for folder in named if Path(folder).is_absolute()]
    files = []
    for folder in reversed(folders):  # the first one named is the most important
        base = folder / locations.APP_NAME
        files.append(base / locations.CONFIG_NAME)
        drop_ins = base / DROP_IN_FOLDER
        if drop_ins.is_dir():
            files.extend(sorted(drop_ins.glob("*.toml")))
    return [path for path in files if path.is_file()]


def read_all(managed: list[Path], user_file: Path | None, user_file_required: bool) -> ConfigValues:
    """The managed files, then the user's, each checked, merged key by key."""
    merged = ConfigValues()
    for path in managed:
        try:
            _check_managed(path)
            merged.add(path, _read(path))
        except FileNotFoundError:  # removed since it was listed: as if never there
            continue
    if user_file is not None:
        try:
            values = _read(user_file)
        except FileNotFoundError:
            if user_file_required:
                raise ConfigError(f"config file {user_file} does not exist") from None
        else:
            merged.add(user_file, values)
            merged.user_file = user_file
    return merged


def _read(path: Path) -> dict[str, object]:
    """One file's values, its keys known ones; FileNotFoundError when it is not there."""
    try:
        with path.open("rb") as file:
            values = tomllib.load(file)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    except OSError as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ConfigError(f"config file {path} cannot be read: {error.strerror}") from None
    unknown = sorted(set(values) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"config file {path} has unknown settings {', '.join(unknown)};"
            f" known: {', '.join(sorted(KNOWN_KEYS))}"
        )
    return values


def _provider_tables(path: Path, tables: object) -> dict[str, dict[str, object]]:
    """A file's `[providers.<alias>]` tables, their keys known ones."""
    if not isinstance(tables, dict):
        raise ConfigError(f"{PROVIDERS_TABLE} in {path} must be tables: [providers.work]")
    for alias, table in tables.items():
        where = f"[{PROVIDERS_TABLE}.{alias}] in {path}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table of provider settings")
        unknown = sorted(set(table) - set(PROVIDER_KEYS))
        if unknown:
            raise ConfigError(
                f"{where} has unknown settings {', '.join(unknown)};"
                f" known: {', '.join(PROVIDER_KEYS)}"
            )
    return tables


def _check_managed(path: Path) -> None:
    """A managed file, and its folder, must be changeable by root or the user alone."""
    for checked in (path, path.parent):
        info = checked.stat()
        shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if info.st_uid not in (0, os.geteuid()) or shared:
            mode = stat.S_IMODE(info.st_mode)
            raise ConfigError(
                f"managed config {path} could be changed by another user ({checked} is owned"
                f" by uid {info.st_uid}, mode {mode:04o}), so it could send your sign-in"
                f" elsewhere; make it root's and not writable by others (sudo chown root"
                f" {checked} && sudo chmod go-w {checked}), or remove it"
            )
