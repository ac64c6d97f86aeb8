"""A device clock that is off, or that NTP steps, signs nobody out.

The daemon runs under libfaketime (Debian's faketime), its wall clock offset by what a
file says, read at every call, while CLOCK_BOOTTIME stays true (DONT_FAKE_MONOTONIC).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, NotSignedIn
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.clocks import faked_clock
from support.signin import sign_in
from support.waiting import eventually


@pytest.mark.parametrize("offset", ["-10m", "+10m"], ids=["ten-minutes-slow", "ten-minutes-fast"])
def test_a_clock_ten_minutes_off_signs_in_and_renews(
    socket_path: Path, tmp_path: Path, offset: str
) -> None:
    env = faked_clock(tmp_path / "clock", offset)
    with StubProvider(access_token_ttl=20) as stub:
        daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, env=env).start()
        with Browser() as browser:
            assert sign_in(browser, daemon).status_code == 303  # to the dashboard
        with BrokerClient(socket_path) as client:
            first = client.get_token()
            renewed = eventually(
                lambda: (
                    (t := client.get_token(refused=True)).access_token != first.access_token and t
                ),
                "a renewal",
            )
            info = stub.access_token_info(renewed.access_token)
            assert info is not None and info["active"]
        daemon.stop()


def test_a_clock_two_hours_off_is_refused_by_a_page_that_names_the_clock(
    socket_path: Path, tmp_path: Path
) -> None:
    env = faked_clock(tmp_path / "clock", "-2h")
    with StubProvider() as stub:
        daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, env=env).start()
        with Browser() as browser:
            page = sign_in(browser, daemon)
        assert page.status_code == 200
        assert "clock is 2.0 hours behind the identity provider" in page.text
        assert "timedatectl set-ntp true" in page.text
        with BrokerClient(socket_path) as client:  # and status says so, not only the page
            (main,) = client.status().providers
            assert main.clock_problem.startswith("this device's clock is 2.0 hours behind")
        (record,) = daemon.expect_log(msg="sign-in failed")
        assert record["error_code"] == "clock_skew"
        daemon.stop()


def test_a_clock_stepped_back_while_signed_in_serves_no_dead_token_and_sees_a_revocation(
    socket_path: Path, tmp_path: Path
) -> None:
    clock = tmp_path / "clock"
    env = faked_clock(clock, "+0")
    with StubProvider(access_token_ttl=12) as stub:
        daemon = DaemonProcess(
            socket_path, "--issuer", stub.issuer, "--revalidate-seconds", "2", env=env
        ).start()
        with Browser() as browser:
            sign_in(browser, daemon)
        clock.write_text("-10m\n")  # NTP corrects a fast clock by ten minutes
        with BrokerClient(socket_path) as client:
            first = client.get_token()
            seen = {first.access_token}
            deadline = time.monotonic() + 15  # past the first token's real expiry
            while time.monotonic() < deadline:
                token = client.get_token()
                info = stub.access_token_info(token.access_token)
                assert info is not None and info["active"], "a dead token was served"
                # Its expiry as this device's (stepped) clock says it, to the second or so.
                assert abs(token.expires_at_unix + 600 - float(info["expires_at"])) < 5
                seen.add(token.access_token)
                time.sleep(0.5)
            assert len(seen) >= 2  # renewed on time, not ten minutes late
            stub.revoke_user("1001")
            revoked_at = time.monotonic()
            eventually(lambda: _refused(client), "the revocation", timeout=60)
            assert time.monotonic() - revoked_at < 60
        daemon.stop()


def _refused(client: BrokerClient) -> bool:
    try:
        client.get_token()
    except NotSignedIn:
        return True
    return False
