"""A refresh, once sent, is never abandoned, nor its refresh token sent twice (issue 14, #1).

On a fake clock with a scripted provider; tests/integration/test_refresh_outages.py
stalls the real stub mid-refresh.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from signin_broker.session import renewal
from signin_broker.session.accounts import Account, SignInState
from signin_broker.session.errors import AnswerLost, ProviderUnavailable, SignInRequired
from signin_broker.session.events import EventKind
from signin_broker.session.tokens import TokenSet
from support.refreshing import (
    ACCOUNT,
    Clock,
    ScriptedProvider,
    settle,
    signed_in,
    stored_account,
)

LOST = AnswerLost("the token request failed: ReadTimeout")


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers with a good token wait 10 ms for a renewal, not 2 s."""
    monkeypatch.setattr(renewal, "RENEWAL_WAIT_SECONDS", 0.01)


def test_a_stalled_refresh_is_awaited_and_its_late_answer_stored_and_used() -> None:
    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider()
        provider.stall = asyncio.Event()
        store = stored_account(clock)
        session, events = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600  # due for renewal, valid for 12 minutes more
        for _ in range(5):  # apps keep the valid token meanwhile
            assert (await session.keeper.get_token("", (), 0)).access_token == "at-0"
        for _ in range(10):  # minutes of stall: the keeper sends nothing more
            clock.now += 30
            await session.keeper.tend()
        assert provider.refreshes == ["rt-0"]
        assert provider.answer_within == [renewal.REFRESH_ANSWER_SECONDS]  # not 10 s
        provider.stall.set()  # the provider wakes up and answers
        await settle()
        assert (await session.keeper.get_token("", (), 0)).access_token == "at-1"
        assert store.records[ACCOUNT]["tokens"]["refresh_token"] == "rt-1"
        assert EventKind.REFRESHED in events.kinds()
        assert EventKind.REVOKED not in events.kinds()
        assert provider.refreshes == ["rt-0"]  # exactly one grant

    asyncio.run(run())


def test_a_refresh_whose_answer_is_lost_is_never_sent_again_and_lasts_until_expiry() -> None:
    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider()
        provider.failure = LOST
        store = stored_account(clock)
        session, events = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        assert (await session.keeper.get_token("", (), 0)).access_token == "at-0"
        await settle()
        assert Account.from_record(store.records[ACCOUNT]).tokens.refresh_in_doubt  # kept
        assert EventKind.DEGRADED in events.kinds()
        info = session.registry.account(ACCOUNT)
        assert info is not None and info.next_refresh_at == 0  # status: no renewal ahead
        provider.failure = None  # the provider answers again: still not sent again
        expires_at = 1_000_000.0 + 3600
        while clock.now + 20 < expires_at:
            clock.now += 20
            await session.keeper.tend()
            assert (await session.keeper.get_token("", (), 0)).access_token == "at-0"
            assert session.registry.state() is SignInState.SIGNED_IN
        assert provider.refreshes == ["rt-0"]
        clock.now = expires_at + 1
        await session.keeper.tend()
        assert EventKind.SIGNED_OUT in events.kinds()  # it could not be renewed...
        assert EventKind.REVOKED not in events.kinds()  # ...but nobody revoked it
        assert session.registry.state() is SignInState.SIGNED_OUT  # status agrees with GetToken
        with pytest.raises(SignInRequired):
            await session.keeper.get_token("", (), 0)
        assert store.records == {}
        assert provider.refreshes == ["rt-0"]

    asyncio.run(run())


def test_no_answer_within_the_bound_is_an_answer_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renewal, "REFRESH_ANSWER_SECONDS", 0.02)

    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider()
        provider.stall = asyncio.Event()  # never set: the provider never answers
        session, events = await signed_in(clock, provider)
        clock.now += 0.8 * 3600
        assert (await session.keeper.get_token("", (), 0)).access_token == "at-0"
        under_way = session.registry.get(ACCOUNT).refresh_task
        assert under_way is not None
        await asyncio.wait([under_way], timeout=10)  # ends at the 20 ms bound
        await settle()
        assert session.registry.get(ACCOUNT).tokens.refresh_in_doubt
        assert "no answer within 0.02 s" in session.degraded_reason
        clock.now += 120
        await session.keeper.tend()
        assert provider.refreshes == ["rt-0"]
        assert EventKind.REVOKED not in events.kinds()

    asyncio.run(run())


def test_a_refresh_token_the_provider_keeps_is_sent_again_after_a_lost_answer() -> None:
    """A provider that does not rotate cannot have spent it: nothing is in doubt."""

    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider(rotates=False)
        session, _ = await signed_in(clock, provider)
        clock.now += 0.8 * 3600
        assert (await session.keeper.get_token("", (), 0)).access_token == "at-1"
        assert session.registry.get(ACCOUNT).tokens.refresh_kept
        clock.now += 0.8 * 3600
        provider.failure = LOST
        await session.keeper.get_token("", (), 0)
        await settle()
        assert not session.registry.get(ACCOUNT).tokens.refresh_in_doubt
        provider.failure = None
        clock.now += 5  # past the backoff
        assert (await session.keeper.get_token("", (), 0)).access_token == "at-3"
        assert provider.refreshes == ["rt-0", "rt-0", "rt-0"]

    asyncio.run(run())


def test_a_refresh_token_in_doubt_stays_in_doubt_after_a_restart() -> None:
    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider()
        provider.failure = LOST
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        await session.keeper.get_token("", (), 0)
        await settle()
        restarted, _ = await signed_in(clock, fresh := ScriptedProvider(), store)
        for _ in range(5):
            clock.now += 10
            await restarted.keeper.tend()
            assert (await restarted.keeper.get_token("", (), 0)).access_token == "at-0"
        assert fresh.refreshes == []

    asyncio.run(run())


def test_an_answer_that_comes_after_sign_out_is_revoked_not_stored() -> None:
    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider()
        provider.stall = asyncio.Event()
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        await session.keeper.get_token("", (), 0)  # the refresh is under way, stalled
        await session.lifecycle.sign_out(ACCOUNT)
        provider.stall.set()
        await settle()
        assert store.records == {}  # not brought back by the late answer
        assert session.registry.state() is SignInState.SIGNED_OUT
        assert {"at-1", "rt-1"} <= set(provider.revoked)

    asyncio.run(run())


def test_in_doubt_and_kept_survive_a_restart_and_from_refresh_does_not() -> None:
    tokens = TokenSet("a", "Bearer", (), 0.0, 60.0, "r")
    tokens = replace(tokens, from_refresh=True, refresh_in_doubt=True, refresh_kept=True)
    restored = TokenSet.from_record(tokens.to_record())
    assert restored.refresh_in_doubt and restored.refresh_kept
    assert not restored.from_refresh  # restored tokens may be renewed once for a min_ttl


def test_a_daemon_stopped_while_a_refresh_waits_never_sends_that_refresh_token_again() -> None:
    """The write-ahead: the store says "in doubt" from the moment the refresh is sent."""

    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider()
        provider.stall = asyncio.Event()
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        await session.keeper.get_token("", (), 0)  # starts the renewal, which stalls
        await settle()
        assert provider.refreshes == ["rt-0"]
        assert store.records[ACCOUNT]["tokens"]["refresh_in_doubt"] is True
        # The daemon stops here (SIGKILL, or SIGTERM after its grace): a new one starts.
        restarted_provider = ScriptedProvider()
        again, events = await signed_in(clock, restarted_provider, store)
        assert (await again.keeper.get_token("", (), 0)).access_token == "at-0"  # still valid
        clock.now += 0.19 * 3600
        await again.keeper.tend()
        assert restarted_provider.refreshes == []  # rt-0 may be spent: never sent again
        clock.now += 0.02 * 3600  # past the expiry: the person must sign in again
        await again.keeper.tend()
        assert again.registry.state() is SignInState.SIGNED_OUT
        assert EventKind.REVOKED not in events.kinds()
        provider.stall.set()
        await settle()

    asyncio.run(run())


def test_a_refresh_answered_or_refused_leaves_no_doubt_in_the_store() -> None:
    async def run() -> None:
        clock, provider = Clock(), ScriptedProvider()
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        provider.failure = ProviderUnavailable("HTTP 503")
        await session.keeper.get_token("", (), 0)
        await settle()
        assert store.records[ACCOUNT]["tokens"]["refresh_in_doubt"] is False
        assert store.records[ACCOUNT]["tokens"]["refresh_token"] == "rt-0"
        provider.failure = None
        clock.now += 600
        await session.keeper.tend()
        await settle()
        assert provider.refreshes == ["rt-0", "rt-0"]  # unspent: sent again after the backoff
        assert store.records[ACCOUNT]["tokens"]["refresh_token"] == "rt-2"
        assert store.records[ACCOUNT]["tokens"]["refresh_in_doubt"] is False

    asyncio.run(run())
