"""Account state encrypted at rest: one AES-GCM file per account, its key in the key store.

Each account has its own 256-bit data key (`user:<id>:state-key` in the key store)
and its own file, so removing an account removes exactly its key and its file. The
account id is authenticated with the ciphertext, so a file moved to another
account's name does not decrypt. Every read and write names its account: there is
no unscoped read (contract 4.4), and an empty account id is refused.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from .files import write_atomically
from .keys import KeyStore
from .tenants import tenant_key

log = logging.getLogger(__name__)

MAGIC = b"SBV1"
NONCE_BYTES = 12
SUFFIX = ".state"


class VaultError(Exception):
    """A state file could not be read or written; the message says which and why."""


class Vault:
    """Encrypted per-account records under one folder."""

    def __init__(self, folder: Path, keys: KeyStore) -> None:
        self._folder = folder
        self._keys = keys

    @property
    def description(self) -> str:
        """Where the state and its keys are, for status."""
        return f"{self._keys.description}; state in {self._folder}"

    def save(self, account_id: str, record: dict[str, Any]) -> None:
        """Encrypt and write the account's record, replacing the previous one atomically."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key = self._key(tenant_key(account_id))
        nonce = os.urandom(NONCE_BYTES)
        plaintext = json.dumps(record, separators=(",", ":")).encode()
        sealed = AESGCM(key).encrypt(nonce, plaintext, self._associated_data(account_id))
        try:
            write_atomically(self._path(account_id), MAGIC + nonce + sealed)
        except OSError as error:
            raise VaultError(f"cannot write the state of {account_id}: {error.strerror}") from error

    def load(self, account_id: str) -> dict[str, Any] | None:
        """The account's record, or None when there is none."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        path = self._path(tenant_key(account_id))
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        key = self._keys.get(self._key_name(account_id))
        if key is None:
            raise VaultError(
                f"the key of {account_id} is missing from the {self._keys.description}"
            )
        if not blob.startswith(MAGIC):
            raise VaultError(f"{path} is not a signin-broker state file")
        nonce, sealed = (
            blob[len(MAGIC) : len(MAGIC) + NONCE_BYTES],
            blob[len(MAGIC) + NONCE_BYTES :],
        )
        try:
            plaintext = AESGCM(key).decrypt(nonce, sealed, self._associated_data(account_id))
        except InvalidTag:
            raise VaultError(f"{path} does not decrypt with its key (tampered or moved)") from None
        record: dict[str, Any] = json.loads(plaintext)
        return record

    def delete(self, account_id: str) -> None:
        """Remove the account's file and its key."""
        self._path(tenant_key(account_id)).unlink(missing_ok=True)
        self._keys.delete(self._key_name(account_id))

    def accounts(self) -> list[str]:
        """The ids of the accounts with a state file (names only: nothing is decrypted)."""
        if not self._folder.is_dir():
            return []
        return sorted(
            unquote(path.name.removesuffix(SUFFIX))
            for path in self._folder.iterdir()
            if path.name.endswith(SUFFIX) and not path.name.startswith(".")
        )

    def _key(self, account_id: str) -> bytes:
        """The account's data key, made and stored on its first save."""
        name = self._key_name(account_id)
        key = self._keys.get(name)
        if key is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            key = AESGCM.generate_key(bit_length=256)
            self._keys.set(name, key)
        return key

    def _path(self, account_id: str) -> Path:
        return self._folder / (quote(account_id, safe="") + SUFFIX)

    @staticmethod
    def _key_name(account_id: str) -> str:
        return f"{account_id}:state-key"  # contract 2.9: user:<platform_user_id>:...

    @staticmethod
    def _associated_data(account_id: str) -> bytes:
        return MAGIC + account_id.encode()
