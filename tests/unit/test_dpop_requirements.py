"""What sign-ins learned of providers requiring DPoP: kept in a file, read back, forgotten.

The file (store.dpop_requirements) and the session's use of it
(session.dpop_requirements), without a daemon: a save only when something changed, an
unreadable file read as nothing learned, a failed save logged and kept in memory; and
an account bound before the reason was kept restored as bound by the setting.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from signin_broker.oidc.dpop import DpopKey
from signin_broker.oidc.provider import Provider
from signin_broker.session.accounts import Account, AccountInfo
from signin_broker.session.dpop_requirements import DpopRequirements, bound_by
from signin_broker.session.tokens import TokenSet
from signin_broker.store.dpop_requirements import RequirementFile

ISSUER, CLIENT = "https://id.example", "signin-broker"


class CountingFile(RequirementFile):
    """The real file, counting its saves (and failing them when told to)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.saves = 0
        self.fail = False

    def save(self, required: frozenset[tuple[str, str]]) -> None:
        self.saves += 1
        if self.fail:
            raise OSError(28, "No space left on device")
        super().save(required)


def test_the_file_keeps_pairs_and_refuses_what_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "state" / "dpop-required.json"
    kept = RequirementFile(path)
    assert kept.load() == set()  # no file: nothing learned yet
    kept.save(frozenset({(ISSUER, CLIENT), ("https://other.example", "tv")}))
    assert kept.load() == {(ISSUER, CLIENT), ("https://other.example", "tv")}
    assert path.stat().st_mode & 0o777 == 0o600
    for text in (
        "[]",
        '{"version": 2, "required": []}',
        '{"version": 1, "required": [{}]}',
        '{"version": 1, "required": [{"issuer": "", "client_id": "x"}]}',
        "not json",
    ):
        path.write_text(text)
        with pytest.raises(ValueError):
            kept.load()
    path.unlink()
    os.mkfifo(path)  # never blocks the daemon: only a regular file is read
    with pytest.raises(OSError):
        kept.load()


def test_what_a_sign_in_learned_is_saved_once_and_forgotten_without_a_proof(
    tmp_path: Path,
) -> None:
    store = CountingFile(tmp_path / "dpop-required.json")
    requirements = DpopRequirements(store)
    requirements.load()
    provider = Provider(ISSUER, CLIENT)

    async def run() -> None:
        await requirements.keep(provider)  # nothing learned: nothing written
        assert store.saves == 0 and not store.path.exists()
        provider.learned_dpop_required()
        await requirements.keep(provider)
        await requirements.keep(provider)  # unchanged: not written again
        assert store.saves == 1 and requirements.required(ISSUER, CLIENT)
        provider.dpop_required = False  # a sign-in succeeded without a proof
        await requirements.keep(provider)
        assert store.saves == 2 and not requirements.required(ISSUER, CLIENT)
        await provider.close()

    asyncio.run(run())
    again = DpopRequirements(RequirementFile(store.path))
    again.load()
    assert not again.required(ISSUER, CLIENT)


def test_a_failed_save_is_kept_in_memory_and_tried_at_the_next_sign_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = CountingFile(tmp_path / "dpop-required.json")
    store.fail = True
    requirements = DpopRequirements(store)
    provider = Provider(ISSUER, CLIENT, dpop_required=True)

    async def run() -> None:
        await requirements.keep(provider)
        assert "could not save" in caplog.text and provider.dpop_required
        store.fail = False
        await requirements.keep(provider)
        await provider.close()

    asyncio.run(run())
    assert store.saves == 2 and store.load() == {(ISSUER, CLIENT)}


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
