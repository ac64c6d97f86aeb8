"""Contract T8 under contention and I2 (revocation within 60 s) against the real daemon and stub."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from signin_broker.client import AsyncBrokerClient, BrokerClient, EventKind, NotSignedIn
from signin_broker.daemon.settings import SettingsError, load
from signin_broker.session.schedule import REFRESH_AT_FRACTION, REFRESH_JITTER_FRACTION
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.events import watching
from support.signin import sign_in


def test_T8_200_concurrent_calls_that_need_a_renewal_share_exactly_one_refresh(
    stub: StubProvider, broker: DaemonProcess, browser: Browser
) -> None:
    stub.access_token_ttl = 60
    sign_in(browser, broker)
    stub.access_token_ttl = 3600
    with BrokerClient(broker.socket_path) as client:
        before = client.get_token()
    # Every call below needs a token lasting longer than the current one will: each
    # one wants a renewal, and the slow provider keeps them all waiting on the same one.
    stub.delay_token_response(1.0, after_processing=False)

    async def two_hundred() -> set[str]:
        async with AsyncBrokerClient(broker.socket_path, timeout=30) as client:
            tokens = await asyncio.gather(
                *(client.get_token(min_ttl_seconds=600) for _ in range(200))
            )
        return {token.access_token for token in tokens}

    served = asyncio.run(two_hundred())
    assert len(stub.token_requests("refresh_token")) == 1
    assert len(served) == 1 and before.access_token not in served  # all got the new token


def test_T8_the_background_renewal_happens_once_ahead_of_time(
    stub: StubProvider, socket_path: Path, browser: Browser
) -> None:
    stub.access_token_ttl = 8
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as broker:
        sign_in(browser, broker)
        (issued,) = stub.token_requests("authorization_code")
        with BrokerClient(socket_path) as client, watching(socket_path) as events:
            (account,) = client.accounts()
            # Planned at 75 %, less up to 15 % of jitter (the plan is in whole seconds).
            planned = (account.next_refresh_unix - issued.at) / 8
            earliest = REFRESH_AT_FRACTION - REFRESH_JITTER_FRACTION - 1 / 8
            assert earliest <= planned <= REFRESH_AT_FRACTION, planned
            events.wait_for(EventKind.REFRESHED, timeout=15)
            (refresh,) = stub.token_requests("refresh_token")
            # Not before the plan; how late a busy machine runs the timer is not asserted.
            assert refresh.at >= account.next_refresh_unix
            assert client.get_token().seconds_left() > 6  # the renewed token: nobody waited


def test_I2_an_admin_revoke_takes_effect_within_the_revalidation_interval(
    stub: StubProvider, socket_path: Path, browser: Browser
) -> None:
    with DaemonProcess(socket_path, "--issuer", stub.issuer, "--revalidate-seconds", "2") as broker:
        sign_in(browser, broker)
        with BrokerClient(socket_path) as client, watching(socket_path) as events:
            client.get_token()
            revoked_at = time.monotonic()
            stub.revoke_user("1001")
            event = events.wait_for(EventKind.REVOKED, timeout=60)
            took = time.monotonic() - revoked_at
            assert event.account == "user:1001"
            with pytest.raises(NotSignedIn) as caught:
                client.get_token()
            # Why: re-validation found the token rejected, or a renewal the grant ended.
            assert caught.value.message.startswith(
                "sign-in required: user:1001: the provider ended the session: it re"
            )
        # The interval is 2 s here: far sooner than the 60 s of the default, whatever the
        # load on the machine.
        assert took < 30
        assert browser.get(broker.web_url + "/dashboard").status_code == 302  # 302 to OAuth


@pytest.mark.parametrize("seconds", ["61", "120", "0"])
def test_I2_the_revalidation_interval_cannot_be_set_above_60(seconds: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="between 1 and 60"):
        load(["--revalidate-seconds", seconds], {"XDG_CONFIG_HOME": str(tmp_path)})
