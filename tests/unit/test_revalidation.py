"""Re-validation at the provider: about once a minute, a renewal counting as one.

On a fake clock with the scripted provider. The contract's bound (I2, docs/contract.md
§8: a revocation shows within 60 s) is checked end to end in
tests/conformance/test_session_cases.py.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from signin_broker.oidc.dpop import DpopKey
from signin_broker.session import schedule
from signin_broker.session.errors import SignInRequired
from signin_broker.session.tokens import TokenSet
from signin_broker.states import EventKind
from support.clocks import FakeClock
from support.refreshing import ScriptedProvider, settle, signed_in, stored_account


class TimedProvider(ScriptedProvider):
    """Records the moment of each userinfo request."""

    def __init__(self, clock: FakeClock, lifetime: int = 3600) -> None:
        super().__init__(lifetime)
        self.clock = clock
        self.asked_at: list[float] = []

    async def userinfo(self, access_token: str, dpop: DpopKey | None = None) -> dict[str, object]:
        self.asked_at.append(self.clock())
        return await super().userinfo(access_token, dpop)


def test_at_the_default_60_s_a_session_costs_one_request_a_minute_and_each_comes_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next check must start early enough to have its answer within 60 s of the last.

    Every random draw at its latest: before, a check then came 60 s after the last, and
    its answer after the bound.
    """
    monkeypatch.setattr(schedule.random, "uniform", lambda low, high: high)

    async def run() -> None:
        clock = FakeClock()
        provider = TimedProvider(clock)
        session, _ = await signed_in(clock, provider, revalidate_seconds=60)
        for _ in range(1200):  # twenty minutes, the keeper woken every second
            clock.now += 1
            await session.tend()
        gaps = [b - a for a, b in zip(provider.asked_at, provider.asked_at[1:], strict=False)]
        assert max(gaps) <= 60 - 1  # a second and twice the answer time (0 s here) of room
        assert 19 <= len(provider.asked_at) <= 22  # about one a minute
        assert provider.refreshes == []

    asyncio.run(run())


def test_a_renewal_counts_as_a_re_validation() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider(lifetime=20)
        tokens = TokenSet(
            "at-0", "Bearer", ("openid",), clock(), clock() + 20, refresh_token="rt-0"
        )
        session, _ = await signed_in(clock, provider, stored_account(clock, tokens))
        for _ in range(120):  # two minutes of 20 s tokens: a renewal every 12-15 s
            clock.now += 1
            await session.tend()
            await settle()
        assert len(provider.refreshes) >= 8
        assert provider.userinfo_calls <= 1  # only the restored session's first check

    asyncio.run(run())


def test_a_restored_session_is_confirmed_once_before_its_first_token_however_many_ask() -> None:
    """I2 across a gap (an idle exit, a restart): the first requests wait for one confirmation."""

    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        session, _ = await signed_in(clock, provider, revalidate_seconds=60)
        tokens = await asyncio.gather(*(session.tokens.get_token("", (), 0) for _ in range(50)))
        assert {token.access_token for token in tokens} == {"at-0"}
        assert provider.userinfo_calls == 1
        clock.now += 59  # within the interval: nothing owed
        await session.tokens.get_token("", (), 0)
        assert provider.userinfo_calls == 1
        assert provider.refreshes == []

    asyncio.run(run())


def test_a_session_revoked_while_the_daemon_was_away_is_refused_at_the_first_request() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        provider.revoked += ["at-0", "rt-0"]  # revoked at the provider before this start
        session, _ = await signed_in(clock, provider, revalidate_seconds=60)
        with pytest.raises(SignInRequired):
            await session.tokens.get_token("", (), 0)
        assert provider.userinfo_calls == 1
        assert provider.refreshes == ["rt-0"]  # the refresh decided, and was refused

    asyncio.run(run())


class SlowlyRejecting(ScriptedProvider):
    """Rejects the access token with an answer that arrives `late` seconds after it was asked."""

    def __init__(self, clock: FakeClock, late: float) -> None:
        super().__init__()
        self.clock, self.late = clock, late
        self.rejects_token = True

    async def userinfo(self, access_token: str, dpop: DpopKey | None = None) -> dict[str, object]:
        self.clock.now += self.late
        return await super().userinfo(access_token, dpop)


def test_a_token_rejected_once_it_expired_on_the_way_ends_the_session_as_expired() -> None:
    """No refresh token: the rejection of a token that died meanwhile is no revocation."""

    async def run() -> None:
        clock = FakeClock()
        provider = SlowlyRejecting(clock, late=30)  # asked 20 s before expiry, answered after
        tokens = TokenSet("at-0", "Bearer", ("openid",), clock(), clock() + 20)
        session, events = await signed_in(clock, provider, stored_account(clock, tokens))
        with pytest.raises(SignInRequired):
            await session.tokens.get_token("", (), 0)
        await session.tend()
        assert EventKind.REVOKED not in events.kinds()
        (ended,) = [event for event in events.seen if event.kind is EventKind.SIGNED_OUT]
        assert "the access token expired" in ended.detail

    asyncio.run(run())


class BrokenHere(ScriptedProvider):
    """A userinfo call that fails on this side (a bug), neither answered nor refused."""

    async def userinfo(self, access_token: str, dpop: DpopKey | None = None) -> dict[str, object]:
        self.userinfo_calls += 1
        raise RuntimeError("a bug in reading the answer")


def test_a_check_that_breaks_here_is_planned_again_not_asked_at_every_wake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The keeper logs the failure and wakes a second later: the next check is a minute on."""
    monkeypatch.setattr(schedule.random, "uniform", lambda low, high: low)  # the first at once

    async def run() -> None:
        clock, provider = FakeClock(), BrokenHere()
        session, events = await signed_in(clock, provider, revalidate_seconds=60)
        for _ in range(50):  # the keeper's wakes after a failure of its own, a second apart
            clock.now += 1
            with contextlib.suppress(RuntimeError):
                await session.tend()
        assert provider.userinfo_calls == 1
        assert EventKind.DEGRADED not in events.kinds()  # nothing was learned of the provider
        clock.now += 60
        with contextlib.suppress(RuntimeError):
            await session.tend()
        assert provider.userinfo_calls == 2

    asyncio.run(run())
