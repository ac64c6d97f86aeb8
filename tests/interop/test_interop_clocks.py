"""Clocks that disagree, against panva's oidc-provider under Node.

- A VM paused for two hours: the guest's wall clock and the provider's jump 2 h forward
  on resume, while CLOCK_BOOTTIME does not (the guest never ran; libfaketime fakes the
  wall clocks of both processes and leaves BOOTTIME true). The tokens died meanwhile. A
  token's age is the larger of what the two clocks say, so the first call after the jump
  renews, and no dead token is served.
- DPoP with the device's clock ten minutes off, or stepped back ten minutes once signed
  in, at a provider that gives no nonces (a proof's iat alone must fall within its
  window) and a client that must use DPoP (dpop_bound_access_tokens): each proof's iat
  is the provider's time, by its Date header carried forward as the boot and wall
  clocks say, so the sign-in and ten renewals work, and so do the apps' proofs.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from signin_broker.client import BrokerClient, Token
from signin_broker.session.schedule import REFUSED_RENEWAL_FRACTION
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support.clocks import faked_clock
from support.providers import sign_in
from support.providers.checks import signed_in_daemon, userinfo_status
from support.providers.node import DPOP_CLIENT_ID, NodeOidcProvider

pytestmark = pytest.mark.external  # Node

PAUSED_TTL = 300  # no renewal falls due before the pause
DPOP_TTL = 4
RENEWALS = 10
RENEWALS_WITHIN_SECONDS = 30


@pytest.fixture
def provider_folder() -> Iterator[Path]:
    folder = short_temp_dir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_after_a_vm_pause_of_two_hours_the_first_call_renews_and_no_dead_token_is_served(
    provider_folder: Path, socket_path: Path, tmp_path: Path
) -> None:
    clock = tmp_path / "clock"
    faked = faked_clock(clock, "+0")  # the guest's wall clock, for the provider and the daemon
    with NodeOidcProvider(provider_folder, PAUSED_TTL, env=faked) as provider:
        daemon = signed_in_daemon(provider, socket_path, env=faked)
        with BrokerClient(socket_path, timeout=20) as client:
            before = client.get_token()
            assert userinfo_status(provider, before) == 200
            mark = len(provider.refresh_statuses())
            clock.write_text("+2h\n")  # resumed: the world's clocks moved on 2 hours
            after = [client.get_token() for _ in range(20)]
        dead = [token for token in after if userinfo_status(provider, token) != 200]
        assert dead == []
        assert after[0].access_token != before.access_token  # the first call renewed
        assert len({token.access_token for token in after}) == 1  # and only it
        assert provider.refresh_statuses()[mark:] == [200]
        daemon.stop()


def proof_accepted(provider: NodeOidcProvider, client: BrokerClient) -> Token:
    """An app's DPoP proof, signed by the daemon, is accepted at the provider's userinfo."""
    url = str(provider.discovery()["userinfo_endpoint"])
    proof = client.sign_dpop_proof("GET", url)
    answer = httpx2.get(url, headers=proof.headers, timeout=10)
    assert answer.status_code == 200, answer.headers.get("www-authenticate")
    return client.get_token()


@pytest.mark.parametrize(
    ("offset", "stepped_to"),
    [("-10m", ""), ("+10m", ""), ("+0", "-10m")],
    ids=["ten-minutes-slow", "ten-minutes-fast", "stepped-back-ten-minutes"],
)
def test_dpop_signs_in_and_renews_ten_times_with_the_device_clock_off_or_stepped(
    provider_folder: Path, socket_path: Path, tmp_path: Path, offset: str, stepped_to: str
) -> None:
    """Stepped back once signed in, the next proofs carry the provider's time all the same.

    A proof's iat from the provider's last Date plus the wall clock's time since would
    be ten minutes old to it: the renewal refused (invalid_dpop_proof) until an answer
    came, and apps' proofs refused.
    """
    clock = tmp_path / "clock"
    with NodeOidcProvider(provider_folder, DPOP_TTL, dpop_nonces=False) as provider:
        args = ("--issuer", provider.issuer, "--client-id", DPOP_CLIENT_ID)
        daemon = DaemonProcess(
            socket_path, *args, "--scopes", "offline_access", "--dpop", "require",
            env=faked_clock(clock, offset),
        ).start()  # fmt: skip
        with Browser() as browser:
            landed = sign_in(browser, daemon, provider)
        assert landed.status_code == 303 and location(landed) == "/dashboard", landed.text
        if stepped_to:
            clock.write_text(stepped_to + "\n")  # NTP corrects the clock, the daemon running
        seen: set[str] = set()
        deadline = time.monotonic() + RENEWALS_WITHIN_SECONDS
        with BrokerClient(socket_path) as client:
            while len(seen) <= RENEWALS:  # the first token, and ten renewed
                assert time.monotonic() < deadline, provider.token_requests("refresh_token")[-3:]
                token = client.get_token(refused=True)  # renewed once allowed for a refusal
                assert token.token_type == "DPoP"
                seen.add(token.access_token)
                proof_accepted(provider, client)
                time.sleep(DPOP_TTL * REFUSED_RENEWAL_FRACTION)
        assert set(provider.refresh_statuses()) == {200}  # no proof refused
        daemon.stop()
