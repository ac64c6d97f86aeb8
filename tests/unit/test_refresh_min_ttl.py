"""A min_ttl_seconds the provider's tokens cannot meet is refused, never hammered."""

from __future__ import annotations

import asyncio

import pytest

from signin_broker.session.errors import TokenLifetimeTooShort
from signin_broker.session.tokens import TokenSet
from support.clocks import FakeClock
from support.refreshing import ScriptedProvider, signed_in, stored_account

API = "https://api.example/"


def sixty_second_session(clock: FakeClock) -> tuple[ScriptedProvider, TokenSet]:
    tokens = TokenSet("at-0", "Bearer", ("openid",), clock(), clock() + 60, refresh_token="rt-0")
    return ScriptedProvider(lifetime=60), tokens


@pytest.mark.parametrize("audience", ["", API], ids=["main", "down-scoped"])
def test_a_hundred_calls_past_the_lifetime_make_at_most_one_refresh(audience: str) -> None:
    async def run() -> None:
        clock = FakeClock()
        provider, tokens = sixty_second_session(clock)
        session, _ = await signed_in(clock, provider, stored_account(clock, tokens))
        for _ in range(100):
            clock.now += 0.3  # 30 s in all: the token is never due by the 75 % rule
            with pytest.raises(TokenLifetimeTooShort) as caught:
                await session.tokens.get_token("", (), 61, audience=audience)
            assert str(caught.value) == (
                "the provider issues tokens valid for 60 s; min_ttl_seconds 61 cannot be met"
            )
        assert len(provider.refreshes) <= 1

    asyncio.run(run())


def test_min_ttl_equal_to_the_lifetime_is_met_by_one_renewal_then_refused() -> None:
    """The README's example against 60 s tokens: one refresh, where it once made one per call."""

    async def run() -> None:
        clock = FakeClock()
        provider, tokens = sixty_second_session(clock)
        session, _ = await signed_in(clock, provider, stored_account(clock, tokens))
        clock.now += 1
        served = await session.tokens.get_token("", (), 60)  # fresh from the provider: 60 s
        assert served.access_token == "at-1"
        for _ in range(40):
            clock.now += 1
            with pytest.raises(TokenLifetimeTooShort):
                await session.tokens.get_token("", (), 60)
        assert provider.refreshes == ["rt-0"]
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-1"

    asyncio.run(run())


def test_a_min_ttl_within_the_lifetime_still_renews_when_the_token_falls_short() -> None:
    async def run() -> None:
        clock = FakeClock()
        provider = ScriptedProvider()
        session, _ = await signed_in(clock, provider)
        clock.now += 1801
        assert (await session.tokens.get_token("", (), 1800)).access_token == "at-1"
        clock.now += 1801  # the renewed token falls short again: renewed again
        assert (await session.tokens.get_token("", (), 1800)).access_token == "at-2"
        assert provider.refreshes == ["rt-0", "rt-1"]

    asyncio.run(run())


@pytest.mark.parametrize("audience", ["", API], ids=["main", "down-scoped"])
def test_min_ttl_just_under_the_lifetime_renews_once_a_quarter_lifetime_not_every_second(
    audience: str,
) -> None:
    """60 s tokens and min_ttl 59: one renewal a second before; now one per 15 s at most."""

    async def run() -> None:
        clock = FakeClock()
        provider, tokens = sixty_second_session(clock)
        session, _ = await signed_in(clock, provider, stored_account(clock, tokens))
        served, refused = 0, 0
        for _ in range(60):  # a minute of one call a second
            clock.now += 1
            try:
                await session.tokens.get_token("", (), 59, audience=audience)
                served += 1
            except TokenLifetimeTooShort as error:
                refused += 1
                assert "min_ttl_seconds 59 would renew them every few seconds" in str(error)
                assert "ask for at most 30 s" in str(error)
        assert len(provider.refreshes) <= 5  # 60 / 15 + the first
        assert served >= 4 and refused > 0

    asyncio.run(run())


def test_min_ttl_of_half_the_lifetime_is_served_as_often_as_it_is_asked() -> None:
    async def run() -> None:
        clock = FakeClock()
        provider, tokens = sixty_second_session(clock)
        session, _ = await signed_in(clock, provider, stored_account(clock, tokens))
        for _ in range(120):
            clock.now += 1
            assert (await session.tokens.get_token("", (), 30)).expires_at - clock.now >= 30
        assert len(provider.refreshes) <= 120 // 30 + 1  # one per 30 s, no more

    asyncio.run(run())


@pytest.mark.parametrize("audience", ["", API], ids=["main", "down-scoped"])
def test_a_refused_token_is_renewed_at_once_but_not_again_within_a_quarter(audience: str) -> None:
    """A server that refuses every token (401) makes at most one renewal per 15 s here."""

    async def run() -> None:
        clock = FakeClock()
        provider, tokens = sixty_second_session(clock)
        session, _ = await signed_in(clock, provider, stored_account(clock, tokens))

        async def refused() -> str:
            issued = await session.tokens.get_token("", (), 0, audience=audience, refused=True)
            return issued.access_token

        assert await refused() == "at-1"  # brand new (or not yet held), refused: renewed
        for _ in range(100):  # refused again and again, 0.1 s apart: 10 s in all
            clock.now += 0.1
            assert await refused() == "at-1"
        clock.now += 5.1  # past a quarter of the lifetime since the renewal
        assert await refused() == "at-2"
        assert provider.refreshes == ["rt-0", "rt-1"]

    asyncio.run(run())
