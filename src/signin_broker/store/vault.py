"""Account state encrypted at rest: one AES-GCM file per account, its key in the key store.

Each account has its own 256-bit data key (`user:<id>:state-key` in the key store)
and its own file, so removing an account removes exactly its key and its file. The
account id is authenticated with the ciphertext, so a file moved to another
account's name does not decrypt. Every read and write names its account: there is
no unscoped read (contract 4.4), and an empty account id is refused.

Each save also counts a generation, kept in the key store entry beside the key and,
authenticated, in the file. A file older than its key's generation is a copy put back
after a later save (a restored backup, or an attacker): its refresh token is likely
spent, so it is refused and reported rather than sent to the provider. The key store
entry is written first, so a file is never encrypted with a key that is not stored,
and the moment the file is in place the save is complete; a crash between the two
leaves the previous file, reported as rolled back like any older copy.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from .files import read_regular_file, write_atomically
from .keys import KeyStore
from .tenants import tenant_key

log = logging.getLogger(__name__)

MAGIC_V1 = b"SBV1"  # before generations: nonce, sealed record
MAGIC = b"SBV2"  # nonce, generation (authenticated), sealed record
NONCE_BYTES = 12
KEY_BYTES = 32
GENERATION = struct.Struct(">Q")
SUFFIX = ".state"


class VaultError(Exception):
    """A state file could not be read or written; the message says which and why."""


class StateRolledBack(VaultError):
    """The state file is an older copy than the last one written."""


class Vault:
    """Encrypted per-account records under one folder."""

    def __init__(self, folder: Path, keys: KeyStore) -> None:
        self._folder = folder
        self._keys = keys
        self._saving = threading.Lock()  # one save or delete at a time: generations stay in order
        self._generations: dict[str, int] = {}  # the newest each account is known to have
        self._rolled_back = [
            account for account in self.accounts() if self._is_rolled_back(account)
        ]

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
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

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
            self._keys.set(name, key + GENERATION.pack(generation))
            try:
                write_atomically(self._path(account_id), header + sealed)
            except OSError as error:  # the file is as it was: so is its key
                if previous is None:
                    self._keys.delete(name)
                else:
                    self._keys.set(name, previous)
                raise VaultError(f"cannot write the state of {account_id}: {error}") from error
            self._generations[account_id] = generation
            if account_id in self._rolled_back:
                self._rolled_back.remove(account_id)

    def load(self, account_id: str) -> dict[str, Any] | None:
        """The account's record, or None when there is none; StateRolledBack for an old copy."""
        account_id = tenant_key(account_id)
        path = self._path(account_id)
        try:
            blob = read_regular_file(path)
        except OSError as error:
            raise VaultError(f"cannot read the state of {account_id}: {error}") from error
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
            self._path(account_id).unlink(missing_ok=True)
            self._keys.delete(self._key_name(account_id))
            self._generations.pop(account_id, None)

    def accounts(self) -> list[str]:
        """The ids of the accounts with a state file (names only: nothing is decrypted)."""
        if not self._folder.is_dir():
            return []
        return sorted(
            unquote(path.name.removesuffix(SUFFIX))
            for path in self._folder.iterdir()
            if path.name.endswith(SUFFIX) and not path.name.startswith(".")
        )

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
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

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
        record: dict[str, Any] = json.loads(plaintext)
        return record, generation

    def _path(self, account_id: str) -> Path:
        return self._folder / (quote(account_id, safe="") + SUFFIX)

    @staticmethod
    def _key_name(account_id: str) -> str:
        return f"{account_id}:state-key"  # contract 2.9: user:<platform_user_id>:...


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
