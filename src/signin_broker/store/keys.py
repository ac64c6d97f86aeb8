"""Where data keys live: one small interface, the key file, and the key stores by name.

The interface is in the shape of keyring's own backends: `get`, `set`, `delete` by
name, and a `description` that status shows. Names carry the tenant prefix
(docs/contract.md §12), e.g. `user:1001:state-key`. The OS keyring's store is
keyring_keys.py; the key file, the user's explicit choice where no keyring runs, is
here; KEY_STORES names both.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from ..json_depth import within_depth
from .files import (
    UnsafeStorage,
    flocked,
    leftover_writes,
    private_folder,
    read_regular_file,
    write_atomically,
)

log = logging.getLogger(__name__)


class KeyStoreUnavailable(Exception):
    """No usable place for keys; the message says what to install or set."""


class KeyStore(Protocol):
    """A place for small secrets, by name."""

    description: str

    def get(self, name: str) -> bytes | None:
        """The secret, or None when there is none under that name."""

    def set(self, name: str, secret: bytes) -> None:
        """Store the secret, replacing any earlier one."""

    def delete(self, name: str) -> None:
        """Remove the secret; no error when there is none."""


KEY_FILE = "keys.json"  # in the state folder


class FileKeyStore:
    """Keys in a 0600 JSON file: the user's explicit choice where no keyring runs.

    Weaker than a keyring: anyone who can read the user's files can read the keys and
    so decrypt the state beside them. Changes are read-modify-write under an exclusive
    flock of a lock file beside it, so concurrent writers (threads of one daemon, or
    processes) never lose each other's keys; readers need no lock, as each write
    replaces the file atomically.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock_path = path.with_name(f".{path.name}.lock")
        self.description = f"key file {path} (weaker than a keyring)"
        self._swept = False  # leftovers of writes a crash cut short, removed at the first lock

    def get(self, name: str) -> bytes | None:
        """Read a key from the file."""
        value = self._read().get(name)
        return None if value is None else base64.b64decode(value)

    def set(self, name: str, secret: bytes) -> None:
        """Write a key to the file (atomically)."""
        with self._locked():
            keys = self._read()
            keys[name] = base64.b64encode(secret).decode()
            self._write(keys)

    def delete(self, name: str) -> None:
        """Remove a key from the file."""
        with self._locked():
            keys = self._read()
            if keys.pop(name, None) is not None:
                self._write(keys)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the exclusive lock of the key file (blocking: callers run in worker threads)."""
        with contextlib.ExitStack() as held:
            try:
                private_folder(self._path.parent)
                held.enter_context(flocked(self._lock_path))
            except UnsafeStorage as error:
                raise KeyStoreUnavailable(str(error)) from error
            except OSError as error:
                raise KeyStoreUnavailable(f"cannot lock key file {self._path}: {error}") from error
            if not self._swept:  # none is being written now: any there is a crash's, unused
                for temporary in leftover_writes(self._path.parent).get(self._path.name, []):
                    temporary.unlink(missing_ok=True)
                self._swept = True
            yield

    def _read(self) -> dict[str, str]:
        try:
            raw = read_regular_file(self._path)
            data = {} if raw is None else json.loads(within_depth(raw))
        except (OSError, ValueError) as error:
            raise KeyStoreUnavailable(f"key file {self._path} is unreadable: {error}") from error
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _write(self, keys: dict[str, str]) -> None:
        try:
            write_atomically(self._path, json.dumps(keys).encode())
        except OSError as error:
            raise KeyStoreUnavailable(f"cannot write key file {self._path}: {error}") from error


def file_store(state_dir: Path) -> KeyStore:
    """The key file in the state folder."""
    return FileKeyStore(state_dir / KEY_FILE)


# The key stores by the name the `key_store` setting gives them: a module and the function
# that opens it in a state folder. Each module is loaded only when chosen: keyring's is
# 1.5 MB a key file does without. A new key store is one module, and its line here.
KEY_STORES = {
    "file": f"{__name__}:file_store",
    "keyring": f"{__package__}.keyring_keys:keyring_store",
}


def open_key_store(kind: str, state_dir: Path) -> KeyStore:
    """The key store the settings ask for; KeyStoreUnavailable when it cannot work."""
    module, _, function = KEY_STORES[kind].partition(":")
    opened: KeyStore = getattr(importlib.import_module(module), function)(state_dir)
    return opened


def the_keyring() -> KeyStore:
    """The OS keyring itself, whatever it writes to (the client secrets are kept there)."""
    module, _, _ = KEY_STORES["keyring"].partition(":")
    keyring: KeyStore = importlib.import_module(module).KeyringKeyStore()
    return keyring
