"""Token files on disk: what each format holds, the folder it may go in, its write and removal.

A token file is read by programs that never speak to the daemon, so it must never be
seen half-written or empty: it is written whole to a temporary file beside it (0600,
created exclusively, never through a symlink), synced, and renamed over the old one
(write_atomically), so a reader gets the old token or the new one, even across a
SIGKILL. Its folder is checked as the socket's is: a real folder of the user's (no
symlink anywhere on its path, which could move the file elsewhere), that no other user
can write to (they could replace the file with a token of their own, or delete it). A
folder that is only readable by others is left as it is: the file itself is 0600.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
from collections.abc import Sequence
from pathlib import Path

from .files import UnsafeStorage, leftover_writes, sync_folder, write_atomically

ENV_NAME = "SIGNIN_BROKER_TOKEN"  # the variable `exec` and `token --format env` use too


def render(
    form: str,
    *,
    access_token: str,
    token_type: str,
    expires_at: int,
    scopes: Sequence[str],
    account: str,
) -> bytes:
    """A token file's bytes in `form`: token, header, json or env (token_file_setting.FORMATS).

    The bare token has no newline (readers such as Prometheus and Kubernetes' tokenFile
    take the file whole); the others are lines. The token is printable ASCII (the
    provider's answer was checked so), so no line can be split by it; the env file
    quotes it for a shell.
    """
    if form == "header":
        return f"Authorization: {token_type} {access_token}\n".encode()
    if form == "env":
        return f"{ENV_NAME}={shlex.quote(access_token)}\n".encode()
    if form == "json":
        document = {
            "access_token": access_token,
            "token_type": token_type,
            "expires_at_unix": expires_at,
            "scopes": list(scopes),
            "account": account,
        }
        return json.dumps(document, indent=2).encode() + b"\n"
    return access_token.encode()


def check_token_folder(folder: Path, *, create: bool = False) -> None:
    """Refuse (UnsafeStorage, saying why and what to do) a folder a token file may not go in.

    Every name on its path must be a real folder, no symlink; the folder must be the
    user's and not writable by group or others; each folder above it root's or the
    user's, writable by others only with the sticky bit (as /tmp). With `create`, a
    missing folder is made 0700 (its missing parents too).
    """
    if not folder.is_absolute():
        raise UnsafeStorage(f"token file folder {folder} is not an absolute path")
    if create:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise UnsafeStorage(
                f"cannot create the token file folder {folder}: {error.strerror}"
            ) from None
    here = Path(folder.anchor)
    for name in folder.parts[1:]:
        _check_ancestor(here)
        here /= name
        try:
            info = here.lstat()
        except FileNotFoundError:
            raise UnsafeStorage(f"token file folder {folder} does not exist") from None
        if stat.S_ISLNK(info.st_mode):
            raise UnsafeStorage(
                f"token file folder {folder} is reached through the symlink {here}, which"
                f" could send the file elsewhere; name the real folder ({os.path.realpath(here)})"
            )
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeStorage(f"{here} on the way to token file folder {folder} is not a folder")
    _check_own(folder, folder.lstat())


def _check_ancestor(ancestor: Path) -> None:
    info = ancestor.lstat()
    if info.st_uid not in (0, os.geteuid()) or (
        info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX
    ):
        raise UnsafeStorage(
            f"folder {ancestor} can be changed by another user (owner uid {info.st_uid}, mode"
            f" {stat.S_IMODE(info.st_mode):04o}), who could replace a token file under it;"
            " choose a folder under folders of yours or root's"
        )


def _check_own(folder: Path, info: os.stat_result) -> None:
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.geteuid():
        raise UnsafeStorage(
            f"token file folder {folder} belongs to uid {info.st_uid}, not to you"
            f" (uid {os.geteuid()}); choose a folder of yours"
        )
    if mode & 0o022:
        raise UnsafeStorage(
            f"token file folder {folder} can be written by other users (mode {mode:04o}): they"
            f" could replace the token or remove it; run `chmod go-w {folder}`"
        )


def write_token_file(path: Path, data: bytes) -> None:
    """Put the file in place whole (0600), its folder checked (made if missing); else OSError."""
    write_atomically(path, data, check_folder=_checked_and_made)


def _checked_and_made(folder: Path) -> None:
    check_token_folder(folder, create=True)


def remove_token_file(path: Path) -> bool:
    """Remove the file (a symlink there is removed, never followed); whether one was there.

    OSError when it cannot be removed (a folder in its place, no permission).
    """
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    with contextlib.suppress(OSError):
        sync_folder(path.parent)  # the removal survives a power cut
    return True


def sweep_leftovers(path: Path) -> int:
    """Remove the temporary files a killed write of this file left beside it; how many."""
    removed = 0
    for leftover in leftover_writes(path.parent).get(path.name, []):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
            removed += 1
    return removed
