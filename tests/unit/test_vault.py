"""The vault: per-account encrypted state that decrypts only as its account and only if newest."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from signin_broker.store import vault as vault_module
from signin_broker.store.tenants import MissingTenantKey
from signin_broker.store.vault import MAGIC_V1, StateRolledBack, Vault, VaultError

RECORD: dict[str, Any] = {"tokens": {"refresh_token": "rt-0"}, "n": 1}


class Keys:
    """A key store in memory (the real ones pass tests/unit/test_key_stores.py)."""

    description = "keys in memory"

    def __init__(self) -> None:
        self.entries: dict[str, bytes] = {}

    def get(self, name: str) -> bytes | None:
        return self.entries.get(name)

    def set(self, name: str, secret: bytes) -> None:
        self.entries[name] = secret

    def delete(self, name: str) -> None:
        self.entries.pop(name, None)


@pytest.fixture
def keys() -> Keys:
    return Keys()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "accounts"


@pytest.fixture
def vault(folder: Path, keys: Keys) -> Vault:
    return Vault(folder, keys)


def state_file(folder: Path, account: str) -> Path:
    """Where the vault keeps an account: its id, percent-encoded, as the file name."""
    return folder / (quote(account, safe="") + ".state")


def test_a_saved_record_loads_back_in_a_new_vault(vault: Vault, folder: Path, keys: Keys) -> None:
    vault.save("user:1", RECORD)
    assert Vault(folder, keys).load("user:1") == RECORD


def test_nothing_saved_loads_as_none(vault: Vault) -> None:
    assert vault.load("user:1") is None
    assert vault.accounts() == []


def test_each_account_has_its_own_file_and_key(vault: Vault, keys: Keys) -> None:
    for account in ("user:1", "user:1:workspace:7", "work/user:1"):
        vault.save(account, {"who": account})
    assert vault.accounts() == ["user:1", "user:1:workspace:7", "work/user:1"]
    assert sorted(keys.entries) == [
        "user:1:state-key",
        "user:1:workspace:7:state-key",
        "work/user:1:state-key",
    ]
    assert [vault.load(a) for a in vault.accounts()] == [{"who": a} for a in vault.accounts()]


def test_delete_removes_exactly_that_file_and_key(vault: Vault, keys: Keys) -> None:
    vault.save("user:1", RECORD)
    vault.save("user:2", RECORD)
    vault.delete("user:1")
    assert vault.accounts() == ["user:2"]
    assert list(keys.entries) == ["user:2:state-key"]
    assert vault.load("user:1") is None
    vault.delete("user:1")  # again: nothing to remove, no error


def test_the_file_is_private_and_holds_no_plaintext(vault: Vault, folder: Path) -> None:
    vault.save("user:1", RECORD)
    path = state_file(folder, "user:1")
    assert path.stat().st_mode & 0o777 == 0o600
    assert b"rt-0" not in path.read_bytes()


@pytest.mark.parametrize("account", ["", "1001", "user:", "user:1:other:2", "User/user:1"])
def test_an_account_that_is_not_a_tenant_key_is_refused(vault: Vault, account: str) -> None:
    with pytest.raises(MissingTenantKey):
        vault.save(account, RECORD)
    with pytest.raises(MissingTenantKey):
        vault.load(account)
    with pytest.raises(MissingTenantKey):
        vault.delete(account)


def test_a_file_renamed_to_another_account_does_not_decrypt(
    vault: Vault, folder: Path, keys: Keys
) -> None:
    """Even with the other account's key copied too: the account id is authenticated."""
    vault.save("user:1", RECORD)
    vault.save("user:2", {"n": 2})
    shutil.copyfile(state_file(folder, "user:1"), state_file(folder, "user:2"))
    with pytest.raises(VaultError, match="does not decrypt"):
        vault.load("user:2")
    keys.entries["user:2:state-key"] = keys.entries["user:1:state-key"]
    with pytest.raises(VaultError, match="does not decrypt"):
        Vault(folder, keys).load("user:2")


def test_a_rolled_back_copy_is_refused_until_the_next_save(
    vault: Vault, folder: Path, keys: Keys
) -> None:
    vault.save("user:1", {"n": 1})
    older = state_file(folder, "user:1").read_bytes()
    vault.save("user:1", {"n": 2})
    state_file(folder, "user:1").write_bytes(older)  # a backup put back
    with pytest.raises(StateRolledBack, match="generation 1, but generation 2"):
        vault.load("user:1")
    restarted = Vault(folder, keys)
    assert "ROLLED BACK: user:1" in restarted.description
    with pytest.raises(StateRolledBack):
        restarted.load("user:1")
    restarted.save("user:1", {"n": 3})  # a new sign-in
    assert "ROLLED BACK" not in restarted.description
    assert Vault(folder, keys).load("user:1") == {"n": 3}


def test_a_vault_that_outlived_its_key_entry_still_counts_on(vault: Vault, keys: Keys) -> None:
    """The generation it saw last counts, should the key store hand back an older entry."""
    vault.save("user:1", {"n": 1})
    first = keys.entries["user:1:state-key"]
    vault.save("user:1", {"n": 2})
    keys.entries["user:1:state-key"] = first  # the key store rolled back instead
    vault.save("user:1", {"n": 3})
    assert keys.entries["user:1:state-key"][-8:] == (3).to_bytes(8, "big")


def flip_last_byte(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 1
    path.write_bytes(bytes(blob))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (flip_last_byte, "does not decrypt"),
        (lambda path: path.write_bytes(path.read_bytes()[:20]), "does not decrypt"),
        (lambda path: path.write_bytes(b"{}"), "not a signin-broker state file"),
    ],
    ids=["tampered", "truncated", "not-ours"],
)
def test_a_corrupt_file_is_an_error_that_names_it(
    vault: Vault, folder: Path, damage: Any, message: str
) -> None:
    vault.save("user:1", RECORD)
    damage(state_file(folder, "user:1"))
    with pytest.raises(VaultError, match=message) as caught:
        vault.load("user:1")
    assert str(state_file(folder, "user:1")) in str(caught.value)


def test_a_state_file_without_its_key_is_an_error(vault: Vault, keys: Keys) -> None:
    vault.save("user:1", RECORD)
    keys.entries.clear()
    with pytest.raises(VaultError, match="key of user:1 is missing from the keys in memory"):
        vault.load("user:1")


def test_a_key_entry_of_the_wrong_size_is_an_error(vault: Vault, keys: Keys) -> None:
    vault.save("user:1", RECORD)
    keys.entries["user:1:state-key"] += b"x"
    with pytest.raises(VaultError, match="41 bytes is not a signin-broker key"):
        vault.load("user:1")


def test_a_file_from_before_generations_still_loads(folder: Path, keys: Keys) -> None:
    key, nonce = AESGCM.generate_key(bit_length=256), os.urandom(12)
    sealed = AESGCM(key).encrypt(nonce, b'{"n":0}', MAGIC_V1 + b"user:1")
    folder.mkdir(mode=0o700)
    state_file(folder, "user:1").write_bytes(MAGIC_V1 + nonce + sealed)
    keys.entries["user:1:state-key"] = key  # a bare key: generation 0
    vault = Vault(folder, keys)
    assert vault.load("user:1") == {"n": 0}
    vault.save("user:1", {"n": 1})
    assert Vault(folder, keys).load("user:1") == {"n": 1}


def test_a_failed_write_leaves_the_previous_state_and_key(
    vault: Vault, folder: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault.save("user:1", {"n": 1})
    before = dict(keys.entries)

    def disk_full(path: Path, data: bytes, **_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vault_module, "write_atomically", disk_full)
    vault.save("user:1", {"n": 2})  # kept in the journal reserved at the first save
    assert "reserved" in vault.kept_elsewhere("user:1")
    with pytest.raises(VaultError, match="cannot write the state of user:2"):
        vault.save("user:2", {"n": 2})  # a first save: no stored key could read a journal's
    assert keys.entries == before  # user:2's new key was taken back too
    assert Vault(folder, keys).load("user:1") == {"n": 2}  # the journal's, newer than the file
    monkeypatch.undo()
    assert Vault(folder, keys).load("user:1") == {"n": 2}  # put in its file by that start
