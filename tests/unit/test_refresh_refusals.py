"""A refused refresh backs off, and ends the session only when userinfo refuses too.

A provider has been seen to answer the refresh with a bare 400 after an admin revoked
the session (the daemon reads that as invalid_request), and its userinfo with 401.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from signin_broker.oidc.errors import OAuthError
from signin_broker.session import schedule
from signin_broker.session.errors import ProviderUnreachable, SignInRequired
from signin_broker.session.fresh_tokens import renewal
from signin_broker.states import EventKind, SignInState
from support.clocks import FakeClock
from support.refreshing import ACCOUNT, ScriptedProvider, settle, signed_in

BARE_400 = OAuthError("invalid_request", "", 400)


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "RENEWAL_WAIT_SECONDS", 0.01)


def test_a_refusal_with_userinfo_rejecting_the_token_ends_the_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        provider.failure, provider.rejects_token = BARE_400, True
        session, events = await signed_in(clock, provider)
        clock.now += 0.8 * 3600  # the keeper's renewal is due
        await session.tend()
        await settle()
        assert EventKind.REVOKED in events.kinds()
        assert (
            session.overview.status().state is SignInState.SIGNED_OUT
        )  # status agrees with GetToken
        with pytest.raises(SignInRequired):
            await session.tokens.get_token("", (), 0)
        assert provider.refreshes == ["rt-0"]

    with caplog.at_level(logging.WARNING, logger=renewal.__name__):
        asyncio.run(run())
    (ended,) = [r for r in caplog.records if r.getMessage() == "the provider ended the session"]
    assert ended.account == ACCOUNT  # type: ignore[attr-defined]
    assert ended.reason == (  # type: ignore[attr-defined]
        "the provider refused to renew the token (invalid_request, HTTP 400)"
        " and rejects the access token"
    )


def test_a_refusal_of_a_session_still_accepted_backs_off_like_an_outage() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        provider.failure = BARE_400  # userinfo still accepts the token
        session, events = await signed_in(clock, provider)
        clock.now += 0.8 * 3600
        for _ in range(600):  # ten minutes, the keeper woken every second
            clock.now += 1
            await session.tend()
            await settle()
            assert (await session.tokens.get_token("", (), 0)).access_token == "at-0"
            assert session.overview.status().state is SignInState.SIGNED_IN
        # 1, 2, 4 ... 60 s apart (with jitter), not once per wake-up: well under 20
        assert 5 <= len(provider.refreshes) <= 20, len(provider.refreshes)
        assert provider.userinfo_calls >= 5  # re-validated meanwhile, and accepted
        assert (
            "refused to renew the token (invalid_request, HTTP 400)"
            in session.overview.degraded_reason
        )
        assert EventKind.DEGRADED in events.kinds()
        assert EventKind.REVOKED not in events.kinds()
        clock.now += 3600  # expired, still refused: try again later, not "sign in"
        with pytest.raises(ProviderUnreachable):
            await session.tokens.get_token("", (), 0)
        assert session.overview.status().state is SignInState.SIGNED_IN

    asyncio.run(run())


def test_a_renewal_after_refusals_ends_the_backoff() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        provider.failure = BARE_400
        session, events = await signed_in(clock, provider)
        clock.now += 0.8 * 3600
        await session.tend()
        await settle()
        provider.failure = None
        for _ in range(5):
            clock.now += 2
            await session.tend()
            await settle()
        assert session._registry.get(ACCOUNT).tokens.access_token == "at-2"
        assert session.overview.degraded_reason == ""
        assert EventKind.RECOVERED in events.kinds()

    asyncio.run(run())
