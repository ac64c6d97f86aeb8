"""One contract every account store keeps (session.ports.AccountStore): the encrypted vault
the daemon uses, and the memory store the session tests use in its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from signin_broker.session.accounts.records import account_id_of
from signin_broker.session.ports import AccountStore
from signin_broker.session.validation import check_account
from signin_broker.store.keys import FileKeyStore
from signin_broker.store.vault import Vault
from support.memory_store import MemoryStore

RECORD: dict[str, Any] = {"version": 1, "refresh_token": "rt-1", "scopes": ["openid"]}


@pytest.fixture(params=["vault", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> AccountStore:
    if request.param == "vault":
        return Vault(tmp_path / "accounts", FileKeyStore(tmp_path / "keys.json"))
    return MemoryStore()


def test_a_saved_record_reads_back_and_is_listed(store: AccountStore) -> None:
    store.save("user:1001", RECORD)
    store.save("work/user:7:workspace:3", {**RECORD, "refresh_token": "rt-2"})
    assert store.load("user:1001") == RECORD
    assert sorted(store.accounts()) == ["user:1001", "work/user:7:workspace:3"]
    assert store.description


def test_a_save_replaces_the_record(store: AccountStore) -> None:
    store.save("user:1001", RECORD)
    store.save("user:1001", {**RECORD, "refresh_token": "rt-3"})
    assert store.load("user:1001") == {**RECORD, "refresh_token": "rt-3"}
    assert store.accounts() == ["user:1001"]


def test_an_unknown_account_reads_as_none_and_deleting_it_is_no_error(store: AccountStore) -> None:
    assert store.load("user:404") is None
    store.delete("user:404")
    store.save("user:1001", RECORD)
    store.delete("user:1001")
    assert store.load("user:1001") is None and store.accounts() == []


@pytest.mark.parametrize(
    "sub",
    [
        "a" * 255,  # the longest sub OpenID Connect allows (Core 2): its id outgrows a file name
        ":" * 255,  # each ':' is written %3A in the id, and %253A in a file name
        "ü" * 255,  # beyond the spec, as a provider might send it: 12 characters each
    ],
)
def test_the_longest_subs_make_accounts_that_are_saved_listed_and_deleted(
    store: AccountStore, sub: str
) -> None:
    long_id = account_id_of(sub, "123456789012345678", "work")
    assert check_account(long_id) == long_id  # an RPC may name it
    store.save(long_id, RECORD)
    store.save("user:1001", RECORD)
    assert store.load(long_id) == RECORD
    assert sorted(store.accounts()) == sorted([long_id, "user:1001"])
    store.delete(long_id)
    assert store.load(long_id) is None and store.accounts() == ["user:1001"]
