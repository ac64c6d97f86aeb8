"""Account state encrypted at rest: one AES-GCM file per account, its key in the key store.

Each account has its own 256-bit data key (`user:<id>:state-key` in the key store)
and its own file, so removing an account removes exactly its key and its file. The
account id is authenticated with the ciphertext, so a file moved to another
account's name does not decrypt. Every read and write names its account: there is
no unscoped read (docs/contract.md §12), and an empty account id is refused.

Each save also counts a generation, kept in the key store entry beside the key and,
authenticated, in the file. A file older than its key's generation is a copy put back
after a later save (a restored backup, or an attacker): its refresh token is likely
spent, so it is refused and reported rather than sent to the provider.

A save survives a crash at any instant. The new file is written and synced under a
temporary name, then the key store entry takes its generation, then the file takes
its place: no file is ever in place whose key is not stored. A crash before the
rename leaves the temporary file, and the next start completes that save if the
file decrypts with the account's key and is newer than the one in place (it may
hold a rotated refresh token the provider already expects); other leftovers are
removed. Only a file made with the account's key can be rolled forward this way, so
a genuinely older copy put in place is still refused.

A save its file cannot take (the state folder is full, or read-only) is kept, sealed
the same way, in a journal (journal.py): room reserved in the state folder, else the
user's runtime folder. Its generation is above the key store's and the file's, which
neither could take; the copy with the highest generation is the account's state, and
one below the key store's is still refused. Once the folder can be written, the next
save (or the next start) puts the state in its file and the journal forgets it. An
account whose key was never stored cannot be kept so: nothing could decrypt it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..json_depth import within_depth
from .files import (
    flocked,
    leftover_writes,
    private_folder,
    read_regular_file,
    sync_folder,
    write_atomically,
)
from .journal import RESERVED_NAME, Journal, Journals, Kept
from .keys import KeyStore, KeyStoreUnavailable
from .tenants import tenant_key

log = logging.getLogger(__name__)

MAGIC_V1 = b"SBV1"  # before generations: nonce, sealed record
MAGIC = b"SBV2"  # nonce, generation (authenticated), sealed record
NONCE_BYTES = 12
KEY_BYTES = 32
GENERATION = struct.Struct(">Q")
SUFFIX = ".state"
# A file name holds at most 255 bytes (NAME_MAX), and write_atomically's temporary name
# adds 22. An id too long for that (a sub may have 255 characters, and each ':' is
# written %253A here) is kept under its hash, its id in a file beside it.
MAX_NAME = 255 - 22
HASHED = "~"  # a quoted id never starts so: it starts with an alias or "user"
ID_SUFFIX = ".id"
# A state file holds at most three tokens of oidc.answers.MAX_TOKEN_CHARS, encrypted.
STATE_FILE_BYTES = 16 * 1024 * 1024
LOCK_NAME = ".vault.lock"  # saves hold it shared, the recovery of leftovers exclusively


class VaultError(Exception):
    """A state file could not be read or written; the message says which and why."""


class StateRolledBack(VaultError):
    """The state file is an older copy than the last one written."""


class Vault:
    """Encrypted per-account records under one folder."""

    def __init__(self, folder: Path, keys: KeyStore, runtime_journal: Path | None = None) -> None:
        self._folder = folder
        self._keys = keys
        self._saving = threading.Lock()  # one save or delete at a time: generations stay in order
        self._generations: dict[str, int] = {}  # the newest each account is known to have
        self._journals = Journals(folder / RESERVED_NAME, runtime_journal)
        self._complete_interrupted_saves()
        self._recover_journals()
        self._rolled_back = [
            account for account in self.accounts() if self._is_rolled_back(account)
        ]
        if self.accounts():
            self._journals.reserve()

    @property
    def description(self) -> str:
        """Where the state and its keys are, for status; rolled-back state files are named."""
        text = f"{self._keys.description}; state in {self._folder}"
        if self._rolled_back:
            text += (
                f"; ROLLED BACK: {', '.join(self._rolled_back)} (an older copy replaced the"
                " newest state, or the daemon stopped while saving it; sign in again)"
            )
        return text

    def save(self, account_id: str, record: dict[str, Any]) -> None:
        """Encrypt and write the account's record, replacing the previous one atomically."""
        account_id = tenant_key(account_id)
        name = self._key_name(account_id)
        with self._saving:
            previous = self._keys.get(name)
            if previous is None:
                key, stored = AESGCM.generate_key(bit_length=256), 0
            else:
                key, stored = _split_entry(previous)
            generation = max(stored, self._generations.get(account_id, 0)) + 1
            nonce = os.urandom(NONCE_BYTES)
            plaintext = json.dumps(record, separators=(",", ":")).encode()
            header = MAGIC + nonce + GENERATION.pack(generation)
            sealed = AESGCM(key).encrypt(nonce, plaintext, _associated_data(header, account_id))
            stored_key = False

            def store_key() -> None:  # once the new file is on disk, before it is in place
                nonlocal stored_key
                self._keys.set(name, key + GENERATION.pack(generation))
                stored_key = True

            try:
                with self._lock(shared=True):  # no other vault takes its file for a leftover
                    self._name_beside(account_id)
                    write_atomically(
                        self._path(account_id), header + sealed, before_rename=store_key
                    )
            except (OSError, KeyStoreUnavailable) as error:  # the file is as it was
                if stored_key:  # and so is its key, if the key store lets it be
                    self._put_back(name, previous)
                self._keep_elsewhere(account_id, header + sealed, error, first=previous is None)
            else:
                self._journals.release(account_id)
                self._journals.reserve()
            self._generations[account_id] = generation
            if account_id in self._rolled_back:
                self._rolled_back.remove(account_id)

    def _keep_elsewhere(
        self, account_id: str, blob: bytes, error: Exception, *, first: bool
    ) -> None:
        """Keep a save its file could not take in a journal; VaultError when none takes it."""
        reason = f"cannot write the state of {account_id}: {error}"
        if first:  # its key is not stored: no start could decrypt a journal's copy
            raise VaultError(reason) from error
        try:
            where = self._journals.keep(account_id, blob, str(error))
        except OSError as refusal:
            raise VaultError(f"{reason}; nor keep it in a journal: {refusal}") from error
        log.info(
            "a state its file could not take is kept in a journal",
            extra={"account": account_id, "journal": where, "reason": str(error)},
        )

    def kept_elsewhere(self, account_id: str) -> str:
        """Where the account's newest state is, and why, while its file cannot take it; else ""."""
        kept = self._journals.kept(tenant_key(account_id))
        if kept is None:
            return ""
        return f"{kept.journal.description}, as the state folder cannot take them ({kept.reason})"

    def _recover_journals(self) -> None:
        """Take each account's newest state from the journals, where newer than its file.

        Each is put in its file at once if the folder can be written (its key store entry
        first, as an interrupted save is completed); else it stays in its journal, and
        the next save puts it there. Journals holding only older copies are emptied,
        unless the key store could not be read to tell.
        """
        judged = True
        for account_id, blob, journal in self._journals.found():
            try:
                self._judge(account_id, blob, journal)
            except (KeyStoreUnavailable, VaultError, ValueError) as error:
                judged = False
                log.warning(
                    "a journal's copy of a state could not be judged",
                    extra={"account": account_id, "reason": str(error)},
                )
        if judged:
            self._journals.forget_stale()
        for account_id in self._journals.accounts():
            self._replay(account_id)

    def _judge(self, account_id: str, blob: bytes, journal: Journal) -> None:
        """Adopt a journal's copy of the account's state if it is the newest, and trusted."""
        account_id = tenant_key(account_id)
        entry = self._keys.get(self._key_name(account_id))
        if entry is None:
            return  # removed since: nothing can read it
        key, stored = _split_entry(entry)
        try:
            _, generation = self._open(journal.path, blob, key, account_id)
        except (VaultError, ValueError):
            return  # not sealed with the account's key: not its state
        newest = max(
            self._generation_in_place(self._path(account_id), key, account_id),
            self._generations.get(account_id, -1),
            stored - 1,  # one below the key store's is rolled back, as a file would be
        )
        if generation > newest:
            self._journals.adopt(account_id, Kept(blob, journal, "found at the start"))
            self._generations[account_id] = generation

    def _replay(self, account_id: str) -> None:
        """Put an adopted journal copy in the account's file, if the folder takes it now."""
        kept = self._journals.kept(account_id)
        assert kept is not None  # noqa: S101 - adopted by the caller
        name, generation = self._key_name(account_id), self._generations[account_id]

        def store_key() -> None:
            entry = self._keys.get(name)
            if entry is not None and _split_entry(entry)[1] < generation:
                self._keys.set(name, entry[:KEY_BYTES] + GENERATION.pack(generation))

        try:
            with self._lock(shared=True):
                self._name_beside(account_id)
                write_atomically(self._path(account_id), kept.blob, before_rename=store_key)
        except (OSError, KeyStoreUnavailable) as error:
            self._journals.adopt(account_id, Kept(kept.blob, kept.journal, str(error)))
            log.warning(
                "a state kept in a journal stays there: its file cannot be written",
                extra={"account": account_id, "journal": kept.journal.description},
            )
            return
        self._journals.release(account_id)
        log.info("a state kept in a journal is in its file again", extra={"account": account_id})

    def _put_back(self, name: str, previous: bytes | None) -> None:
        """The key store entry as it was before a save that failed after storing it."""
        try:
            if previous is None:
                self._keys.delete(name)
            else:
                self._keys.set(name, previous)
        except KeyStoreUnavailable as error:  # a newer generation than the file: see load
            log.warning("could not put a key entry back", extra={"reason": str(error)})

    def _complete_interrupted_saves(self) -> None:
        """Finish the saves a crash interrupted, and remove what they left behind.

        A temporary state file that decrypts with its account's key and is newer than
        the file in place was fully written: it becomes the account's file (the key
        store entry first, so a crash here is recovered the same way next time).
        Others (a write cut short, a key never stored) are removed. When the key store
        cannot be read, nothing is removed: the temporary file may be the newest state.
        Another process's save under way is waited for (the vault's lock), not taken for
        a leftover.
        """
        if not self._folder.is_dir():
            return
        try:
            with self._lock(shared=False):
                self._complete_leftovers()
        except OSError as error:  # a read-only or unsafe folder: tried at the next start
            log.warning("leftover saves could not be looked at", extra={"reason": str(error)})

    def _complete_leftovers(self) -> None:
        for name, temporaries in leftover_writes(self._folder).items():
            account_id = self._account_of(name) if name.endswith(SUFFIX) else ""
            if account_id:
                try:
                    self._roll_forward(account_id, temporaries)
                except (OSError, KeyStoreUnavailable, VaultError) as error:
                    log.warning(
                        "an interrupted save could not be completed; it is tried again at"
                        " the next start",
                        extra={"account": account_id, "reason": str(error)},
                    )
                    continue
            for temporary in temporaries:
                temporary.unlink(missing_ok=True)
        sync_folder(self._folder)

    @contextlib.contextmanager
    def _lock(self, *, shared: bool) -> Iterator[None]:
        """The vault's lock: saves share it, the recovery of leftovers holds it alone."""
        private_folder(self._folder)
        with flocked(self._folder / LOCK_NAME, shared=shared):
            yield

    def _roll_forward(self, account_id: str, temporaries: list[Path]) -> None:
        """Put the newest complete temporary file of the account in place, if newer."""
        account_id = tenant_key(account_id)
        name = self._key_name(account_id)
        entry = self._keys.get(name)
        if entry is None:
            return  # a first save whose key was never stored: nothing can read it
        key, stored = _split_entry(entry)
        path = self._path(account_id)
        newest, newest_generation = None, self._generation_in_place(path, key, account_id)
        for temporary in temporaries:
            blob = read_regular_file(temporary, STATE_FILE_BYTES)
            try:
                _, generation = self._open(temporary, blob or b"", key, account_id)
            except (VaultError, ValueError):
                continue  # cut short: the save it belonged to never happened
            if generation > newest_generation:
                newest, newest_generation = temporary, generation
        if newest is None:
            return
        if newest_generation > stored:
            self._keys.set(name, key + GENERATION.pack(newest_generation))
        newest.replace(path)
        log.info(
            "a save interrupted by a stop was completed",
            extra={"account": account_id, "generation": newest_generation},
        )

    def _generation_in_place(self, path: Path, key: bytes, account_id: str) -> int:
        """The generation of the account's file; -1 when there is none or it is unreadable."""
        blob = read_regular_file(path, STATE_FILE_BYTES)
        if blob is None:
            return -1
        try:
            return self._open(path, blob, key, account_id)[1]
        except (VaultError, ValueError):
            return -1

    def load(self, account_id: str) -> dict[str, Any] | None:
        """The account's record, or None when there is none; StateRolledBack for an old copy.

        Its newest copy: the one a journal keeps, if any, else its file.
        """
        account_id = tenant_key(account_id)
        path = self._path(account_id)
        kept = self._journals.kept(account_id)
        try:
            blob = read_regular_file(path, STATE_FILE_BYTES) if kept is None else kept.blob
        except OSError as error:
            raise VaultError(f"cannot read the state of {account_id}: {error}") from error
        if kept is not None:
            path = kept.journal.path
        if blob is None:
            return None
        entry = self._keys.get(self._key_name(account_id))
        if entry is None:
            raise VaultError(
                f"the key of {account_id} is missing from the {self._keys.description}"
            )
        key, expected = _split_entry(entry)
        record, generation = self._open(path, blob, key, account_id)
        if generation < expected:
            raise StateRolledBack(
                f"the state of {account_id} was rolled back: {path} is generation"
                f" {generation}, but generation {expected} was saved since (an older copy"
                " replaced it, or the daemon stopped while saving); its refresh token is not"
                " used: sign in again"
            )
        self._generations[account_id] = max(generation, self._generations.get(account_id, 0))
        return record

    def delete(self, account_id: str) -> None:
        """Remove the account's file and its key."""
        account_id = tenant_key(account_id)
        with self._saving:
            name = _file_name(account_id)
            (self._folder / name).unlink(missing_ok=True)
            if name.startswith(HASHED):
                self._beside(name).unlink(missing_ok=True)
            self._keys.delete(self._key_name(account_id))
            self._generations.pop(account_id, None)
            self._journals.release(account_id)

    def accounts(self) -> list[str]:
        """The ids of the accounts with a state file or a journal's (nothing is decrypted)."""
        kept = self._journals.accounts()
        if not self._folder.is_dir():
            return sorted(kept)
        named = (
            self._account_of(path.name)
            for path in self._folder.iterdir()
            if path.name.endswith(SUFFIX) and not path.name.startswith(".")
        )
        return sorted({account_id for account_id in named if account_id} | set(kept))

    def _account_of(self, name: str) -> str:
        """The account a state file's name stands for; "" when it stands for none."""
        stem = name.removesuffix(SUFFIX)
        if not stem.startswith(HASHED):
            return unquote(stem)
        try:
            written = read_regular_file(self._beside(name), limit=64 * 1024)
            account_id = (written or b"").decode()
        except (OSError, UnicodeDecodeError):  # UnsafeStorage is one
            return ""
        return account_id if _file_name(account_id) == name else ""  # not another's id

    def _name_beside(self, account_id: str) -> None:
        """Write the id of a state file kept under its hash, before the file itself."""
        name = _file_name(account_id)
        if name.startswith(HASHED) and self._account_of(name) != account_id:
            write_atomically(self._beside(name), account_id.encode())

    def _beside(self, name: str) -> Path:
        """The file holding the id of the state file `name` kept under its hash."""
        return self._folder / (name.removesuffix(SUFFIX) + ID_SUFFIX)

    def _is_rolled_back(self, account_id: str) -> bool:
        """Whether the account's file is an older copy; other faults show when it is loaded."""
        try:
            self.load(account_id)
        except StateRolledBack as error:
            reason = str(error)
        except Exception:  # reported by the restore, which loads it again
            return False
        else:
            return False
        log.error("a state file was rolled back", extra={"account": account_id, "reason": reason})
        return True

    @staticmethod
    def _open(path: Path, blob: bytes, key: bytes, account_id: str) -> tuple[dict[str, Any], int]:
        """Decrypt a state file: its record and its generation (0 before generations)."""
        if blob.startswith(MAGIC):
            header_bytes = len(MAGIC) + NONCE_BYTES + GENERATION.size
            header, sealed = blob[:header_bytes], blob[header_bytes:]
            nonce = header[len(MAGIC) : len(MAGIC) + NONCE_BYTES]
            (generation,) = GENERATION.unpack(header[-GENERATION.size :])
            associated = _associated_data(header, account_id)
        elif blob.startswith(MAGIC_V1):
            nonce = blob[len(MAGIC_V1) : len(MAGIC_V1) + NONCE_BYTES]
            sealed = blob[len(MAGIC_V1) + NONCE_BYTES :]
            generation, associated = 0, MAGIC_V1 + account_id.encode()
        else:
            raise VaultError(f"{path} is not a signin-broker state file")
        try:
            plaintext = AESGCM(key).decrypt(nonce, sealed, associated)
        except InvalidTag:
            raise VaultError(f"{path} does not decrypt with its key (tampered or moved)") from None
        record: dict[str, Any] = json.loads(within_depth(plaintext))
        return record, generation

    def _path(self, account_id: str) -> Path:
        return self._folder / _file_name(account_id)

    @staticmethod
    def _key_name(account_id: str) -> str:
        return f"{account_id}:state-key"  # user:<sub>:..., docs/contract.md §10


def _split_entry(entry: bytes) -> tuple[bytes, int]:
    """A key store entry's data key and generation (a bare key is from before generations)."""
    if len(entry) == KEY_BYTES:
        return entry, 0
    if len(entry) != KEY_BYTES + GENERATION.size:
        raise VaultError(f"a key store entry of {len(entry)} bytes is not a signin-broker key")
    return entry[:KEY_BYTES], GENERATION.unpack(entry[KEY_BYTES:])[0]


def _associated_data(header: bytes, account_id: str) -> bytes:
    """What the ciphertext authenticates besides itself: the header and the account id."""
    return header + account_id.encode()


def _file_name(account_id: str) -> str:
    """The name of the account's state file: its id, quoted, or its hash when too long."""
    name = quote(account_id, safe="") + SUFFIX
    if len(name) <= MAX_NAME:
        return name
    return HASHED + hashlib.sha256(account_id.encode()).hexdigest() + SUFFIX
