"""Safe file access for the daemon's state: private folders, crash-safe writes, bounded reads.

A folder the daemon writes into must be the user's alone: where another uid can add
entries, it can plant a symlink where a file is about to be written, or put an older
copy back. Files are opened without following symlinks and only regular files are
read, bounded, so a FIFO or a device left there can neither block nor flood the daemon.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from ..json_depth import within_depth

MAX_FILE_BYTES = 1 << 20  # a state or key file is a few kilobytes
# What write_atomically writes before its rename: `.<name>.<16 hex digits>.tmp`.
TEMPORARY_NAME = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{16}\.tmp")


class UnsafeStorage(OSError):
    """A folder or file is not safely the user's; the message says what to run.

    An OSError, so callers that handle a failed read or write handle this one too.
    """


def private_folder(folder: Path, *, with_ancestors: bool = False) -> None:
    """Create the folder 0700 if missing; refuse one other users could add entries to.

    The folder must be a real directory (not a symlink), owned by the user, and not
    writable by group or others; read access for others is removed. With ancestors,
    each folder above it must also be safe from other users: owned by root or the
    user, and writable by others only with the sticky bit (as /tmp is).
    """
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise UnsafeStorage(f"{folder} is not a folder; move it away") from None
    except OSError as error:
        raise UnsafeStorage(f"cannot create folder {folder}: {error.strerror}") from error
    try:
        descriptor = _open_folder(folder)
    except FileNotFoundError:
        raise UnsafeStorage(f"folder {folder} went away as it was made") from None
    try:
        info = os.fstat(descriptor)
        _refuse_others(folder, info)
        if info.st_mode & 0o077:  # readable by others only: nothing can have been planted
            try:
                os.fchmod(descriptor, 0o700)
            except OSError as error:
                raise UnsafeStorage(f"cannot make {folder} private: {error.strerror}") from error
    finally:
        os.close(descriptor)
    if with_ancestors:
        _check_ancestors(folder)


def _open_folder(folder: Path) -> int:
    """The folder itself, never what a symlink there points to; FileNotFoundError if absent."""
    try:
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeStorage(
                f"folder {folder} is a symlink or not a folder; name the real folder instead"
            ) from None
        raise UnsafeStorage(f"cannot open folder {folder}: {error.strerror}") from error


def check_private_folder(folder: Path) -> None:
    """Refuse the folder, or a folder above it, as private_folder would, changing nothing.

    For a look without side effects (`signin-broker doctor`): a folder that does not
    exist yet is not refused (the daemon creates it 0700), only the folders above it.
    """
    try:
        descriptor = _open_folder(folder)
    except FileNotFoundError:
        descriptor = -1
    if descriptor != -1:
        try:
            _refuse_others(folder, os.fstat(descriptor))
        finally:
            os.close(descriptor)
    _check_ancestors(folder, existing_only=True)


def _check_ancestors(folder: Path, *, existing_only: bool = False) -> None:
    real = Path(os.path.realpath(folder))
    for ancestor in dict.fromkeys([*folder.absolute().parents, *real.parents]):
        if not (existing_only and not ancestor.exists()):
            _check_ancestor(ancestor)


def _refuse_others(folder: Path, info: os.stat_result) -> None:
    if info.st_uid != os.geteuid():
        raise UnsafeStorage(
            f"folder {folder} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()});"
            " remove it or choose another --state-dir"
        )
    if info.st_mode & 0o022:
        raise UnsafeStorage(
            f"folder {folder} can be written by other users"
            f" (mode {stat.S_IMODE(info.st_mode):04o}); run `chmod 700 {folder}`"
            " or choose another --state-dir"
        )


def _check_ancestor(ancestor: Path) -> None:
    try:
        info = ancestor.stat()
    except OSError as error:
        raise UnsafeStorage(f"cannot check folder {ancestor}: {error.strerror}") from error
    if info.st_uid not in (0, os.geteuid()):
        raise UnsafeStorage(
            f"folder {ancestor} belongs to uid {info.st_uid}, who could replace what is"
            " inside it; choose a --state-dir under folders of yours or root's"
        )
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise UnsafeStorage(
            f"folder {ancestor} can be written by other users"
            f" (mode {stat.S_IMODE(info.st_mode):04o}), who could replace what is inside it;"
            f" run `chmod go-w {ancestor}` or choose another --state-dir"
        )


def read_regular_file(path: Path, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The file's bytes, or None when it does not exist.

    Refuses (UnsafeStorage) a symlink, anything but a regular file, and a file over
    `limit` bytes; opening a FIFO this way neither blocks nor waits for a writer.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeStorage(f"{path} is a symlink; remove it") from None
        raise
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeStorage(f"{path} is not a regular file; remove it")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise UnsafeStorage(f"{path} is larger than {limit} bytes; it is not ours")
    return data


def read_versioned_json(path: Path, field: str, version: int, limit: int, kind: str) -> object:
    """The `field` of a small {"version": ..., field: ...} JSON file; None when there is none.

    ValueError when the file is not `kind` of this version, not JSON, or JSON nested deeper
    than json_depth reads (its content is the caller's to check further); the refusals of
    read_regular_file otherwise.
    """
    document = read_versioned_document(path, field, version, limit, kind)
    return None if document is None else document[field]


def read_versioned_document(
    path: Path, field: str, version: int, limit: int, kind: str
) -> dict[str, object] | None:
    """Such a file whole, for one with fields beside `field` (optional ones); None if none.

    Refused as read_versioned_json refuses it.
    """
    data = read_regular_file(path, limit)
    if data is None:
        return None
    try:
        kept = json.loads(within_depth(data))
    except ValueError as error:  # not JSON, or nested too deep (json_depth)
        raise ValueError(f"{path} is not {kind}: {error}") from None
    if not isinstance(kept, dict) or kept.get("version") != version or field not in kept:
        raise ValueError(f"{path} is not {kind} of version {version}")
    return kept


def versioned_json(field: str, version: int, value: object, **beside: object) -> bytes:
    """The text read_versioned_json (read_versioned_document with `beside`) reads back."""
    document = {"version": version, field: value, **beside}
    return json.dumps(document, indent=1).encode() + b"\n"


def write_atomically(
    path: Path,
    data: bytes,
    *,
    before_write: Callable[[int], None] | None = None,
    before_rename: Callable[[], None] | None = None,
    check_folder: Callable[[Path], None] = private_folder,
) -> None:
    """Write a private (0600) file by write, fsync, rename, fsync of the folder.

    The folder is checked first: made private (`check_folder`, by default private_folder;
    a token file's folder is the person's and only checked). The temporary file has a random name
    and is created exclusively without following symlinks, so nothing planted at a
    guessed name receives the data. `before_write` is given the empty file's
    descriptor (the journal asks btrfs to overwrite it in place then). `before_rename`
    runs once the data is on disk, before it takes the file's place (the vault stores
    the file's key then); if it fails, nothing is replaced. A crash leaves at most the
    temporary file, which `leftover_writes` finds.
    """
    check_folder(path.parent)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(temporary, flags, 0o600)
    try:
        if before_write is not None:
            before_write(descriptor)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if before_rename is not None:
            before_rename()
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    sync_folder(path.parent)  # the rename itself survives a power cut


def sync_folder(folder: Path) -> None:
    """Flush a folder to disk, so the renames and removals in it survive a power cut."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def flocked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an flock of the lock file at path (made 0600 if missing) while the block runs.

    Blocking: callers run in worker threads. A lock file that is not a regular file
    (a FIFO planted there) is refused without waiting on it.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    descriptor = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise UnsafeStorage(f"{path} is not a regular file; remove it")
        fcntl.flock(descriptor, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def leftover_writes(folder: Path) -> dict[str, list[Path]]:
    """The temporary files of writes a crash interrupted, by the name each was to take."""
    found: dict[str, list[Path]] = {}
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in sorted(folder.iterdir()):
            named = TEMPORARY_NAME.fullmatch(entry.name)
            if named is not None:
                found.setdefault(named["name"], []).append(entry)
    return found
