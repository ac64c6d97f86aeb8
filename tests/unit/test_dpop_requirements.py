"""What sign-ins learned of providers requiring DPoP: kept in a file, read back, forgotten.

The file (store.dpop_requirements) and the session's use of it
(session.providers.dpop_requirements), without a daemon: when and why each was learned, kept and
read back (entries an earlier version wrote too), a save only when something changed,
forgotten after its time or when the file is edited (the doctor), an unreadable file
read as nothing learned, a failed save logged, kept in memory and tried again; and an
account bound before the reason was kept restored as bound by the setting.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from pathlib import Path

import pytest

from signin_broker.oidc.dpop import DpopKey
from signin_broker.oidc.provider import Provider
from signin_broker.session.accounts.records import Account, AccountInfo
from signin_broker.session.providers.dpop_requirements import UNSAID, DpopRequirements, bound_by
from signin_broker.session.schedule import DPOP_REQUIREMENT_SECONDS
from signin_broker.session.tokens import TokenSet
from signin_broker.store.dpop_requirements import KeptRequirement, RequirementFile

ISSUER, CLIENT = "https://id.example", "signin-broker"
SAID = "the provider refused a request without a DPoP proof, naming DPoP (invalid_dpop_proof)"


class Clock:
    """A wall clock a test moves."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class CountingFile(RequirementFile):
    """The real file, counting its saves (and failing them when told to)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.saves = 0
        self.fail = False

    def save(self, required: Iterable[KeptRequirement]) -> None:
        self.saves += 1
        if self.fail:
            raise OSError(28, "No space left on device")
        super().save(required)


def test_the_file_keeps_when_and_why_and_refuses_what_is_not_an_entry(tmp_path: Path) -> None:
    path = tmp_path / "state" / "dpop-required.json"
    kept = RequirementFile(path)
    assert kept.load() == []  # no file: nothing learned yet
    entries = [
        KeptRequirement(ISSUER, CLIENT, 1_800_000_000.0, SAID),
        KeptRequirement("https://other.example", "tv", None, ""),
    ]
    kept.save(entries)
    assert sorted(kept.load()) == sorted(entries)
    assert path.stat().st_mode & 0o777 == 0o600
    for text in (
        "[]",
        '{"version": 2, "required": []}',
        '{"version": 1, "required": [{}]}',
        '{"version": 1, "required": [{"issuer": "", "client_id": "x"}]}',
        '{"version": 1, "required": [{"issuer": "i", "client_id": "x", "learned_at": "now"}]}',
        '{"version": 1, "required": [{"issuer": "i", "client_id": "x", "learned_at": true}]}',
        '{"version": 1, "required": [{"issuer": "i", "client_id": "x", "reason": 7}]}',
        "not json",
    ):
        path.write_text(text)
        with pytest.raises(ValueError):
            kept.load()
    path.unlink()
    os.mkfifo(path)  # never blocks the daemon: only a regular file is read
    with pytest.raises(OSError):
        kept.load()


def test_an_entry_an_earlier_version_wrote_counts_from_its_first_reading(tmp_path: Path) -> None:
    """Written without a time or reason, it is kept from now on, and written back with both."""
    path = tmp_path / "dpop-required.json"
    path.write_text(
        json.dumps({"version": 1, "required": [{"issuer": ISSUER, "client_id": CLIENT}]})
    )
    clock = Clock()
    requirements = DpopRequirements(RequirementFile(path), clock)
    requirements.load()
    provider = Provider(ISSUER, CLIENT, dpop_required=True)
    requirement = requirements.of(provider)
    assert requirement is not None
    assert (requirement.learned_at, requirement.reason) == (clock.now, UNSAID)
    clock.now += DPOP_REQUIREMENT_SECONDS - 1
    assert requirements.required(ISSUER, CLIENT)
    clock.now += 1
    assert not requirements.required(ISSUER, CLIENT)
    asyncio.run(provider.close())


def test_what_a_sign_in_learned_is_saved_once_with_why_and_forgotten_without_a_proof(
    tmp_path: Path,
) -> None:
    store = CountingFile(tmp_path / "dpop-required.json")
    clock = Clock()
    requirements = DpopRequirements(store, clock)
    requirements.load()
    provider = Provider(ISSUER, CLIENT)

    async def run() -> None:
        await requirements.keep(provider)  # nothing learned: nothing written
        assert store.saves == 0 and not store.path.exists()
        provider.learned_dpop_required(SAID)
        await requirements.keep(provider)
        await requirements.keep(provider)  # unchanged: not written again
        assert store.saves == 1 and requirements.required(ISSUER, CLIENT)
        assert store.load() == [KeptRequirement(ISSUER, CLIENT, clock.now, SAID)]
        provider.dpop_required = False  # a sign-in succeeded without a proof
        await requirements.keep(provider)
        assert store.saves == 2 and not requirements.required(ISSUER, CLIENT)
        await provider.close()

    asyncio.run(run())
    again = DpopRequirements(RequirementFile(store.path))
    again.load()
    assert not again.required(ISSUER, CLIENT)


def test_a_requirement_expires_and_a_sign_in_learning_it_again_renews_it(tmp_path: Path) -> None:
    store = CountingFile(tmp_path / "dpop-required.json")
    clock = Clock()
    requirements = DpopRequirements(store, clock)
    provider = Provider(ISSUER, CLIENT)

    async def run() -> None:
        provider.learned_dpop_required(SAID)
        await requirements.keep(provider)
        learned_at = clock.now
        clock.now += DPOP_REQUIREMENT_SECONDS
        await requirements.refresh(provider)  # before the next sign-in: expired
        assert not provider.dpop_required and requirements.of(provider) is None
        provider.learned_dpop_required(SAID)  # that sign-in learns it once more
        await requirements.keep(provider)
        requirement = requirements.of(provider)
        assert requirement is not None and requirement.learned_at == learned_at + (
            DPOP_REQUIREMENT_SECONDS
        )
        assert store.saves == 2
        await provider.close()

    asyncio.run(run())


def test_the_file_edited_by_the_doctor_is_read_again_before_a_sign_in(tmp_path: Path) -> None:
    store = CountingFile(tmp_path / "dpop-required.json")
    requirements = DpopRequirements(store)
    provider = Provider(ISSUER, CLIENT)

    async def run() -> None:
        provider.learned_dpop_required(SAID)
        await requirements.keep(provider)
        store.path.unlink()  # `signin-broker doctor --forget-dpop`
        assert requirements.of(provider) is None  # status reads it again
        await requirements.refresh(provider)
        assert not provider.dpop_required
        await provider.close()

    asyncio.run(run())


def test_a_failed_save_is_kept_in_memory_and_tried_at_the_next_sign_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = CountingFile(tmp_path / "dpop-required.json")
    store.fail = True
    requirements = DpopRequirements(store)
    provider = Provider(ISSUER, CLIENT)
    provider.learned_dpop_required(SAID)

    async def run() -> None:
        await requirements.keep(provider)
        assert "could not save" in caplog.text and requirements.required(ISSUER, CLIENT)
        await requirements.refresh(provider)  # the file is absent still: memory holds
        assert provider.dpop_required
        store.fail = False
        await requirements.keep(provider)
        await provider.close()

    asyncio.run(run())
    assert store.saves == 2 and [kept[:2] for kept in store.load()] == [(ISSUER, CLIENT)]


def test_an_unreadable_file_is_read_as_nothing_learned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "dpop-required.json"
    path.write_text(json.dumps({"version": 99}))
    requirements = DpopRequirements(RequirementFile(path))
    requirements.load()
    assert not requirements.required(ISSUER, CLIENT)
    assert "could not be read" in caplog.text


def test_why_tokens_are_bound_and_an_account_bound_before_the_reason_was_kept() -> None:
    key = DpopKey.generate("ES256")
    assert bound_by(Provider(ISSUER, CLIENT), None) == ""
    assert bound_by(Provider(ISSUER, CLIENT), key) == "setting"
    assert bound_by(Provider(ISSUER, CLIENT, dpop_required=True), key) == "provider"
    tokens = TokenSet("at", "DPoP", ("openid",), 0.0, 10_000.0, refresh_token="rt")
    bound = Account(AccountInfo("user:1", "1", dpop_bound_by="provider"), tokens, dpop_key=key)
    record = bound.to_record(ISSUER)
    assert record["dpop_bound_by"] == "provider" and "dpop_bound_by" not in record["account"]
    assert Account.from_record(record).info.dpop_bound_by == "provider"
    del record["dpop_bound_by"]  # as an earlier version wrote it: bound by auto, the default
    assert Account.from_record(record).info.dpop_bound_by == "setting"
    bearer = Account(AccountInfo("user:1", "1"), TokenSet("at", "Bearer", ("openid",), 0.0, 1.0))
    assert Account.from_record(bearer.to_record(ISSUER)).info.dpop_bound_by == ""
