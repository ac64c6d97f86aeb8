"""The journals trust only what the vault would: the newest copy, sealed for its account.

A journal holds what the state folder could not take (store/journal.py). An older copy
of it put back loses to the file saved since; a copy below the key store's generation
is refused as a rolled-back file is; a copy sealed for another account, or a snapshot
cut short, is not read; a runtime folder another user could write to is neither read
nor written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker.store.files import UnsafeStorage
from signin_broker.store.journal import HALF_BYTES, HEADER, RESERVED_NAME, Journal
from signin_broker.store.keys import FileKeyStore
from signin_broker.store.vault import Vault, VaultError
from support.storage import filled, read_only, tmpfs


def vault(state: Path, runtime: Path | None = None) -> Vault:
    return Vault(state / "accounts", FileKeyStore(state / "keys.json"), runtime_journal=runtime)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """A small state folder (a tmpfs) with user:1001 saved once: its key and journal made."""
    with tmpfs(tmp_path / "state", "2m") as folder:
        vault(folder).save("user:1001", {"n": 1})
        yield folder


def test_an_older_journal_put_back_loses_to_the_file_saved_since(state: Path) -> None:
    journal = state / "accounts" / RESERVED_NAME
    with filled(state):
        vault(state).save("user:1001", {"n": 2})  # kept in the journal
        older = journal.read_bytes()
    vault(state).save("user:1001", {"n": 3})  # the start put n=2 in its file, then this
    journal.write_bytes(older)
    restarted = vault(state)
    assert restarted.load("user:1001") == {"n": 3}
    assert restarted.kept_elsewhere("user:1001") == ""
    assert journal.read_bytes() == bytes(len(older))  # the stale copy is wiped


def test_a_journal_copy_below_the_key_stores_generation_is_not_taken(state: Path) -> None:
    journal = state / "accounts" / RESERVED_NAME
    with filled(state):
        vault(state).save("user:1001", {"n": 2})
        older = journal.read_bytes()
    for n in (3, 4):
        vault(state).save("user:1001", {"n": n})
    (state / "accounts" / "user%3A1001.state").unlink()  # only the old journal is left
    journal.write_bytes(older)
    assert vault(state).load("user:1001") is None  # not the spent n=2


def test_a_copy_sealed_for_another_account_is_not_taken(state: Path) -> None:
    vault(state).save("user:2002", {"n": 1})
    with filled(state):
        vault(state).save("user:1001", {"n": 2})
    journal = Journal(state / "accounts" / RESERVED_NAME, "", runtime=False)
    records = journal.read()
    journal.write({"user:2002": records["user:1001"], "user:1001": records["user:1001"]})
    restarted = vault(state)
    assert restarted.load("user:2002") == {"n": 1}
    assert restarted.load("user:1001") == {"n": 2}  # put in its file by the start


def test_a_snapshot_cut_short_leaves_the_one_before(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j", "", runtime=False)
    journal.make()
    journal.write({"user:1001": b"first"})  # into the second half
    journal.write({"user:1001": b"second"})  # into the first
    with (tmp_path / "j").open("r+b") as file:  # the last write torn after its header
        file.seek(HEADER.size)
        file.write(b"X")
    assert Journal(tmp_path / "j", "", runtime=False).read() == {"user:1001": b"first"}
    assert (tmp_path / "j").stat().st_size == HALF_BYTES * 2
    assert (tmp_path / "j").stat().st_mode & 0o777 == 0o600


def test_a_runtime_folder_others_could_write_to_is_neither_read_nor_written(
    state: Path, tmp_path: Path
) -> None:
    runtime = tmp_path / "run" / "signin-broker"
    runtime.mkdir(parents=True)
    runtime.chmod(0o777)  # another user could plant a journal there, or read one
    with pytest.raises(UnsafeStorage, match="can be written by other users"):
        Journal(runtime / "state.journal", "", runtime=True).read()
    with read_only(state), pytest.raises(VaultError, match="nor keep it in a journal"):
        vault(state, runtime / "state.journal").save("user:1001", {"n": 2})
    assert not (runtime / "state.journal").exists()
