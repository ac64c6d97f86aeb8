"""Where data keys live: the OS keyring through `keyring`, or, when the user opts in, a file.

One small interface over both, in the shape of keyring's own backends: `get`, `set`,
`delete` by name, and a `description` that status shows. Names carry the tenant
prefix (contract 2.9), e.g. `user:1001:state-key`.

Where the only keyring is keyrings.alt's PlaintextKeyring (headless machines), the
daemon's own key file stands in for it (KeyFileForPlaintextKeyring): that keyring
keeps keys in plaintext too, and loses every one if a crash comes while it rewrites
its file, which the key file never does.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
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

log = logging.getLogger(__name__)

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
# The one of them that keeps keys in plaintext: no safer than a key file of the daemon's.
PLAINTEXT_KEYRING = ("keyrings.alt.file", "PlaintextKeyring")
KEY_FILE = "keys.json"  # in the state folder


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
        # Where it writes (a chain of keyrings writes to its first): a plaintext file?
        writer = (getattr(backend, "backends", None) or [backend])[0]
        self.writes_plaintext_file = any(
            (kind.__module__, kind.__name__) == PLAINTEXT_KEYRING for kind in type(writer).__mro__
        )
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


class KeyFileForPlaintextKeyring:
    """The daemon's key file, where the only keyring is keyrings.alt's PlaintextKeyring.

    That keyring keeps keys in plaintext in one file, which it truncates and rewrites
    for every change: a SIGKILL or a power cut while it writes loses every key, and
    the sessions with them. The key file is no weaker (plaintext, the user's alone) and
    is replaced atomically. Keys an earlier daemon kept in the keyring are read from
    there once and copied into the file, never written there again; removing one
    removes it from both.
    """

    def __init__(self, path: Path, keyring: KeyringKeyStore) -> None:
        self._file = FileKeyStore(path)
        self._keyring = keyring
        self.description = (
            f"key file {path} instead of the keyring: the only one is keyrings.alt's"
            " PlaintextKeyring, which keeps keys in plaintext as well and loses them all if"
            " the daemon stops while it rewrites its file (run a Secret Service, such as"
            " gnome-keyring, to keep them in a keyring)"
        )

    def get(self, name: str) -> bytes | None:
        """The key from the file; one only the keyring has is copied into the file first."""
        secret = self._file.get(name)
        if secret is not None:
            return secret
        try:
            secret = self._keyring.get(name)
        except Exception as error:  # a keyring file a crash cut short, say: its keys are lost
            log.warning("the keyring could not be read", extra={"reason": str(error)})
            return None
        if secret is not None:
            try:
                self._file.set(name, secret)
            except KeyStoreUnavailable as error:  # read-only state: copied at a later read
                log.warning(
                    "a key could not be copied to the key file", extra={"reason": str(error)}
                )
        return secret

    def set(self, name: str, secret: bytes) -> None:
        """Write a key to the file (atomically); the keyring is not written."""
        self._file.set(name, secret)

    def delete(self, name: str) -> None:
        """Remove a key from the file, and any copy an earlier daemon left in the keyring."""
        self._file.delete(name)
        self._keyring.delete(name)


def open_key_store(kind: str, state_dir: Path) -> KeyStore:
    """The key store the settings ask for; KeyStoreUnavailable when it cannot work."""
    if kind == "file":
        return FileKeyStore(state_dir / KEY_FILE)
    keyring = KeyringKeyStore()
    if keyring.writes_plaintext_file:
        return KeyFileForPlaintextKeyring(state_dir / KEY_FILE, keyring)
    return keyring
