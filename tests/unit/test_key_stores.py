"""One suite every key store passes, in the shape of keyring's own backend tests.

KeyStoreContract holds the tests; each backend is a subclass that says how to open its
store. The keyring store runs over a real Secret Service (gnome-keyring on a private
D-Bus, as tests/integration/test_lifecycle.py starts it) and over keyrings.alt's file
backend (the one test daemons use); the file store runs in a temp folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import SecretService, fail
from keyring.errors import KeyringLocked
from keyrings.alt.file import PlaintextKeyring

from signin_broker.store.keyring_keys import KeyFileForPlaintextKeyring, KeyringKeyStore
from signin_broker.store.keys import FileKeyStore, KeyStore, KeyStoreUnavailable, open_key_store
from signin_broker.store.vault import Vault
from signin_broker_testing.daemon import short_temp_dir
from support.secret_service import secret_service
from support.storage import filled, tmpfs

DATA_KEY = bytes(range(256))[:40]  # the vault's entry: a 32-byte key and a generation


class KeyStoreContract:
    """What the vault and client authentication count on from any key store."""

    described_as = ""  # a part of the description status shows

    def open(self) -> KeyStore:
        """A store of this backend; a second call opens the same one again, as a restart."""
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> Iterator[KeyStore]:
        """The backend's store, with every name a test used removed afterwards."""
        store = self.open()
        self.used: set[str] = set()
        yield store
        for name in self.used:
            with contextlib.suppress(KeyStoreUnavailable):  # a test damaged the store
                store.delete(name)

    def name(self, suffix: str = "state-key", account: str = "") -> str:
        """A name of a fresh account (a real keyring outlives a test), noted for cleanup."""
        account = account or f"user:{secrets.token_hex(6)}"
        name = f"{account}:{suffix}"
        self.used.add(name)
        return name

    def test_an_unknown_name_reads_none(self, store: KeyStore) -> None:
        assert store.get(self.name()) is None

    @pytest.mark.parametrize(
        "secret", [DATA_KEY, bytes(range(256)), b"\0" * 32, b"s3cret"], ids=len
    )
    def test_a_secret_round_trips_byte_for_byte(self, store: KeyStore, secret: bytes) -> None:
        name = self.name()
        store.set(name, secret)
        assert store.get(name) == secret

    def test_set_replaces_the_earlier_secret(self, store: KeyStore) -> None:
        name = self.name()
        store.set(name, b"first")
        store.set(name, DATA_KEY)
        assert store.get(name) == DATA_KEY

    def test_each_name_is_its_own_entry(self, store: KeyStore) -> None:
        """Tenant-prefixed names sharing a prefix never share an entry (docs/contract.md §10)."""
        account = f"user:{secrets.token_hex(6)}"
        names = [
            self.name(account=account),
            self.name(account=f"{account}1"),
            self.name(account=f"{account}:workspace:7"),
            self.name(account=f"work/{account}"),
            self.name("client-secret", account=account),
        ]
        for index, name in enumerate(names):
            store.set(name, bytes([index]) * 32)
        assert [store.get(name) for name in names] == [bytes([i]) * 32 for i in range(5)]

    def test_delete_removes_that_name_only(self, store: KeyStore) -> None:
        gone, kept = self.name(), self.name()
        store.set(gone, b"a" * 32)
        store.set(kept, b"b" * 32)
        store.delete(gone)
        assert (store.get(gone), store.get(kept)) == (None, b"b" * 32)

    def test_deleting_what_is_not_there_is_no_error(self, store: KeyStore) -> None:
        name = self.name()
        store.delete(name)
        store.set(name, b"a")
        store.delete(name)
        store.delete(name)
        assert store.get(name) is None

    def test_a_store_opened_again_sees_what_was_set_and_deleted(self, store: KeyStore) -> None:
        kept, gone = self.name(), self.name()
        store.set(kept, DATA_KEY)
        store.set(gone, DATA_KEY)
        store.delete(gone)
        again = self.open()
        assert (again.get(kept), again.get(gone)) == (DATA_KEY, None)

    def test_the_description_names_the_place(self, store: KeyStore) -> None:
        assert self.described_as in store.description

    def test_a_vault_on_it_reads_its_state_after_a_restart(
        self, store: KeyStore, tmp_path: Path
    ) -> None:
        account = f"user:{secrets.token_hex(6)}"
        self.name(account=account)  # the vault's key: removed afterwards
        Vault(tmp_path / "accounts", store).save(account, {"refresh_token": "rt"})
        assert Vault(tmp_path / "accounts", self.open()).load(account) == {"refresh_token": "rt"}


class TestFileKeyStore(KeyStoreContract):
    described_as = "keys.json (weaker than a keyring)"

    @pytest.fixture(autouse=True)
    def _in_a_temp_folder(self, tmp_path: Path) -> None:
        self.path = tmp_path / "state" / "keys.json"

    def open(self) -> KeyStore:
        return FileKeyStore(self.path)

    def test_the_file_is_private(self, store: KeyStore) -> None:
        store.set(self.name(), DATA_KEY)
        assert self.path.stat().st_mode & 0o777 == 0o600
        assert self.path.parent.stat().st_mode & 0o777 == 0o700

    def test_a_damaged_file_is_refused_never_overwritten(self, store: KeyStore) -> None:
        """Writing over it would lose every other account's key."""
        name = self.name()
        store.set(name, DATA_KEY)
        self.path.write_bytes(b'{"user:1:state-key": "AAAA"')  # cut short
        with pytest.raises(KeyStoreUnavailable, match="unreadable"):
            store.get(name)
        with pytest.raises(KeyStoreUnavailable, match="unreadable"):
            store.set(name, b"other")
        assert self.path.read_bytes() == b'{"user:1:state-key": "AAAA"'

    def test_a_symlink_in_place_of_the_file_is_refused(
        self, store: KeyStore, tmp_path: Path
    ) -> None:
        (tmp_path / "elsewhere.json").write_text("{}")
        self.path.parent.mkdir(mode=0o700)
        self.path.symlink_to(tmp_path / "elsewhere.json")
        with pytest.raises(KeyStoreUnavailable, match="symlink"):
            store.get(self.name())

    def test_a_lock_file_that_is_not_a_file_is_refused(self, store: KeyStore) -> None:
        self.path.parent.mkdir(mode=0o700)
        os.mkfifo(self.path.with_name(".keys.json.lock"))
        with pytest.raises(KeyStoreUnavailable, match="not a regular file"):
            store.set(self.name(), DATA_KEY)


class KeyringStoreContract(KeyStoreContract):
    """The keyring store over one keyring backend, made the process's keyring meanwhile."""

    def backend(self, folder: Path) -> KeyringBackend:
        """The keyring backend; a file-backed one keeps its file in `folder`."""
        raise NotImplementedError

    @pytest.fixture(autouse=True)
    def _as_the_keyring(self, tmp_path: Path) -> Iterator[None]:
        previous = keyring.get_keyring()
        keyring.set_keyring(self.backend(tmp_path))
        yield
        keyring.set_keyring(previous)

    def open(self) -> KeyStore:
        return KeyringKeyStore()


class TestKeyringOverAFile(KeyringStoreContract):
    # It truncates and rewrites its file for every change: status says a crash can lose keys.
    described_as = "keyring (keyrings.alt.file.PlaintextKeyring): it rewrites its file in place"

    def backend(self, folder: Path) -> KeyringBackend:
        backend = PlaintextKeyring()
        backend.file_path = str(folder / "keyring_pass.cfg")
        return backend


class TestKeyFileForAPlaintextKeyring(KeyringStoreContract):
    """Where keyrings.alt's PlaintextKeyring is the only keyring, the key file stands in."""

    described_as = "instead of the keyring: the only one is keyrings.alt's PlaintextKeyring"

    def backend(self, folder: Path) -> KeyringBackend:
        self.keyring_file = folder / "keyring_pass.cfg"
        self.state = folder / "state"
        backend = PlaintextKeyring()
        backend.file_path = str(self.keyring_file)
        return backend

    def open(self) -> KeyStore:
        return open_key_store("keyring", self.state)

    def test_it_is_the_key_file_and_the_keyring_is_never_written(self, store: KeyStore) -> None:
        """Never the keyring: it truncates and rewrites its file, and a crash there lost keys."""
        assert isinstance(store, KeyFileForPlaintextKeyring)
        store.set(self.name(), DATA_KEY)
        store.delete(self.name())
        assert not self.keyring_file.exists()
        assert (self.state / "keys.json").stat().st_mode & 0o777 == 0o600

    def test_a_key_an_earlier_daemon_kept_in_the_keyring_moves_to_the_file(
        self, store: KeyStore
    ) -> None:
        name = self.name()
        KeyringKeyStore().set(name, DATA_KEY)  # as the daemon did before
        assert store.get(name) == DATA_KEY
        assert FileKeyStore(self.state / "keys.json").get(name) == DATA_KEY  # copied
        store.delete(name)
        assert (store.get(name), KeyringKeyStore().get(name)) == (None, None)  # from both


@pytest.fixture(scope="class")
def secret_service_bus() -> Iterator[str]:
    """A Secret Service for the class's tests: the address of the D-Bus it is on."""
    home = short_temp_dir()
    try:
        with secret_service(home / "home") as env:
            yield env["DBUS_SESSION_BUS_ADDRESS"]
    finally:
        shutil.rmtree(home, ignore_errors=True)


class TestKeyringOverTheSecretService(KeyringStoreContract):
    described_as = "keyring (keyring.backends.SecretService.Keyring)"

    def open(self) -> KeyStore:
        store = open_key_store("keyring", Path("/nonexistent"))  # the keyring itself: no file
        assert isinstance(store, KeyringKeyStore)
        return store

    @pytest.fixture(autouse=True)
    def _on_its_bus(self, secret_service_bus: str, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", secret_service_bus)

    def backend(self, folder: Path) -> KeyringBackend:
        return SecretService.Keyring()


class Locked(PlaintextKeyring):
    """A keyring that is there but refuses, as a locked one does when nobody unlocks it."""

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("the collection is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise KeyringLocked("the collection is locked")

    def delete_password(self, service: str, username: str) -> None:
        raise KeyringLocked("the collection is locked")


@pytest.fixture
def the_keyring() -> Iterator[None]:
    """The process's keyring put back after a test that replaces it."""
    previous = keyring.get_keyring()
    yield
    keyring.set_keyring(previous)


@pytest.mark.usefixtures("the_keyring")
def test_no_usable_keyring_says_what_to_do() -> None:
    keyring.set_keyring(fail.Keyring())
    with pytest.raises(KeyStoreUnavailable, match='set key_store = "file"'):
        KeyringKeyStore()


@pytest.mark.usefixtures("the_keyring")
def test_a_keyring_that_refuses_is_unavailable_not_a_crash() -> None:
    keyring.set_keyring(Locked())
    store = KeyringKeyStore()
    for call in (lambda: store.get("user:1:k"), lambda: store.set("user:1:k", b"x")):
        with pytest.raises(KeyStoreUnavailable, match="the keyring refused: the collection"):
            call()
    with pytest.raises(KeyStoreUnavailable):
        store.delete("user:1:k")


@pytest.mark.usefixtures("the_keyring")
def test_a_secret_service_whose_home_is_full_refuses_and_a_vault_keeps_its_save_in_the_journal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gnome-keyring refuses every write while its home is full, and reads on: a refusal,
    not a crash, and a vault whose own folder has room keeps the save in its journal."""
    folder = short_temp_dir()
    try:
        with tmpfs(folder / "home", "4m") as home, secret_service(home) as env:
            monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", env["DBUS_SESSION_BUS_ADDRESS"])
            keyring.set_keyring(SecretService.Keyring())
            vault = Vault(folder / "accounts", KeyringKeyStore())
            vault.save("user:1001", {"n": 1})
            with filled(home):
                with pytest.raises(KeyStoreUnavailable, match="the keyring refused"):
                    KeyringKeyStore().set("user:1001:another", DATA_KEY)
                vault.save("user:1001", {"n": 2})  # the file written; its key entry refused
                assert "reserved" in vault.kept_elsewhere("user:1001")
                assert Vault(folder / "accounts", KeyringKeyStore()).load("user:1001") == {"n": 2}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_settings_choose_the_store(tmp_path: Path) -> None:
    chosen = open_key_store("file", tmp_path)
    assert isinstance(chosen, FileKeyStore)
    assert str(tmp_path / "keys.json") in chosen.description
