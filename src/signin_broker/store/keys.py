"""Where data keys live: the OS keyring through `keyring`, or, when the user opts in, a file.

One small interface over both, in the shape of keyring's own backends: `get`, `set`,
`delete` by name, and a `description` that status shows. Names carry the tenant
prefix (contract 2.9), e.g. `user:1001:state-key`.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from .files import (
    UnsafeStorage,
    flocked,
    leftover_writes,
    private_folder,
    read_regular_file,
    write_atomically,
)

SERVICE = "signin-broker"


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


# Keyring backends that truncate and rewrite one file for every change (keyrings.alt's).
REWRITES_IN_PLACE = "keyrings.alt.file"


class KeyringKeyStore:
    """The OS keyring (Secret Service, macOS Keychain, Windows Credential Locker)."""

    def __init__(self) -> None:
        import keyring
        from keyring.backends import fail

        try:
            backend = keyring.get_keyring()
        except Exception as error:  # e.g. PYTHON_KEYRING_BACKEND names a missing module
            raise KeyStoreUnavailable(f"the keyring backend cannot be loaded: {error}") from error
        if isinstance(backend, fail.Keyring) or backend.priority <= 0:
            raise KeyStoreUnavailable(
                f"no usable keyring ({type(backend).__module__}); on Linux run a Secret Service"
                ' such as gnome-keyring, or set key_store = "file" to keep the key in a file'
            )
        self._keyring = keyring
        self.description = f"keyring ({type(backend).__module__}.{type(backend).__name__})"
        if type(backend).__module__.startswith(REWRITES_IN_PLACE):
            self.description += (
                ": it rewrites its file in place, and a crash while it writes loses every key;"
                ' key_store = "file" writes atomically'
            )

    def get(self, name: str) -> bytes | None:
        """Read a secret from the keyring."""
        value = self._call(self._keyring.get_password, SERVICE, name)
        return None if value is None else base64.b64decode(value)

    def set(self, name: str, secret: bytes) -> None:
        """Write a secret to the keyring."""
        self._call(self._keyring.set_password, SERVICE, name, base64.b64encode(secret).decode())

    def delete(self, name: str) -> None:
        """Remove a secret from the keyring."""
        from keyring.errors import PasswordDeleteError

        # Backends raise PasswordDeleteError when there is none: not a refusal here.
        self._call(self._keyring.delete_password, SERVICE, name, absent=PasswordDeleteError)

    @staticmethod
    def _call(function: object, *args: str, absent: type[Exception] | tuple[()] = ()) -> str | None:
        from keyring.errors import KeyringError

        try:
            result = function(*args)  # type: ignore[operator]
        except absent:
            return None
        except KeyringError as error:
            raise KeyStoreUnavailable(f"the keyring refused: {error}") from error
        return result if isinstance(result, str) else None


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
            data = {} if raw is None else json.loads(raw)
        except (OSError, ValueError) as error:
            raise KeyStoreUnavailable(f"key file {self._path} is unreadable: {error}") from error
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _write(self, keys: dict[str, str]) -> None:
        try:
            write_atomically(self._path, json.dumps(keys).encode())
        except OSError as error:
            raise KeyStoreUnavailable(f"cannot write key file {self._path}: {error}") from error


def open_key_store(kind: str, state_dir: Path) -> KeyStore:
    """The key store the settings ask for; KeyStoreUnavailable when it cannot work."""
    if kind == "file":
        return FileKeyStore(state_dir / "keys.json")
    return KeyringKeyStore()
