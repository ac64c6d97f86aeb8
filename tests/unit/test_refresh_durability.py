"""A refresh token is spent only when its successor can be kept, and never twice once answered.

On a fake clock with a scripted provider and a store that can fail, as a full disk does
(tests/interop/test_interop_unsaved_renewals.py and test_interop_refresh_answers.py do
it with the real daemon, a tmpfs and oidc-provider):
- while the account's state cannot be written, nothing is sent, however close the
  expiry; past it, callers are told to ask again; once the state is saved, it renews;
- an unusable answer from a provider seen to rotate spent the token: it is never sent
  again, and the session ends once, at expiry, saying why;
- a token lives from when it was asked for: one whose answer came too late is renewed
  again at once.
"""

from __future__ import annotations

import asyncio
import errno

import pytest

from signin_broker.oidc.errors import AnswerUnusable
from signin_broker.session import schedule
from signin_broker.session.accounts.records import Account
from signin_broker.session.errors import ProviderUnreachable, SignInRequired, StorageWaits
from signin_broker.session.tokens import TokenSet
from signin_broker.states import EventKind, SignInState
from support.clocks import FakeClock
from support.refreshing import ACCOUNT, ScriptedProvider, settle, signed_in, stored_account

FULL = OSError(errno.ENOSPC, "No space left on device")
EXPIRES_AT = 1_000_000.0 + 3600  # the stored account's access token


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers with a good token wait 10 ms for a renewal, not 2 s."""
    monkeypatch.setattr(schedule, "RENEWAL_WAIT_SECONDS", 0.01)


def test_nothing_is_sent_while_the_state_cannot_be_written_and_it_renews_once_it_can() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        store = stored_account(clock)
        session, events = await signed_in(clock, provider, store)
        store.failure = FULL
        clock.now += 0.8 * 3600  # due for renewal
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-0"
        while clock.now < EXPIRES_AT + 30:  # past the last moment, and the expiry
            clock.now += 5
            await session.tend()
            await settle()
        assert provider.refreshes == []  # never spent: its successor could not be kept
        assert "renewals wait until they can" in session.overview.status().storage_problem
        assert session.overview.status().state is SignInState.SIGNED_IN
        with pytest.raises(StorageWaits, match="cannot be renewed while") as waits:
            await session.tokens.get_token("", (), 0)
        assert 1 <= waits.value.retry_after <= 5
        store.failure = None  # space again
        clock.now += 5
        await session.tend()
        await settle()
        assert provider.refreshes == ["rt-0"]
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-1"
        assert store.records[ACCOUNT]["tokens"]["refresh_token"] == "rt-1"
        assert EventKind.RECOVERED in events.kinds()

    asyncio.run(run())


def test_callers_meanwhile_do_not_each_try_to_write() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider()
        store = stored_account(clock)
        session, _ = await signed_in(clock, provider, store)
        store.failure = FULL
        clock.now = EXPIRES_AT + 1
        writes = 0
        real_save = store.save

        def counted(account_id: str, record: dict[str, object]) -> None:
            nonlocal writes
            writes += 1
            real_save(account_id, record)  # type: ignore[arg-type]

        store.save = counted  # type: ignore[method-assign]
        for _ in range(50):
            with pytest.raises(StorageWaits):
                await session.tokens.get_token("", (), 0)
        assert writes == 1  # the first caller's write-ahead; the rest wait for the retry

    asyncio.run(run())


def test_an_unusable_answer_from_a_provider_seen_to_rotate_is_never_answered_by_a_resend() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider(lifetime=600)
        store = stored_account(clock)
        session, events = await signed_in(clock, provider, store)
        clock.now += 0.8 * 3600
        await session.tokens.get_token("", (), 0)
        await settle()
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-1"  # it rotates
        provider.failure = AnswerUnusable("the token endpoint answered something that is not JSON")
        clock.now += 0.8 * 600
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-1"
        await settle()
        stored = Account.from_record(store.records[ACCOUNT]).tokens
        assert stored.refresh_token is None and "not JSON" in stored.refresh_lost
        info = session.overview.account(ACCOUNT)
        assert info is not None and "never sent twice" in info.at_risk
        expires = clock.now + 0.2 * 600
        while clock.now < expires + 30:  # up to the expiry and past it, tended as the daemon does
            assert session.overview.status().state is SignInState.SIGNED_IN or clock.now >= expires
            clock.now += 10
            await session.tend()
            await settle()
        assert provider.refreshes == ["rt-0", "rt-1"]  # the spent one was never sent again
        (ended,) = session.overview.status().ended
        assert "not JSON" in ended.reason and "sign in again" in ended.reason
        assert events.kinds().count(EventKind.SIGNED_OUT) == 1
        with pytest.raises(SignInRequired, match="not JSON"):
            await session.tokens.get_token("", (), 0)

    asyncio.run(run())


@pytest.mark.parametrize(
    ("confidential", "kept", "resent"),
    [
        (False, False, False),  # not yet known, a public client: taken as rotating
        (True, False, True),  # a confidential client: sent once more, to learn
        (False, True, True),  # the provider was seen to keep its refresh tokens
    ],
)
def test_an_unusable_first_answer_is_resent_only_where_rotation_is_ruled_out(
    confidential: bool, kept: bool, resent: bool
) -> None:
    """RFC 9700 4.14.2: a public client's refresh tokens may rotate, whoever the provider.

    A rotating provider that answered the session's first refresh with a broken 200 has
    spent the token: sending it again reads as theft there, and ends the grant.
    """

    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider(lifetime=600, rotates=not kept)
        provider.confidential = confidential
        tokens = TokenSet(
            "at-0", "Bearer", ("openid",), clock(), clock() + 600, refresh_token="rt-0",
            refresh_kept=kept,
        )  # fmt: skip
        session, _ = await signed_in(clock, provider, stored_account(clock, tokens))
        provider.failure = AnswerUnusable("the token endpoint answered something that is not JSON")
        clock.now += 0.8 * 600
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-0"
        await settle()
        provider.failure = None
        while clock.now < EXPIRES_AT - 3600 + 600 + 30:  # to the expiry and past it
            clock.now += 5
            await session.tend()
            await settle()
        assert provider.refreshes == (["rt-0", "rt-0"] if resent else ["rt-0"])

    asyncio.run(run())


def test_a_token_whose_answer_came_after_its_lifetime_is_renewed_again_at_once() -> None:
    async def run() -> None:
        clock, provider = FakeClock(), ScriptedProvider(lifetime=60)
        provider.stall = asyncio.Event()
        session, _ = await signed_in(clock, provider, stored_account(clock))
        clock.now = EXPIRES_AT + 1
        caller = asyncio.ensure_future(session.tokens.get_token("", (), 0))  # waits for the renewal
        await settle()
        clock.now += 100  # the answer trickles in for longer than its token lives
        provider.stall.set()
        with pytest.raises(ProviderUnreachable, match="longer to arrive than its token lives"):
            await caller  # at-1 died on the way: never handed out
        await session.tend()
        await settle()
        assert provider.refreshes == ["rt-0", "rt-1"]  # renewed at once, with the new token
        assert (await session.tokens.get_token("", (), 0)).access_token == "at-2"

    asyncio.run(run())
