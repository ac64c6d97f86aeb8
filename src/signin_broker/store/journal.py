"""Room kept for account state its file cannot take: the reserved journal and the runtime one.

A refresh token is spent only once its successor has a durable place
(session/fresh_tokens/refresh_grant.py). When an account's state file cannot be written (the state
folder is full or read-only), the vault keeps the sealed record in a journal instead:

- the reserved journal, a file in the state folder allocated in advance: written
  whole when it is made and synced, then only ever overwritten in place. Where a file
  system overwrites in place (ext4, xfs, tmpfs) that needs no new block, so a full
  one still takes it. btrfs copies on write, and refuses every write when full,
  unless the file is marked No_COW (`chattr +C`), as the journal asks when it is made;
  zfs has no such mark (docs/explanation/durability.md).
- the runtime journal, the same kind of file in `$XDG_RUNTIME_DIR/signin-broker/`:
  another file system (a tmpfs where systemd logs the user in), which a crash or a
  restart of the daemon leaves as it was and a reboot empties. It is made when first
  needed, in a folder checked as the socket's is (0700, no other user above it), and
  removed once its records are in their files again.

A journal file has two halves. A write puts a snapshot of every record kept (numbered,
its hash in front) into the half that does not hold the newest, and syncs it: a write
cut short leaves the previous snapshot whole. The records are the vault's own sealed
bytes, encrypted and authenticated with each account's key, their generation inside:
the vault decides which copy is the newest, and trusts one only when it is newer than
both the account's file and its key store entry.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import stat
import struct
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .files import UnsafeStorage, check_private_folder, private_folder, write_atomically

log = logging.getLogger(__name__)

HALF_BYTES = 512 * 1024  # the states of dozens of accounts whose tokens are a few kB each
JOURNAL_BYTES = 2 * HALF_BYTES
MAGIC = b"SBJ1"
HEADER = struct.Struct(">4sQI32s")  # magic, sequence, body length, sha256 of the three
ID_LENGTH = struct.Struct(">H")
BLOB_LENGTH = struct.Struct(">I")
RESERVED_NAME = "reserved.journal"  # in the vault's folder
RUNTIME_NAME = "state.journal"  # in $XDG_RUNTIME_DIR/signin-broker
# Linux's file attributes (chattr): FS_IOC_GETFLAGS and FS_IOC_SETFLAGS, and No_COW.
_LONG = struct.calcsize("l")
FS_IOC_GETFLAGS = (2 << 30) | (_LONG << 16) | (ord("f") << 8) | 1
FS_IOC_SETFLAGS = (1 << 30) | (_LONG << 16) | (ord("f") << 8) | 2
FS_NOCOW_FL = 0x00800000


class JournalFull(OSError):
    """The records kept do not fit in a journal (tokens of hundreds of kilobytes)."""


class Journal:
    """One journal file: snapshots of sealed records, each written in place into a half."""

    def __init__(self, path: Path, description: str, *, runtime: bool) -> None:
        self.path = path
        self.description = description
        self.runtime = runtime  # in the runtime folder: checked as the socket's, removed when empty
        self._sequence: int | None = None  # of the newest snapshot, once read or written

    def read(self) -> dict[str, bytes]:
        """The records of the newest whole snapshot; empty when there is none (or no file)."""
        if self.runtime:
            check_private_folder(self.path.parent)  # no other user could have planted it
        try:
            flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
            descriptor = os.open(self.path, flags)
        except FileNotFoundError:
            self._sequence = 0
            return {}
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafeStorage(f"{self.path} is a symlink; remove it") from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise UnsafeStorage(f"{self.path} is not a regular file; remove it")
            snapshots = [_snapshot(descriptor, half) for half in (0, 1)]
        finally:
            os.close(descriptor)
        sequence, body = max((s for s in snapshots if s is not None), default=(0, b""))
        self._sequence = sequence
        return _decoded(body)

    def write(self, records: Mapping[str, bytes]) -> None:
        """Replace the older snapshot with one of these records, synced; OSError if it cannot."""
        body = _encoded(records)
        if HEADER.size + len(body) > HALF_BYTES:
            raise JournalFull(f"the state kept ({len(body)} bytes) does not fit in {self.path}")
        if self._sequence is None:
            self.read()
        sequence = (self._sequence or 0) + 1
        head = HEADER.pack(MAGIC, sequence, len(body), _digest(sequence, body))
        with self._opened() as descriptor:
            _write_at(descriptor, head + body, (sequence % 2) * HALF_BYTES)
            _sync_data(descriptor)
        self._sequence = sequence

    def make(self) -> None:
        """Allocate the file (0600) if it is not there: its every byte written and synced.

        Written, not only reserved (posix_fallocate leaves unwritten extents, whose first
        write changes the file system's metadata), so that an overwrite needs nothing new.
        """
        if self.runtime:
            private_folder(self.path.parent, with_ancestors=True)
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(self.path)
            if stat.S_ISREG(info.st_mode) and info.st_size == JOURNAL_BYTES:
                return
        write_atomically(self.path, bytes(JOURNAL_BYTES), before_write=_overwritten_in_place)
        self._sequence = 0

    def empty(self) -> None:
        """Remove every record: the runtime journal's file goes, the reserved one is zeroed."""
        if self.runtime:
            self.path.unlink(missing_ok=True)
        else:
            with self._opened() as descriptor:
                _write_at(descriptor, bytes(JOURNAL_BYTES), 0)
                _sync_data(descriptor)
        self._sequence = 0

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        """The journal opened for writing, never created nor grown: only the room made before.

        Opened anew for each write, so that a folder made read-only since refuses it.
        """
        descriptor = os.open(self.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode) or info.st_size != JOURNAL_BYTES:
                raise UnsafeStorage(f"{self.path} is not a journal of {JOURNAL_BYTES} bytes")
            yield descriptor
        finally:
            os.close(descriptor)


@dataclass(frozen=True, slots=True)
class Kept:
    """An account's newest sealed record, in the journal that holds it, and why it is there."""

    blob: bytes
    journal: Journal
    reason: str  # why its file could not take it


class Journals:
    """Where the vault keeps what its files cannot take: the reserved journal, else the runtime one.

    Every write puts all the records kept into one journal, the first that takes them;
    the other is emptied then, so the records kept are always in one place.
    """

    def __init__(self, reserved: Path, runtime: Path | None) -> None:
        self._journals = [Journal(reserved, f"the journal reserved in {reserved}", runtime=False)]
        if runtime is not None:
            description = f"the runtime journal {runtime} (a reboot empties it)"
            self._journals.append(Journal(runtime, description, runtime=True))
        self._kept: dict[str, Kept] = {}
        self._found_in: set[Journal] = set()  # the journals holding records at the start

    def found(self) -> Iterator[tuple[str, bytes, Journal]]:
        """Every record in the journals (account, sealed record, journal), for the vault."""
        for journal in self._journals:
            try:
                records = journal.read()
            except (OSError, ValueError) as error:
                log.warning(
                    "a journal could not be read",
                    extra={"journal": str(journal.path), "reason": str(error)},
                )
                continue
            for account_id, blob in records.items():
                self._found_in.add(journal)
                yield account_id, blob, journal

    def adopt(self, account_id: str, kept: Kept) -> None:
        """Take a record found at the start as the account's newest."""
        self._kept[account_id] = kept

    def forget_stale(self) -> None:
        """Empty the journals that hold no record adopted (every one found was judged older)."""
        for journal in self._found_in - {kept.journal for kept in self._kept.values()}:
            self._empty(journal)

    def keep(self, account_id: str, blob: bytes, reason: str) -> str:
        """Keep the record in the first journal that takes it: its description; OSError if none."""
        records = {account: kept.blob for account, kept in self._kept.items()} | {account_id: blob}
        refusals = []
        for journal in self._journals:
            try:
                journal.make()
                journal.write(records)
            except OSError as error:
                refusals.append(f"{journal.description}: {error}")
                continue
            before = {kept.journal for kept in self._kept.values()} - {journal}
            reasons = {account: kept.reason for account, kept in self._kept.items()}
            reasons[account_id] = reason
            self._kept = {
                account: Kept(record, journal, reasons[account])
                for account, record in records.items()
            }
            for emptied in before:
                self._empty(emptied)
            return journal.description
        raise OSError("; ".join(refusals))

    def release(self, account_id: str) -> None:
        """The account's state is in its file again: the journal holding it forgets it."""
        kept = self._kept.pop(account_id, None)
        if kept is None:
            return
        journal = kept.journal
        rest = {account: k.blob for account, k in self._kept.items() if k.journal is journal}
        if not rest:
            self._empty(journal)
            return
        try:
            journal.write(rest)
        except OSError as error:  # its older copy loses to the file's newer generation
            log.info("a journal keeps a stale record", extra={"reason": str(error)})

    def kept(self, account_id: str) -> Kept | None:
        """The account's newest record when a journal holds it, not its file."""
        return self._kept.get(account_id)

    def accounts(self) -> list[str]:
        """The accounts whose newest record a journal holds."""
        return list(self._kept)

    def reserve(self) -> None:
        """Make the reserved journal if it is missing (the state folder can be written now)."""
        try:
            self._journals[0].make()
        except OSError as error:
            log.warning("no room could be reserved for a journal", extra={"reason": str(error)})

    @staticmethod
    def _empty(journal: Journal) -> None:
        try:
            journal.empty()
        except OSError as error:  # its records are older than the files': they lose there
            log.info("a journal could not be emptied", extra={"reason": str(error)})


def _sync_data(descriptor: int) -> None:
    """The data written on disk (an overwrite in place changes no size to sync as well)."""
    if sys.platform == "darwin":  # it has no fdatasync
        os.fsync(descriptor)
    else:
        os.fdatasync(descriptor)


def _overwritten_in_place(descriptor: int) -> None:
    """Ask a copy-on-write file system to overwrite this empty file in place (`chattr +C`).

    btrfs honours it (a full btrfs then still takes the journal's writes); file systems
    that overwrite in place anyway refuse the flag, or have no attributes (tmpfs).
    """
    with contextlib.suppress(OSError):
        flags = array.array("i", [0])
        fcntl.ioctl(descriptor, FS_IOC_GETFLAGS, flags, True)
        flags[0] |= FS_NOCOW_FL
        fcntl.ioctl(descriptor, FS_IOC_SETFLAGS, flags, True)


def _snapshot(descriptor: int, half: int) -> tuple[int, bytes] | None:
    """The sequence and body of the snapshot in a half; None when none is there whole."""
    head = os.pread(descriptor, HEADER.size, half * HALF_BYTES)
    if len(head) < HEADER.size:
        return None
    magic, sequence, length, digest = HEADER.unpack(head)
    if magic != MAGIC or length > HALF_BYTES - HEADER.size:
        return None
    body = os.pread(descriptor, length, half * HALF_BYTES + HEADER.size)
    if len(body) != length or _digest(sequence, body) != digest:
        return None  # a write cut short
    return sequence, body


def _digest(sequence: int, body: bytes) -> bytes:
    return hashlib.sha256(struct.pack(">QI", sequence, len(body)) + body).digest()


def _encoded(records: Mapping[str, bytes]) -> bytes:
    parts = []
    for account_id, blob in records.items():
        name = account_id.encode()
        parts += [ID_LENGTH.pack(len(name)), name, BLOB_LENGTH.pack(len(blob)), blob]
    return b"".join(parts)


def _decoded(body: bytes) -> dict[str, bytes]:
    """The records of a snapshot's body; ValueError when it is not one (its hash matched)."""
    records, at = {}, 0
    try:
        while at < len(body):
            (name_length,) = ID_LENGTH.unpack_from(body, at)
            at += ID_LENGTH.size
            account_id = body[at : at + name_length].decode()
            at += name_length
            (blob_length,) = BLOB_LENGTH.unpack_from(body, at)
            at += BLOB_LENGTH.size
            records[account_id] = body[at : at + blob_length]
            at += blob_length
    except struct.error:
        at = -1
    if at != len(body):
        raise ValueError("a journal's snapshot is cut short")
    return records


def _write_at(descriptor: int, data: bytes, offset: int) -> None:
    """All of data at offset (a write that stops short goes on from where it stopped)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, offset)
        if written == 0:
            raise OSError(errno.EIO, "a journal write made no progress")
        view, offset = view[written:], offset + written
