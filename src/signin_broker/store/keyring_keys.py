"""The OS keyring as a key store (Secret Service, macOS Keychain, Windows Credential Locker).

Through `keyring`, loaded only when the `key_store` setting chooses it (keys.KEY_STORES).
Where the only keyring is keyrings.alt's PlaintextKeyring (headless machines), the
daemon's own key file stands in for it (KeyFileForPlaintextKeyring): that keyring keeps
keys in plaintext too, and loses every one if a crash comes while it rewrites its file,
which the key file never does.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import keyring
from keyring.backends import fail
from keyring.errors import PasswordDeleteError

from .keys import KEY_FILE, FileKeyStore, KeyStore, KeyStoreUnavailable

log = logging.getLogger(__name__)

SERVICE = "signin-broker"
# Keyring backends that truncate and rewrite one file for every change (keyrings.alt's).
REWRITES_IN_PLACE = "keyrings.alt.file"
# The one of them that keeps keys in plaintext: no safer than a key file of the daemon's.
PLAINTEXT_KEYRING = ("keyrings.alt.file", "PlaintextKeyring")


def keyring_store(state_dir: Path) -> KeyStore:
    """The keyring, or the key file in the state folder where the keyring is a plaintext file."""
    found = KeyringKeyStore()
    if found.writes_plaintext_file:
        return KeyFileForPlaintextKeyring(state_dir / KEY_FILE, found)
    return found


class KeyringKeyStore:
    """The OS keyring (Secret Service, macOS Keychain, Windows Credential Locker)."""

    def __init__(self) -> None:
        try:
            backend = keyring.get_keyring()
        except Exception as error:  # e.g. PYTHON_KEYRING_BACKEND names a missing module
            raise KeyStoreUnavailable(f"the keyring backend cannot be loaded: {error}") from error
        if isinstance(backend, fail.Keyring) or backend.priority <= 0:
            raise KeyStoreUnavailable(
                f"no usable keyring ({type(backend).__module__}); on Linux run a Secret Service"
                ' such as gnome-keyring, or set key_store = "file" to keep the key in a file'
            )
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
        value = self._call(keyring.get_password, SERVICE, name)
        return None if value is None else base64.b64decode(value)

    def set(self, name: str, secret: bytes) -> None:
        """Write a secret to the keyring."""
        self._call(keyring.set_password, SERVICE, name, base64.b64encode(secret).decode())

    def delete(self, name: str) -> None:
        """Remove a secret from the keyring."""
        # Backends raise PasswordDeleteError when there is none: not a refusal here.
        self._call(keyring.delete_password, SERVICE, name, absent=PasswordDeleteError)

    @staticmethod
    def _call(function: object, *args: str, absent: type[Exception] | tuple[()] = ()) -> str | None:
        try:
            result = function(*args)  # type: ignore[operator]
        except absent:
            return None
        except Exception as error:  # a refusal, whatever the backend calls it: KeyringError,
            # or what it lets through: the Secret Service's D-Bus errors (gnome-keyring
            # whose home is full or read-only refuses every write so)
            raise KeyStoreUnavailable(f"the keyring refused: {error}") from error
        return result if isinstance(result, str) else None


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
