"""What the daemon accepts from a provider's device authorization answer (RFC 8628 3.2)."""

from __future__ import annotations

import pytest

from signin_broker.oidc.answers import DeviceAuthorization
from signin_broker.oidc.errors import ProviderUnavailable

GOOD = {
    "device_code": "d" * 40,
    "user_code": "WDJB-MJHT",
    "verification_uri": "https://id.example.com/device",
    "verification_uri_complete": "https://id.example.com/device?user_code=WDJB-MJHT",
    "expires_in": 600,
    "interval": 5,
}


def test_a_complete_answer_is_taken_and_the_device_code_never_shown() -> None:
    grant = DeviceAuthorization.from_json(GOOD)
    assert (grant.user_code, grant.interval, grant.expires_in) == ("WDJB-MJHT", 5, 600)
    assert "d" * 40 not in repr(grant)


def test_interval_defaults_to_five_seconds_and_is_at_least_one() -> None:
    without = {k: v for k, v in GOOD.items() if k != "interval"}
    assert DeviceAuthorization.from_json(without).interval == 5
    assert DeviceAuthorization.from_json({**GOOD, "interval": 0}).interval == 1


def test_a_verification_uri_complete_that_is_not_https_is_dropped() -> None:
    answer = {**GOOD, "verification_uri_complete": "http://evil.example/device"}
    assert DeviceAuthorization.from_json(answer).verification_uri_complete == ""


@pytest.mark.parametrize(
    "broken",
    [
        {**GOOD, "verification_uri": "http://id.example.com/device"},  # plain http, not loopback
        {**GOOD, "user_code": ""},
        {k: v for k, v in GOOD.items() if k != "device_code"},
        {**GOOD, "expires_in": "600"},
        {**GOOD, "expires_in": 0},
        ["not", "an", "object"],
    ],
)
def test_an_unusable_answer_is_the_provider_being_unavailable(broken: object) -> None:
    with pytest.raises(ProviderUnavailable):
        DeviceAuthorization.from_json(broken)
