"""A refresh, once sent, is never abandoned; one whose answer is lost is sent once more only.

A refresh token whose refresh got no answer may have been spent by a rotating provider,
and a second use reads as theft; but a request the provider never saw costs nothing. So
it is sent once more, shortly before the access token expires: the session is lost only
where the provider completed the lost refresh.

On a fake clock with a scripted provider; tests/integration/test_refresh_outages.py
stalls the real stub mid-refresh.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from signin_broker.oidc.errors import AnswerLost, OAuthError, ProviderUnavailable
from signin_broker.session import schedule
from signin_broker.session.accounts.records import Account
from signin_broker.session.errors import ProviderUnreachable, SignInRequired
from signin_broker.session.fresh_tokens import scoped_tokens
from signin_broker.session.manager import SessionManager
from signin_broker.session.tokens import TokenSet
from signin_broker.states import EventKind, SignInState
from support.clocks import FakeClock
from support.memory_store import MemoryStore
from support.refreshing import ACCOUNT, ScriptedProvider, settle, signed_in, stored_account

LOST = AnswerLost("the token request failed: ReadTimeout")


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers with a good token wait 10 ms for a renewal, not 2 s."""
    monkeypatch.setattr(schedule, "RENEWAL_WAIT_SECONDS", 0.01)


def test_a_stalled_refresh_is_awaited_and_its_late_answer_stored_and_used() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        provider.stall = asyncio.Event()
        store = stored_account(clock)
        session, events = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600  # due for renewal, valid for 12 minutes more
        for _ in range(5):  # apps keep the valid token meanwhile
            assert (await session.tokens.get_token("", (), 0)).access_token == "at-0"
        for _ in range(10):  # minutes of stall: the keeper sends nothing more
            clock.now += 30
            await session.tend()
        assert provider.refreshes == ["rt-0"]
        assert provider.answer_within == [schedule.REFRESH_ANSWER_SECONDS]  # not 10 s
        provider.stall.set()  # the provider wakes up and answers
        await settle()
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-1"
        assert store.records[ACCOUNT]["tokens"]["refresh_token"] == "rt-1"
        assert EventKind.REFRESHED in events.kinds()
        assert EventKind.REVOKED not in events.kinds()
        assert provider.refreshes == ["rt-0"]  # exactly one grant

    asyncio.run(run())


EXPIRES_AT = 1_000_000.0 + 3600  # the stored account's access token
RESEND_AT = EXPIRES_AT - 60


async def lost_once(
    clock: FakeClock, provider: ScriptedProvider, store: MemoryStore
) -> SessionManager:
    """A session whose renewal at 80 % lost its answer; the provider answers again after."""
    session, _ = await signed_in(clock, provider, store)
    provider.failure = LOST
    clock.now += 0.8 * 3600
    assert (await session.tokens.get_token("", (), 0)).access_token == "at-0"
    await settle()
    provider.failure = None
    return session


async def until_the_resend(session: SessionManager, clock: FakeClock) -> None:
    """Tend and serve every 20 s up to the resend's moment: the old token all along."""
    while clock.now + 20 < RESEND_AT:
        clock.now += 20
        await session.tend()
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-0"
        assert session.overview.status().state is SignInState.SIGNED_IN


def test_a_refresh_whose_answer_is_lost_is_sent_once_more_shortly_before_expiry() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        store = stored_account(clock)
        session = await lost_once(clock, provider, store)
        assert Account.from_record(store.records[ACCOUNT]).tokens.unanswered == 1  # kept
        assert "sent once more at" in session.overview.degraded_reason
        info = session.overview.account(ACCOUNT)
        assert info is not None and info.next_refresh_at == RESEND_AT  # status: when
        assert "the refresh token is sent once more at" in info.at_risk  # and why
        with pytest.raises(ProviderUnreachable, match="sent once more at"):
            await session.tokens.get_token("", (), 1800)  # not at once, whoever asks
        await until_the_resend(session, clock)
        assert provider.refreshes == ["rt-0"]
        clock.now = RESEND_AT
        await session.tend()
        await settle()
        assert provider.refreshes == ["rt-0", "rt-0"]  # the provider had never seen it
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-2"
        assert store.records[ACCOUNT]["tokens"]["refresh_unanswered"] == 0

    asyncio.run(run())


def test_a_resend_the_provider_refuses_ends_the_session_and_says_why() -> None:
    """The provider had completed the lost refresh: the old token is spent (reuse)."""

    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        store = stored_account(clock)
        session = await lost_once(clock, provider, store)
        await until_the_resend(session, clock)
        provider.failure = OAuthError("invalid_grant", "refresh token reused", 400)
        clock.now = RESEND_AT
        await session.tend()
        await settle()
        assert provider.refreshes == ["rt-0", "rt-0"]
        assert session.overview.status().state is SignInState.SIGNED_OUT
        [ended] = session.overview.status().ended
        assert "having completed the renewal whose answer was lost" in ended.reason
        assert "tokens" not in store.records[ACCOUNT]  # only why it ended, for status
        restarted, _ = await signed_in(clock, ScriptedProvider(), store)
        assert [e.reason for e in restarted.overview.status().ended] == [ended.reason]

    asyncio.run(run())


def test_a_resend_whose_answer_is_lost_too_is_one_more_doubt_and_the_session_lasts() -> None:
    """Each lost answer leaves a doubt that one resend settles: the daemon killed again
    while resending, or the network lost that answer too, costs no session."""

    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        store = stored_account(clock)
        session = await lost_once(clock, provider, store)
        await until_the_resend(session, clock)
        provider.failure = LOST
        clock.now = RESEND_AT
        await session.tend()
        await settle()
        assert store.records[ACCOUNT]["tokens"]["refresh_unanswered"] == 2
        provider.failure = None
        clock.now += 5  # past the backoff, still the last moment
        await session.tend()
        await settle()
        assert provider.refreshes == ["rt-0", "rt-0", "rt-0"]  # never at once, never more
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-3"
        assert session.overview.status().state is SignInState.SIGNED_IN
        assert store.records[ACCOUNT]["tokens"]["refresh_unanswered"] == 0

    asyncio.run(run())


def test_a_refresh_token_in_doubt_stays_in_doubt_after_a_restart() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        store = stored_account(clock)
        await lost_once(clock, provider, store)
        restarted, _ = await signed_in(clock, fresh := ScriptedProvider(), store)
        await until_the_resend(restarted, clock)
        assert fresh.refreshes == []
        clock.now = RESEND_AT
        await restarted.tend()
        await settle()
        assert fresh.refreshes == ["rt-0"]

    asyncio.run(run())


def test_an_answer_that_comes_after_sign_out_is_revoked_not_stored() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        provider.stall = asyncio.Event()
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        await session.tokens.get_token("", (), 0)  # the refresh is under way, stalled
        await session.endings.sign_out(ACCOUNT)
        provider.stall.set()
        await settle()
        assert store.records == {}  # not brought back by the late answer
        assert session.overview.status().state is SignInState.SIGNED_OUT
        assert {"at-1", "rt-1"} <= set(provider.revoked)

    asyncio.run(run())


@pytest.mark.parametrize("audience", ["", "api"], ids=["main", "down-scoped"])
def test_a_caller_waiting_for_a_renewal_when_the_session_is_signed_out_gets_no_token(
    monkeypatch: pytest.MonkeyPatch, audience: str
) -> None:
    """Not the ended session's token, which the sign-out revoked: a caller must sign in.

    It waits for the main token's renewal, or for the account's lock, which that renewal
    holds, to renew its down-scoped token.
    """
    monkeypatch.setattr(schedule, "RENEWAL_WAIT_SECONDS", 0.5)  # the sign-out comes within
    monkeypatch.setattr(scoped_tokens, "CALLER_WAIT_SECONDS", 0.5)  # either wait

    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        session, _ = await signed_in(clock, provider, revalidate_seconds=10**6)
        await session.tokens.get_token("", (), 0, audience=audience)  # confirmed, and cached
        provider.stall = asyncio.Event()
        clock.now += 0.8 * 3600  # due, and still good for a caller asking no more
        sent = len(provider.refreshes)
        await session.tend()  # the main token's renewal holds the account's lock, stalled
        waiting = asyncio.create_task(session.tokens.get_token("", (), 0, audience=audience))
        for _ in range(10):  # each runs until it waits: nothing else for them to await
            await asyncio.sleep(0)
        assert len(provider.refreshes) == sent + 1  # the renewal's alone
        await session.endings.sign_out(ACCOUNT)
        with pytest.raises(SignInRequired):
            await waiting
        provider.stall.set()
        await settle()

    asyncio.run(run())


def test_in_doubt_and_kept_survive_a_restart_and_from_refresh_does_not() -> None:
    tokens = TokenSet("a", "Bearer", (), 0.0, 60.0, "r")
    tokens = replace(tokens, from_refresh=True, unanswered=1, refresh_kept=True)
    restored = TokenSet.from_record(tokens.to_record())
    assert restored.refresh_in_doubt and restored.refresh_kept
    assert not restored.from_refresh  # restored tokens may be renewed once for a min_ttl


def test_a_daemon_stopped_while_a_refresh_waits_sends_that_refresh_token_once_more_late() -> None:
    """The write-ahead: the store counts the send from the moment the refresh is sent."""

    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        provider.stall = asyncio.Event()
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        await session.tokens.get_token("", (), 0)  # starts the renewal, which stalls
        await settle()
        assert provider.refreshes == ["rt-0"]
        assert store.records[ACCOUNT]["tokens"]["refresh_unanswered"] == 1
        # The daemon stops here (SIGKILL, or SIGTERM after its grace): a new one starts.
        restarted_provider = ScriptedProvider()
        again, events = await signed_in(clock, restarted_provider, store)
        assert (await again.tokens.get_token("", (), 0)).access_token == "at-0"  # still valid
        await until_the_resend(again, clock)
        assert restarted_provider.refreshes == []  # rt-0 may be spent: not sent at once
        clock.now = RESEND_AT
        await again.tend()
        await settle()
        assert restarted_provider.refreshes == ["rt-0"]  # once more: it had not been spent
        assert (await again.tokens.get_token("", (), 0)).access_token == "at-1"
        assert EventKind.REVOKED not in events.kinds()
        provider.stall.set()
        await settle()

    asyncio.run(run())


def test_a_refresh_answered_or_refused_leaves_no_doubt_in_the_store() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        provider.failure = ProviderUnavailable("HTTP 503")
        await session.tokens.get_token("", (), 0)
        await settle()
        assert store.records[ACCOUNT]["tokens"]["refresh_unanswered"] == 0
        assert store.records[ACCOUNT]["tokens"]["refresh_token"] == "rt-0"
        provider.failure = None
        clock.now += 600
        await session.tend()
        await settle()
        assert provider.refreshes == ["rt-0", "rt-0"]  # unspent: sent again after the backoff
        assert store.records[ACCOUNT]["tokens"]["refresh_token"] == "rt-2"
        assert store.records[ACCOUNT]["tokens"]["refresh_unanswered"] == 0

    asyncio.run(run())
