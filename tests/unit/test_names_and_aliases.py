"""Names of accounts: what a name means to a caller, aliases, and where they are kept.

The integration tests (tests/integration/test_account_names.py) run the same rules
through a real daemon; these pin each rule on its own, without a process.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest

from signin_broker.session.accounts.names import AccountNames, same_email
from signin_broker.session.accounts.records import EVERYTHING, Account, AccountInfo, Entitlement
from signin_broker.session.errors import (
    AccountNotFound,
    AliasConflict,
    AliasNotSaved,
    AmbiguousAccount,
)
from signin_broker.session.tokens import TokenSet
from signin_broker.session.validation import (
    MAX_ACCOUNT_ID_LENGTH,
    MAX_ALIASES,
    check_account,
    check_alias,
)
from signin_broker.store.aliases import AliasFile
from signin_broker.store.files import UnsafeStorage

ALICE, ALICE_AT_7, BOB, CAROL = "user:1001", "user:1001:workspace:7", "user:1002", "user:1003"


def account(account_id: str, email: str = "", username: str = "") -> Account:
    info = AccountInfo(id=account_id, platform_user_id="x", email=email, username=username)
    return Account(info=info, tokens=TokenSet("at", "Bearer", ("openid",), 0.0, 60.0))


ACCOUNTS = [
    account(ALICE, "alice@example.com", "alice"),
    account(ALICE_AT_7, "alice@example.com", "alice"),
    account(BOB, "bob@Example.com", "bob"),
    account(CAROL),  # her provider sent neither e-mail nor login
]
ONLY_ALICE = Entitlement(accounts=frozenset({ALICE}))


def named(
    name: str, entitlement: Entitlement = EVERYTHING, names: AccountNames | None = None
) -> str:
    return (names or AccountNames()).resolve(check_account(name), ACCOUNTS, entitlement)


def test_e_mail_domains_match_in_any_case_and_local_parts_exactly() -> None:
    assert same_email("bob@Example.com", "bob@example.COM")
    assert not same_email("bob@example.com", "Bob@example.com")  # may be another mailbox
    assert not same_email("bob@example.com", "bob@example.org")
    assert not same_email("", "@") and not same_email("", "")  # no e-mail: never named by one
    assert not same_email("@example.com", "@example.com")  # no local part: no address


def test_a_name_means_an_id_then_an_e_mail_or_a_login_of_one_account() -> None:
    assert named(BOB) == BOB
    assert named("user:9999") == "user:9999"  # an id is itself; whether it exists comes next
    assert named("") == ""  # the default, decided per caller later
    assert named("bob@example.com") == BOB
    assert named("bob") == BOB
    with pytest.raises(AccountNotFound):
        named("carol")  # Carol is named by her id (or an alias) only
    with pytest.raises(AccountNotFound):
        named("Bob@example.com")


def test_an_ambiguous_name_lists_the_ids_it_fits() -> None:
    for name in ("alice@example.com", "alice"):
        with pytest.raises(AmbiguousAccount) as caught:
            named(name)
        assert f"{ALICE}, {ALICE_AT_7}" in str(caught.value)


def test_only_accounts_the_caller_may_see_are_candidates() -> None:
    assert named("alice@example.com", ONLY_ALICE) == ALICE  # not ambiguous: 7 is not its own
    for name in ("bob@example.com", "bob", "nobody@example.com"):
        with pytest.raises(AccountNotFound) as caught:
            named(name, ONLY_ALICE)
        assert str(caught.value) == "not found"
    only_7 = Entitlement(accounts=frozenset({ALICE_AT_7, BOB}))
    assert named("alice", only_7) == ALICE_AT_7


def test_an_alias_wins_but_one_of_an_account_the_caller_may_not_see_is_as_if_absent() -> None:
    names = AccountNames()
    asyncio.run(names.set("alice", BOB, hiding=[ALICE, ALICE_AT_7]))  # given with --force
    assert named("alice", names=names) == BOB  # the person's own name for an account wins
    assert named("alice", ONLY_ALICE, names) == ALICE  # Bob's alias: none, to Alice's app
    asyncio.run(names.set("carol-home", CAROL))
    assert named("carol-home", names=names) == CAROL
    with pytest.raises(AccountNotFound):
        named("carol-home", ONLY_ALICE, names)
    assert names.aliases_of(CAROL) == ("carol-home",)


@pytest.mark.parametrize(
    "alias",
    ["", "Work", "user:1001", "work/user:1001", "me@example.com", "1001", "a" * 33, "-x", "a b",
     "wörk", "work\n"],
)  # fmt: skip
def test_an_alias_is_never_an_id_an_e_mail_or_a_sub_and_is_short(alias: str) -> None:
    with pytest.raises(ValueError, match="cannot be an alias: an alias is 1 to 32 lower-case"):
        check_alias(alias)


@pytest.mark.parametrize("alias", ["work", "w", "home-2", "a.b_c", "7eleven", "a" * 32])
def test_short_lower_case_aliases_are_taken(alias: str) -> None:
    assert check_alias(alias) == alias


def test_an_id_that_does_not_parse_is_refused_and_a_name_is_let_through() -> None:
    for malformed in ("user:", "User:1001", "user:a b", "work/user:", "user:1:workspace:"):
        with pytest.raises(ValueError, match="an id such as user:1001"):
            check_account(malformed)
    for name in ("alice", "alice@example.com", "Alice Example", "1001", "a/b"):
        assert check_account(name) == name
    with pytest.raises(ValueError, match="printable"):
        check_account("alice\u00a0example")


def test_the_alias_file_is_private_written_whole_and_read_back(tmp_path: Path) -> None:
    store = AliasFile(tmp_path / "state" / "aliases.json")
    assert store.load() == ({}, {})
    store.save({"work": ALICE_AT_7, "home": ALICE}, {"home": (BOB,), "work": ()})
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert store.load() == ({"home": ALICE, "work": ALICE_AT_7}, {"home": (BOB,)})
    assert [p.name for p in store.path.parent.iterdir()] == ["aliases.json"]  # no temp left


def test_the_most_aliases_of_the_longest_ids_are_read_back_and_more_is_never_written(
    tmp_path: Path,
) -> None:
    store = AliasFile(tmp_path / "aliases.json")
    longest = {f"a{n}": "user:" + "x" * (MAX_ACCOUNT_ID_LENGTH - 5) for n in range(MAX_ALIASES)}
    store.save(longest, {})
    assert store.load() == (longest, {})  # what was written is read back at the next start
    quoted = {f"a{n}": "user:" + '"' * (MAX_ACCOUNT_ID_LENGTH - 5) for n in range(MAX_ALIASES)}
    with pytest.raises(OSError, match="would take over"):
        store.save(quoted, {})  # escaped past the bound: refused, not written
    assert store.load() == (longest, {})


def test_an_alias_file_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    store = AliasFile(tmp_path / "aliases.json")
    for text in (
        "[]",
        '{"version": 2, "aliases": {}}',
        '{"version": 1, "aliases": {"a": 1}}',
        '{"version": 1, "aliases": {}, "hiding": {"a": "user:1"}}',
        '{"version": 1, "aliases": ' + "[" * 100 + "]" * 100 + "}",
    ):
        store.path.write_text(text)
        with pytest.raises(ValueError, match="not an aliases file"):
            store.load()
    store.path.unlink()
    os.symlink(tmp_path / "elsewhere.json", store.path)
    with pytest.raises(UnsafeStorage):
        store.load()


class Kept:
    """An alias store in memory that can be made to fail."""

    def __init__(
        self, aliases: dict[str, str], hiding: dict[str, tuple[str, ...]] | None = None
    ) -> None:
        self.aliases, self.hiding, self.failing = aliases, hiding or {}, False

    def load(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
        return dict(self.aliases), dict(self.hiding)

    def save(self, aliases: dict[str, str], hiding: dict[str, tuple[str, ...]]) -> None:
        if self.failing:
            raise OSError(28, "No space left on device")
        self.aliases, self.hiding = dict(aliases), dict(hiding)


def test_kept_aliases_come_back_and_bad_ones_are_left_out() -> None:
    kept = Kept({"work": ALICE_AT_7, "Bad": ALICE, "mail": "alice@example.com", "x": "user:"})
    names = AccountNames()
    asyncio.run(names.restore(kept))
    assert names.aliases_of(ALICE_AT_7) == ("work",)
    assert names.aliases_of(ALICE) == ()
    with pytest.raises(AccountNotFound):
        named("mail", names=names)


def test_an_alias_that_cannot_be_stored_is_not_taken_and_removal_forgets_them() -> None:
    kept = Kept({})
    names = AccountNames()

    async def scenario() -> None:
        await names.restore(kept)
        await names.set("work", ALICE_AT_7)
        await names.set("w7", ALICE_AT_7)
        kept.failing = True
        with pytest.raises(AliasNotSaved, match="No space left on device"):
            await names.set("home", ALICE)
        assert names.aliases_of(ALICE) == ()
        kept.failing = False
        await names.forget(ALICE_AT_7)

    asyncio.run(scenario())
    assert kept.aliases == {} and names.aliases_of(ALICE_AT_7) == ()


def test_the_login_is_stored_beside_the_account_so_an_earlier_daemon_still_reads_it() -> None:
    stored = account(BOB, "bob@example.com", "bob").to_record("https://idp.example")
    assert stored["username"] == "bob"
    assert "username" not in stored["account"] and "aliases" not in stored["account"]
    assert json.loads(json.dumps(stored))["account"]["email"] == "bob@example.com"
    assert Account.from_record(stored).info.username == "bob"
    assert Account.from_record({**stored, "username": None}).info.username == ""


def test_an_alias_over_a_login_that_signed_in_later_is_refused_until_the_person_chooses() -> None:
    """`bob` given to Alice while Bob was away: once he is back, neither wins silently."""
    kept = Kept({"bob": ALICE})  # written by a release that kept no `hiding`
    names = AccountNames()
    asyncio.run(names.restore(kept))
    with pytest.raises(AliasConflict) as caught:
        named("bob", names=names)
    assert (caught.value.alias, caught.value.account, caught.value.hidden) == ("bob", ALICE, (BOB,))
    assert [str(c) for c in names.conflicts(ACCOUNTS)] == [str(caught.value)]
    only_alice = named("bob", Entitlement(accounts=frozenset({ALICE})), names)
    assert only_alice == ALICE  # an app that cannot see Bob has no conflict to hear of
    assert names.conflicts(ACCOUNTS, Entitlement(accounts=frozenset({ALICE}))) == []

    asyncio.run(names.set("bob", ALICE, hiding=[BOB]))  # --force: kept over his login
    assert named("bob", names=names) == ALICE and names.conflicts(ACCOUNTS) == []
    assert kept.hiding == {"bob": (BOB,)}
    asyncio.run(names.forget(BOB))  # Bob removed: his leave goes, the alias stays
    assert kept.aliases == {"bob": ALICE} and kept.hiding == {}
    with pytest.raises(AliasConflict):  # signed in again: a conflict again
        named("bob", names=names)
    asyncio.run(names.remove("bob"))
    assert named("bob", names=names) == BOB


def test_kept_leave_to_hide_comes_back_and_bad_ones_leave_their_alias_out() -> None:
    names = AccountNames()
    kept = Kept({"bob": ALICE, "w": CAROL}, {"bob": (BOB,), "w": ("carol@example.com",)})
    asyncio.run(names.restore(kept))
    assert named("bob", names=names) == ALICE
    assert names.aliases_of(CAROL) == ()
