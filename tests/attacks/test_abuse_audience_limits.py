"""The bounds behind the audience flood, on a fake clock.

Each app has a budget of scoped grants at the provider (a burst, then a steady rate)
and each account caches a bounded number of scoped tokens, expired ones dropped first,
then the least recently used. test_abuse_audience_flood.py attacks the real daemon.
"""

from __future__ import annotations

import asyncio

import pytest

from signin_broker.session.accounts.records import Account, AccountInfo
from signin_broker.session.audit_entries import Actor
from signin_broker.session.errors import TooManyNewTokens
from signin_broker.session.limits import (
    GRANT_BURST,
    GRANTS_PER_SECOND,
    MAX_SCOPED_TOKENS,
    GrantBudget,
    ScopedTokens,
)
from signin_broker.session.manager import SessionManager
from signin_broker.session.tokens import TokenSet
from support.clocks import FakeClock
from support.memory_store import MemoryStore
from support.refreshing import ScriptedProvider, providers_of

FLOOD = 1000


def audience(i: int) -> str:
    return f"https://api{i}.example/"


def test_the_budget_is_the_one_the_flood_test_expects() -> None:
    assert (GRANT_BURST, GRANTS_PER_SECOND) == (20, 2.0)


def test_the_grant_budget_allows_a_burst_then_a_steady_rate_per_app() -> None:
    clock = FakeClock()
    budget = GrantBudget(clock, burst=20, per_second=2.0)
    for _ in range(20):
        budget.take("flooder")
    with pytest.raises(TooManyNewTokens) as caught:
        budget.take("flooder")
    assert caught.value.wait_seconds == 1
    assert "try again in 1 s" in str(caught.value)
    budget.take("another app")  # each app has its own budget
    clock.now += 0.5
    budget.take("flooder")  # half a second buys one grant
    with pytest.raises(TooManyNewTokens):
        budget.take("flooder")
    clock.now += 60
    for _ in range(20):  # refilled up to the burst, not beyond
        budget.take("flooder")
    with pytest.raises(TooManyNewTokens):
        budget.take("flooder")


def test_refused_requests_do_not_postpone_the_refill() -> None:
    clock = FakeClock()
    budget = GrantBudget(clock, burst=1, per_second=1.0)
    budget.take("app")
    for _ in range(10):
        clock.now += 0.1
        with pytest.raises(TooManyNewTokens):
            budget.take("app")
    clock.now += 0.01
    budget.take("app")


def test_the_grant_budget_tracks_a_bounded_number_of_apps() -> None:
    clock = FakeClock()
    budget = GrantBudget(clock, burst=2, per_second=1.0, max_apps=8)
    for i in range(1000):
        budget.take(f"app {i}")
        assert len(budget._buckets) <= 8


def token(now: float, lifetime: float = 3600) -> TokenSet:
    return TokenSet("at", "Bearer", (), issued_at=now, expires_at=now + lifetime)


def test_the_scoped_cache_drops_expired_tokens_first_then_the_least_recently_used() -> None:
    cache = ScopedTokens(limit=3)
    now = 1000.0
    cache.put((frozenset(), "a"), token(now), now)
    cache.put((frozenset(), "expired"), token(now, lifetime=10), now)
    cache.put((frozenset(), "b"), token(now), now)
    now += 60
    cache.put((frozenset(), "c"), token(now), now)  # the expired one makes room
    assert cache.get((frozenset(), "expired")) is None
    assert cache.get((frozenset(), "a")) is not None  # now the most recently used
    cache.put((frozenset(), "d"), token(now), now)  # "b" is the least recently used
    assert cache.get((frozenset(), "b")) is None
    assert all(cache.get((frozenset(), k)) for k in "acd")
    assert len(cache) == 3


async def manager(clock: FakeClock) -> tuple[SessionManager, ScriptedProvider]:
    issuer = "https://idp.example"
    tokens = TokenSet(
        "main", "Bearer", ("openid",), clock(), clock() + 3600, refresh_token="rt", id_token="it"
    )
    record = Account(AccountInfo("user:1001", "1001", is_default=True), tokens).to_record(issuer)
    provider = ScriptedProvider(rotates=False)
    session = SessionManager(clock=clock)
    await session.start(providers_of(issuer, provider), MemoryStore({"user:1001": record}), "test")
    return session, provider


def test_the_session_manager_bounds_grants_and_cache_of_an_audience_flood() -> None:
    clock = FakeClock()
    flooder, other = (
        Actor(app="/usr/bin/flooder", uid=0, pid=1),
        Actor(app="/usr/bin/ok", uid=0, pid=2),
    )

    async def flood() -> None:
        session, provider = await manager(clock)
        served = refused = 0
        for i in range(FLOOD):
            try:
                await session.tokens.get_token("", (), 0, audience=audience(i), actor=flooder)
                served += 1
            except TooManyNewTokens:
                refused += 1
        assert (served, refused, len(provider.refreshes)) == (
            GRANT_BURST,
            FLOOD - GRANT_BURST,
            served,
        )
        await session.tokens.get_token("", (), 0, audience=audience(0), actor=flooder)  # cached
        await session.tokens.get_token("", (), 0, audience=audience(FLOOD), actor=other)
        assert (await session.tokens.get_token("", (), 0, actor=flooder)).access_token == "main"
        assert len(provider.refreshes) == GRANT_BURST + 1
        # A patient flooder: one audience per second, for longer than the cache holds.
        for i in range(FLOOD):
            clock.now += 1
            await session.tokens.get_token(
                "", (), 0, audience=audience(FLOOD + 1 + i), actor=flooder
            )
            assert len(session._registry.get("user:1001").hold.scoped) <= MAX_SCOPED_TOKENS
        assert len(provider.refreshes) == GRANT_BURST + 1 + FLOOD

    asyncio.run(flood())


def test_an_app_over_its_budget_still_gets_a_cached_token_due_for_renewal() -> None:
    clock = FakeClock()
    app = Actor(app="/usr/bin/busy", uid=0, pid=1)

    async def renew_when_over_budget() -> None:
        session, provider = await manager(clock)
        session.tokens._scoped._grants = GrantBudget(clock, burst=1, per_second=1e-6)
        first = await session.tokens.get_token("", (), 0, audience=audience(0), actor=app)
        clock.now += 0.8 * 3600  # past the 75 % mark: due for renewal, still valid
        again = await session.tokens.get_token("", (), 0, audience=audience(0), actor=app)
        assert (again.access_token, len(provider.refreshes)) == (first.access_token, 1)
        with pytest.raises(TooManyNewTokens):  # it would not last the 3000 s asked for
            await session.tokens.get_token("", (), 3000, audience=audience(0), actor=app)

    asyncio.run(renew_when_over_budget())
