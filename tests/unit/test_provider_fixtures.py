"""A provider fixture tells the daemon only what a user must tell it for that provider.

The issuer, the client id, and what tests/support/providers.MUST_SET lists (scopes a
refresh token needs, a device client, a secret): never one of the broker's own
defaults switched off to make an everyday flow pass, which would hide a bug in the
default (the everyday grid, tests/interop/test_everyday_grid.py, checks its daemons
with the same function as they start).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.providers import MUST_SET, RealProvider, beyond_what_a_user_must_set
from support.providers.dot import DjangoOAuthToolkit
from support.providers.node import NodeOidcProvider

FIXTURES = [NodeOidcProvider, DjangoOAuthToolkit]


def test_every_real_provider_fixture_is_checked() -> None:
    assert set(RealProvider.__subclasses__()) == set(FIXTURES)


@pytest.mark.parametrize("kind", FIXTURES, ids=lambda kind: kind.name)
def test_a_provider_fixture_sets_only_what_a_user_must(kind: type[RealProvider]) -> None:
    provider = kind(Path("/nonexistent"), access_token_ttl=60)  # not started: its settings
    provider.issuer = "https://id.example"
    assert beyond_what_a_user_must_set(provider.daemon_args()) == []
    assert set(provider.daemon_env()) <= {f"SIGNIN_BROKER_{name.upper()}" for name in MUST_SET}


def test_the_check_sees_a_default_switched_off_and_scopes_beyond_a_refresh_token() -> None:
    assert beyond_what_a_user_must_set(["--issuer", "https://id.example", "--client-id", "x"]) == []
    assert beyond_what_a_user_must_set(["--scopes", "offline_access"]) == []
    assert beyond_what_a_user_must_set(["--dpop", "off", "--scopes", "offline_access api"]) == [
        "--dpop off",
        "--scopes offline_access api",
    ]
    assert beyond_what_a_user_must_set(["--revalidate-seconds", "5"]) == ["--revalidate-seconds 5"]
