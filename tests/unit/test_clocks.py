"""Wrong clocks: the session clock never goes back and takes the larger of the boot and
wall clocks' steps; stored state is aged the same way; id_tokens allow 15 minutes of skew,
and beyond that the refusal names this device's clock and says how to fix it; DPoP proofs
take the provider's time."""

from __future__ import annotations

import base64
import json
import time

import pytest

from signin_broker.oidc.dpop import DpopKey
from signin_broker.oidc.errors import ClockSkewed, IdTokenInvalid
from signin_broker.oidc.provider_clock import ProviderClock
from signin_broker.session.clock import Moment, SteadyClock, since_stored, to_wall
from support.fake_provider import FakeProvider, run

ISSUER = "https://id.example.com"


class Moving:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_steady_clock_ignores_wall_clock_steps_and_says_how_far_it_stepped() -> None:
    wall, steady = Moving(1_000_000.0), Moving(50.0)
    clock = SteadyClock(wall, steady)
    wall.now -= 600  # NTP steps a fast clock back by ten minutes
    steady.now += 30
    assert clock() == 1_000_030.0  # thirty seconds passed, whatever the wall clock says
    assert clock.wall_step() == -630.0
    assert to_wall(clock, 1_000_090.0) == 1_000_090.0 - 630  # an expiry, as apps read it
    assert to_wall(time.time, 123.0) == 123.0  # a plain clock is its own wall clock


def test_a_wall_clock_jump_forward_is_taken_as_a_paused_vm_would_need() -> None:
    """The guest's boot clock stood still for 2 h; the world's clocks (and tokens) did not."""
    wall, steady = Moving(1_000_000.0), Moving(50.0)
    clock = SteadyClock(wall, steady)
    wall.now += 7200
    assert clock() == 1_007_200.0  # the larger of the two: 2 hours passed
    wall.now -= 600  # then NTP steps it back: ignored
    steady.now += 10
    assert clock() == 1_007_210.0
    wall.now += 610  # forward again: taken, on the safe side (tokens look older, not younger)
    steady.now += 10
    assert clock() == 1_007_820.0 and clock.wall_step() == -610.0


def test_a_stored_moment_is_aged_by_the_larger_of_the_boot_and_wall_clocks() -> None:
    wall, steady = Moving(1_000_000.0), Moving(50.0)
    clock = SteadyClock(wall, steady, boot=lambda: "boot-1")
    saved = Moment.from_record(clock.moment().to_record())
    assert saved == Moment(1_000_000.0, "boot-1", 50.0)
    wall.now -= 600  # the wall clock went back while the daemon was stopped
    steady.now += 30
    restarted = SteadyClock(wall, steady, boot=lambda: "boot-1")
    assert restarted.age(saved) == 30.0  # the boot clock's word, not the wall clock's -570
    # Stored wall-clock times become the new clock's: 30 s older, not 570 s younger.
    assert since_stored(restarted, saved) == restarted() - 30 - saved.wall
    rebooted = SteadyClock(wall, Moving(5.0), boot=lambda: "boot-2")
    assert rebooted.age(saved) == 0.0  # another boot: the wall clock alone, never negative
    wall.now += 7200
    assert rebooted.age(saved) == 7200.0 - 600
    assert since_stored(restarted, None) == -to_wall(restarted, 0.0)  # a state without one


def validate(offset: float | None = None, **claims: float) -> object:
    """The claims, or the refusal; `offset`: the provider's clock as its Date header told."""
    idp = FakeProvider(ISSUER)
    provider, _ = idp.provider()
    if offset is not None:
        provider._provider_clock.heard(http_date(time.time() + offset))
    try:
        return run(provider.validate_id_token(idp.id_token(**claims), None))
    except IdTokenInvalid as error:
        return error


@pytest.mark.parametrize("off_minutes", [-10, 10], ids=["device-slow", "device-fast"])
def test_a_clock_ten_minutes_off_still_signs_in(off_minutes: int) -> None:
    provider_now = time.time() - off_minutes * 60  # the provider's clock
    claims = validate(iat=provider_now, exp=provider_now + 300)
    assert isinstance(claims, dict) and claims["sub"] == "1001"


@pytest.mark.parametrize(("off_hours", "says"), [(-2, "behind"), (2, "ahead of")])
def test_a_clock_hours_off_is_refused_naming_the_clock(off_hours: int, says: str) -> None:
    provider_now = time.time() - off_hours * 3600
    refused = validate(iat=provider_now, exp=provider_now + 300)
    assert isinstance(refused, ClockSkewed)
    assert f"this device's clock is 2.0 hours {says} the identity provider's" in str(refused)
    assert "timedatectl set-ntp true" in str(refused)


def test_an_old_id_token_with_a_right_clock_is_just_expired() -> None:
    refused = validate(offset=0.5, iat=time.time() - 7200, exp=time.time() - 3600)
    assert isinstance(refused, IdTokenInvalid) and not isinstance(refused, ClockSkewed)


def test_the_providers_date_header_measures_its_clock() -> None:
    idp = FakeProvider(ISSUER)
    provider, _ = idp.provider()
    two_hours_ahead = http_date(time.time() + 7200)
    provider._provider_clock.heard(two_hours_ahead)
    assert provider.clock_offset is not None and 7190 < provider.clock_offset < 7210
    provider._provider_clock.heard("not a date")
    assert 7190 < provider.clock_offset < 7210
    assert provider.clock_problem.startswith(
        "this device's clock is 2.0 hours behind the identity provider's (by its Date header)"
    )
    provider._provider_clock.heard(http_date(time.time()))
    assert provider.clock_problem == ""  # within a minute: nothing to say


def test_a_dpop_proof_takes_its_iat_from_the_providers_clock() -> None:
    """A device ten minutes slow: the provider's Date header sets each proof's iat."""
    idp = FakeProvider(ISSUER)
    idp.documents[idp.base + "/token"] = {
        "access_token": "at-1", "token_type": "DPoP", "expires_in": 60, "refresh_token": "rt-1",
    }  # fmt: skip
    provider, _ = idp.provider()
    provider._provider_clock.heard(http_date(time.time() + 600))
    run(provider.refresh("rt-0", dpop=DpopKey.generate("ES256")))
    proof = idp.sent[-1].headers["DPoP"]
    iat = json.loads(base64.urlsafe_b64decode(proof.split(".")[1] + "=="))["iat"]
    assert abs(iat - (time.time() + 600)) < 5


def test_the_providers_clock_is_carried_forward_across_a_step_back_and_a_pause() -> None:
    """NTP stepping the wall clock back leaves proofs' iat right; so does a VM's pause."""
    wall, boot = Moving(1_800_000_000.0), Moving(100.0)
    clock = ProviderClock(wall, boot)
    assert clock.now() == wall.now and clock.offset is None  # before any answer
    clock.heard(http_date(wall.now + 600))  # a device ten minutes slow
    wall.now += 30 - 600  # 30 s later, NTP steps it back ten minutes more
    boot.now += 30
    assert clock.now() == 1_800_000_000.0 + 600 + 30
    assert clock.offset == 1200  # as far off as the device now is
    wall.now += 7200  # a pause of two hours: the boot clock stood still, the wall clock synced
    assert clock.now() == 1_800_000_000.0 + 600 + 7200 - 570
    clock.heard("not a date")
    assert clock.now() == 1_800_000_000.0 + 600 + 7200 - 570


def http_date(unix: float) -> str:
    """A Date header's value."""
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(unix))
