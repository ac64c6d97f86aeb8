"""A work and a personal identity at once, each at its own provider.

Two (or three) stub providers run on loopback; the daemon is configured with a main
provider and `[providers.<alias>]` tables, and each account lives, renews, restores,
signs out and is revoked at its own provider only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from signin_broker.client import BrokerClient, BrokerError, EventKind
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.models import DEFAULT_CLIENT, StubClient
from support.events import watching
from support.signin import CALLBACK, sign_in

WORK_CLIENT = StubClient(client_id="work-app", redirect_uris=DEFAULT_CLIENT.redirect_uris)
TV_CLIENT = StubClient(client_id="work-tv", redirect_uris=())


@pytest.fixture
def personal() -> Iterator[StubProvider]:
    with StubProvider(access_token_ttl=60) as provider:
        yield provider


@pytest.fixture
def work() -> Iterator[StubProvider]:
    with StubProvider(
        clients=[WORK_CLIENT, TV_CLIENT], access_token_ttl=60, device_interval=1
    ) as provider:
        yield provider


def config(folder: Path, personal: StubProvider, work: StubProvider, *extra: str) -> Path:
    path = folder.parent / "several.toml"
    path.write_text(
        "\n".join(
            [
                f'issuer = "{personal.issuer}"',
                *extra,
                "[providers.work]",
                f'issuer = "{work.issuer}"',
                'client_id = "work-app"',
                'device_client_id = "work-tv"',
            ]
        )
        + "\n"
    )
    return path


@pytest.fixture
def daemon(
    personal: StubProvider, work: StubProvider, socket_path: Path
) -> Iterator[DaemonProcess]:
    conf = config(socket_path.parent, personal, work, 'default_provider = "work"')
    with DaemonProcess(socket_path, "--config", str(conf), "--key-store", "file") as daemon:
        yield daemon


def userinfo_status(provider: StubProvider, token: str) -> int:
    """The HTTP status `provider`'s userinfo answers the token with: 200 only if it issued it."""
    response = httpx2.get(
        provider.base_url + provider.paths.userinfo, headers={"authorization": f"Bearer {token}"}
    )
    return response.status_code


def test_one_person_signed_in_at_two_providers_holds_two_accounts_each_served_by_its_own(
    personal: StubProvider, work: StubProvider, daemon: DaemonProcess
) -> None:
    with Browser() as browser:
        sign_in(browser, daemon)  # the default provider: work
        sign_in(browser, daemon, "/user/login?provider=main")
    with BrokerClient(daemon.socket_path) as client:
        status = client.status()
        assert [(p.alias, p.issuer, p.is_default) for p in status.providers] == [
            ("work", work.issuer, True),
            ("", personal.issuer, False),
        ]
        assert status.issuer == work.issuer  # the default one's
        ids = sorted((a.id, a.provider) for a in client.accounts())
        assert ids == [("user:1001", ""), ("work/user:1001", "work")]  # same sub, two people
        at_work = client.get_token("work/user:1001")
        at_home = client.get_token("user:1001")
    assert at_work.access_token != at_home.access_token
    assert userinfo_status(work, at_work.access_token) == 200
    assert userinfo_status(personal, at_work.access_token) == 401  # not a token of this one
    assert userinfo_status(personal, at_home.access_token) == 200
    exchanges = work.token_requests("authorization_code")
    assert [r.params.get("client_id") for r in exchanges] == ["work-app"]
    assert len(personal.token_requests("authorization_code")) == 1


def test_each_account_renews_revokes_and_comes_back_at_its_own_provider(
    personal: StubProvider, work: StubProvider, daemon: DaemonProcess
) -> None:
    with Browser() as browser:
        sign_in(browser, daemon)
        sign_in(browser, daemon, "/user/login?provider=main")
    with BrokerClient(daemon.socket_path) as client:
        client.get_token("work/user:1001", min_ttl_seconds=60)  # a renewal now
        assert len(work.token_requests("refresh_token")) == 1
        assert personal.token_requests("refresh_token") == []
    daemon.stop()
    with (
        DaemonProcess(daemon.socket_path, *daemon.args[7:], env=daemon.env),
        BrokerClient(daemon.socket_path) as client,
    ):
        assert sorted(a.id for a in client.accounts()) == ["user:1001", "work/user:1001"]
        personal.clear_requests()
        result = client.sign_out("work/user:1001")
        assert result.was_signed_in
        assert [a.id for a in client.accounts()] == ["user:1001"]
        home = client.get_token("user:1001")
    assert any(r.path.endswith("/revoke") for r in work.requests)
    assert not any(r.path.endswith("/revoke") for r in personal.requests)
    assert userinfo_status(personal, home.access_token) == 200


def test_a_provider_that_does_not_answer_degrades_only_its_own_accounts(
    personal: StubProvider, work: StubProvider, daemon: DaemonProcess
) -> None:
    with Browser() as browser:
        sign_in(browser, daemon)
        sign_in(browser, daemon, "/user/login?provider=main")
    work.stop()
    with BrokerClient(daemon.socket_path) as client:
        with pytest.raises(BrokerError, match="UNAVAILABLE"):
            client.get_token("work/user:1001", min_ttl_seconds=60)  # a renewal that fails
        client.get_token("user:1001", min_ttl_seconds=60)  # and one that works
        status = client.status()
    states = {p.alias: p.degraded_reason for p in status.providers}
    assert states["work"] and not states[""]
    assert status.degraded_reason.startswith("work: ")
    assert personal.token_requests("refresh_token")


def test_a_device_sign_in_uses_the_second_client_and_so_do_its_renewals(
    work: StubProvider, daemon: DaemonProcess
) -> None:
    with watching(daemon.socket_path) as events, BrokerClient(daemon.socket_path) as client:
        started = client.begin_sign_in(device=True, provider="work")
        work.approve_device(started.user_code)
        signed_in = events.wait_for(EventKind.SIGNED_IN, timeout=15)
        assert signed_in.account == "work/user:1001"
        client.get_token("work/user:1001", min_ttl_seconds=60)
    device_grants = work.token_requests("urn:ietf:params:oauth:grant-type:device_code")
    assert {r.params.get("client_id") for r in device_grants} == {"work-tv"}
    refreshes = work.token_requests("refresh_token")
    assert [r.params.get("client_id") for r in refreshes] == ["work-tv"]


def test_signing_in_again_goes_to_the_accounts_own_provider(
    personal: StubProvider, work: StubProvider, daemon: DaemonProcess
) -> None:
    with Browser() as browser:
        sign_in(browser, daemon, "/user/login?provider=main")
    with BrokerClient(daemon.socket_path) as client:
        again = client.begin_sign_in(account="user:1001", device=True)
        assert again.verification_uri.startswith(personal.base_url)
        with pytest.raises(BrokerError, match="not an account of provider work"):
            client.begin_sign_in(account="user:1001", provider="work")


def test_an_unknown_provider_is_refused_and_named(daemon: DaemonProcess) -> None:
    with BrokerClient(daemon.socket_path) as client:
        with pytest.raises(BrokerError, match="no identity provider is called 'home'") as error:
            client.begin_sign_in(provider="home")
        assert error.value.code.name == "FAILED_PRECONDITION"
        assert "configured: work, main" in str(error.value)
        with pytest.raises(BrokerError, match="is not a provider alias") as error:
            client.begin_sign_in(provider="Work/../x")
        assert error.value.code.name == "INVALID_ARGUMENT"
    page = httpx2.get(daemon.web_url + "/auth/oauth2/id-provider?provider=home")
    assert page.status_code == 404
    page = httpx2.get(daemon.web_url + "/auth/oauth2/id-provider?provider=Work%2F..%2Fx")
    assert page.status_code == 400
    assert daemon.alive


def test_the_landing_page_offers_each_provider_default_first(
    personal: StubProvider, work: StubProvider, daemon: DaemonProcess
) -> None:
    page = httpx2.get(daemon.web_url + "/").text
    work_at, main_at = page.index('data-provider="work"'), page.index('data-provider=""')
    assert work_at < main_at
    assert urlsplit(work.issuer).netloc in page and urlsplit(personal.issuer).netloc in page


def test_a_code_from_one_provider_is_never_redeemed_at_another(
    personal: StubProvider, work: StubProvider, daemon: DaemonProcess
) -> None:
    """Mix-up (RFC 9700 4.4): the state names the provider, and only it redeems the code."""
    with Browser() as browser:
        to_work = browser.get(daemon.web_url + "/auth/oauth2/id-provider?provider=work")
        state = parse_qs(urlsplit(location(to_work)).query)["state"][0]
        at_home = browser.follow(
            browser.get(daemon.web_url + "/auth/oauth2/id-provider?provider=main"),
            until=daemon.web_url + CALLBACK,
        )
        home_code = parse_qs(urlsplit(location(at_home)).query)["code"][0]
        answer = browser.get(f"{daemon.web_url}{CALLBACK}?state={state}&code={home_code}")
    assert "invalid_code" in answer.text
    assert personal.token_requests("authorization_code") == []  # never sent where it came from
    with BrokerClient(daemon.socket_path) as client:
        assert client.accounts() == []


def test_accounts_of_a_provider_taken_out_of_the_config_wait_until_it_is_back(
    personal: StubProvider, work: StubProvider, socket_path: Path
) -> None:
    conf = config(socket_path.parent, personal, work)
    args = ("--config", str(conf), "--key-store", "file")
    with DaemonProcess(socket_path, *args) as daemon, Browser() as browser:
        sign_in(browser, daemon, "/user/login?provider=work")
    conf.write_text(f'issuer = "{personal.issuer}"\n')
    with DaemonProcess(socket_path, *args) as daemon, BrokerClient(socket_path) as client:
        assert client.accounts() == []
        assert "not configured" in "\n".join(daemon.lines)
    config(socket_path.parent, personal, work)
    with DaemonProcess(socket_path, *args) as daemon, BrokerClient(socket_path) as client:
        deadline = time.monotonic() + 5
        while not client.accounts() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [a.id for a in client.accounts()] == ["work/user:1001"]
