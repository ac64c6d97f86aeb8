"""The config files: an organisation's managed defaults below the user's own file.

Git Credential Manager reads /etc/git-credential-manager/config.d; the broker reads
`signin-broker/config.toml`, then `signin-broker/config.d/*.toml` in name order, in each
of the system config folders ($XDG_CONFIG_DIRS, default /etc/xdg; the first one named
wins), then the user's file. A later file's value wins over an earlier one's, key by
key, and so do the keys of a `[providers.<alias>]` and a `[token_files.<name>]` table.
Each value remembers its file, so the daemon can say which file set what.

A managed file someone else can change could send the user's sign-in to another
issuer: one that a user other than root or the user can write, or that is reached
through such a folder (a symlink in config.d to a folder another user owns included),
stops the daemon with the command that makes it safe.

One that such a user could delete would start the daemon silently without the
organisation's settings. So the daemon remembers the managed files it has read, in
its state folder (ManagedFilesRead), and says so in status and the doctor when one
read before is not there now, or when a symlink in config.d leads nowhere.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import locations
from ..json_depth import within_depth
from ..store.files import read_regular_file, write_atomically
from .options import OPTIONS, PROVIDER_KEYS, PROVIDERS_TABLE
from .token_file_setting import TOKEN_FILE_KEYS, TOKEN_FILES_TABLE

DEFAULT_SYSTEM_CONFIG_DIRS = "/etc/xdg"
DROP_IN_FOLDER = "config.d"
KNOWN_KEYS = frozenset({option.name for option in OPTIONS} | {PROVIDERS_TABLE, TOKEN_FILES_TABLE})
# The tables of a config file: their keys, and what each holds.
TABLES = {
    PROVIDERS_TABLE: (PROVIDER_KEYS, "provider"),
    TOKEN_FILES_TABLE: (TOKEN_FILE_KEYS, "token file"),
}


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
    token_files: dict[str, dict[str, object]] = field(default_factory=dict)
    token_file_files: dict[str, list[Path]] = field(default_factory=dict)  # each table's files
    user_file: Path | None = None  # the user's own file, when one was read
    managed: list[Path] = field(default_factory=list)  # the managed files read
    leading_nowhere: list[Path] = field(default_factory=list)  # managed symlinks to nothing

    def add(self, path: Path, values: dict[str, object]) -> None:
        """Lay one file's values over those read before."""
        for key, value in values.items():
            if key not in TABLES:
                self.values[key], self.sources[key] = value, path
        for alias, table in _tables(path, values, PROVIDERS_TABLE).items():
            self.provider_files.setdefault(alias, []).append(path)
            merged = self.providers.setdefault(alias, {})
            sources = self.provider_sources.setdefault(alias, {})
            for key, value in table.items():
                merged[key], sources[key] = value, path
        for name, table in _tables(path, values, TOKEN_FILES_TABLE).items():
            self.token_file_files.setdefault(name, []).append(path)
            self.token_files.setdefault(name, {}).update(table)


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
    return [path for path in files if path.is_file() or path.is_symlink()]


def read_all(managed: list[Path], user_file: Path | None, user_file_required: bool) -> ConfigValues:
    """The managed files, then the user's, each checked, merged key by key."""
    merged = ConfigValues()
    for path in managed:
        try:
            _check_managed(path)
            merged.add(path, _read(path))
        except FileNotFoundError:  # a symlink to nothing, or removed since it was listed
            if path.is_symlink():
                merged.leading_nowhere.append(path)
            continue
        merged.managed.append(path)
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
    except RecursionError:  # tomllib recurses once per level of nesting
        raise ConfigError(f"config file {path} nests too deeply to be read") from None
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


def _tables(path: Path, values: dict[str, object], kind: str) -> dict[str, dict[str, object]]:
    """A file's `[<kind>.<name>]` tables (providers, token_files), their keys known ones."""
    tables = values.get(kind, {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{kind} in {path} must be tables: [{kind}.<name>]")
    for name, table in tables.items():
        where = f"[{kind}.{name}] in {path}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table of {TABLES[kind][1]} settings")
        known = TABLES[kind][0]
        unknown = sorted(set(table) - set(known))
        if unknown:
            raise ConfigError(
                f"{where} has unknown settings {', '.join(unknown)}; known: {', '.join(known)}"
            )
    return tables


MAX_LINKS = 40  # symlinks followed in one path, as Linux's own limit


def _check_managed(path: Path) -> None:
    """A managed file must be changeable by root or the user alone, wherever it really is.

    Every folder looked in on the way to the file, through each symlink met, must be
    root's or the user's, and writable by others only where the sticky bit keeps them
    from replacing what is not theirs (as /tmp); its own folder and config.d not at
    all. Each symlink and the file must be root's or the user's. A folder another user
    owns or can write could swap what the path names for any file. FileNotFoundError
    when the file (or a folder, or a symlink's target) is not there, once the folders
    seen so far passed.
    """
    looked_in, met, there = _resolve(path)
    # config.d (or the folder of config.toml), and the folder the file really is in
    strict = {Path(os.path.realpath(path.parent)), looked_in[-1]}
    for folder in looked_in:
        info = folder.stat()
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if info.st_uid not in (0, os.geteuid()) or (
            writable and (folder in strict or not info.st_mode & stat.S_ISVTX)
        ):
            _refuse(path, folder, info, "folder")
    for entry, info in met:
        if info.st_uid not in (0, os.geteuid()) or (
            stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            _refuse(path, entry, info, "symlink" if stat.S_ISLNK(info.st_mode) else "file")
    if not there:
        raise FileNotFoundError(
            f"managed config {path} leads to {os.path.realpath(path)}, not there"
        )
    if not stat.S_ISREG(met[-1][1].st_mode):  # a FIFO would hold the start for good
        raise ConfigError(f"managed config {path} is not a regular file; remove it")


def _resolve(path: Path) -> tuple[list[Path], list[tuple[Path, os.stat_result]], bool]:
    """The folders looked in to reach `path`, the symlinks and file met, as the kernel goes.

    And whether it is there: False when a name on the way is not (the folders and
    symlinks met before it are all there are).
    """
    looked_in: list[Path] = []
    met: list[tuple[Path, os.stat_result]] = []
    folder, names, links = Path("/"), list(path.absolute().parts[1:]), 0
    while names:
        name = names.pop(0)
        if name in ("", ".", "/"):
            continue
        if name == "..":
            folder = folder.parent
            continue
        looked_in.append(folder)
        entry = folder / name
        try:
            info = entry.lstat()
        except FileNotFoundError:
            return looked_in, met, False
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_LINKS:
                raise ConfigError(f"managed config {path}: more than {MAX_LINKS} symlinks")
            met.append((entry, info))
            target = entry.readlink()
            names = [*target.parts, *names]
            folder = Path("/") if target.is_absolute() else folder
        elif not names:
            met.append((entry, info))  # the file itself
        elif stat.S_ISDIR(info.st_mode):
            folder = entry
        else:
            raise ConfigError(f"managed config {path}: {entry} on the way to it is not a folder")
    return looked_in, met, True


def _refuse(path: Path, culprit: Path, info: os.stat_result, kind: str) -> None:
    mode = stat.S_IMODE(info.st_mode)
    where = "" if culprit in (path, path.parent) else f" (on the way to {os.path.realpath(path)})"
    raise ConfigError(
        f"managed config {path} could be changed by another user ({kind} {culprit}{where}"
        f" is owned by uid {info.st_uid}, mode {mode:04o}), so it could send your sign-in"
        f" elsewhere; make it root's and not writable by others (sudo chown root {culprit}"
        f" && sudo chmod go-w {culprit}), or remove it"
    )


def managed_problems(
    state_dir: Path, read: Iterable[Path], leading_nowhere: Iterable[Path], *, remember: bool
) -> list[str]:
    """What status and the doctor say of the managed files: links to nothing, files gone.

    With `remember`, the files read now join those remembered (OSError when the state
    folder cannot take them: the problems found are still right).
    """
    read = list(read)
    nowhere = {str(path): path for path in leading_nowhere}
    problems = [
        f"managed config {path} leads to {os.path.realpath(path)}, which is not there: its"
        " settings do not apply; ask whoever manages this computer"
        for path in nowhere.values()
    ]
    memory = ManagedFilesRead(state_dir)
    problems += [said for path, said in memory.gone(read) if path not in nowhere]
    if remember:
        memory.remember(read)
    return problems


class ManagedFilesRead:
    """The managed files the daemon has read at any start, kept in its state folder.

    The state folder: it lasts across restarts and reboots (the runtime folder is
    emptied at each), it is the user's alone (0700), so the other users who could
    delete a managed file cannot make the daemon forget it, and it holds what the
    daemon itself found, unlike the config folder, which holds what the person wants.
    A file stays remembered until it is there again or the person forgets it
    (`rm` of this file: the organisation removed it on purpose).
    """

    NAME = "managed-config.json"

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / self.NAME

    def gone(self, read: Iterable[Path]) -> list[tuple[str, str]]:
        """Each managed file read before and not read now, with what to say of it."""
        now = {str(path) for path in read}
        return [
            (
                path,
                f"managed config {path} was read at an earlier start and is not there now"
                " (removed, or what it led to is gone): its settings no longer apply; ask"
                " whoever manages this computer, and if it was removed on purpose, forget it:"
                f" rm {self.path}",
            )
            for path in self.remembered()
            if path not in now
        ]

    def remembered(self) -> list[str]:
        """The managed files read at earlier starts; [] when none is known (or unreadable)."""
        try:
            kept = json.loads(within_depth(read_regular_file(self.path) or b"{}"))
        except (OSError, ValueError):
            return []
        files = kept.get("read") if isinstance(kept, dict) else None
        return [path for path in files if isinstance(path, str)] if isinstance(files, list) else []

    def remember(self, read: Iterable[Path]) -> None:
        """Add the files read now (written only when there is something new); OSError if not."""
        kept = self.remembered()
        new = sorted({*kept, *map(str, read)})
        if new != sorted(kept):
            write_atomically(self.path, json.dumps({"read": new}, indent=1).encode())
