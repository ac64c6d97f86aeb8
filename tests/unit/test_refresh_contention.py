"""Contract T8 on a fake clock: a crowd of callers at the renewal moment costs one refresh.

T8: an access token of 60 s with a refresh token, a request at 50 s; the provider gets
exactly one refresh_token grant, the new token is stored, the request is served without
a new sign-in. The end-to-end run against the stub provider is T8 in
tests/conformance/test_signin_web.py.
"""

from __future__ import annotations

import asyncio

import pytest

from signin_broker.session import schedule
from signin_broker.session.tokens import TokenSet
from support.clocks import FakeClock
from support.refreshing import ACCOUNT, ScriptedProvider, settle, signed_in, stored_account

CALLERS = 50


@pytest.fixture(autouse=True)
def _callers_wait_for_the_renewal(monkeypatch: pytest.MonkeyPatch) -> None:
    """However slow the machine, a caller with a good token waits for the renewal here."""
    monkeypatch.setattr(schedule, "RENEWAL_WAIT_SECONDS", 60.0)


@pytest.mark.parametrize("provider_answers", ["at-once", "after-all-asked"])
def test_fifty_callers_at_50_seconds_make_one_refresh_and_all_get_the_new_token(
    provider_answers: str,
) -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider(lifetime=60)
        tokens = TokenSet("at-0", "Bearer", ("openid",), clock(), clock() + 60, "rt-0")
        store = stored_account(clock, tokens)
        session, _ = await signed_in(clock, provider, store)
        clock.now += 50
        if provider_answers == "after-all-asked":
            provider.stall = asyncio.Event()
        async with asyncio.timeout(10):
            callers = [
                asyncio.create_task(session.tokens.get_token("", (), 0)) for _ in range(CALLERS)
            ]
            await settle()  # every caller has asked; a stalled refresh is still out
            assert provider.refreshes == ["rt-0"]
            if provider.stall is not None:
                assert not any(caller.done() for caller in callers)
                provider.stall.set()
            served = await asyncio.gather(*callers)
        assert provider.refreshes == ["rt-0"]  # exactly one grant at the provider
        assert {token.access_token for token in served} == {"at-1"}
        assert {token.account for token in served} == {ACCOUNT}
        stored = store.records[ACCOUNT]["tokens"]
        assert (stored["access_token"], stored["refresh_token"]) == ("at-1", "rt-1")
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-1"  # no more grants
        assert len(provider.refreshes) == 1

    asyncio.run(run())
