"""Interoperability with panva's oidc-provider 9.13.3 (npm) under Node, started on loopback.

The daemon is told the issuer, the client id and `scopes = "offline_access"` (without
it the provider issues no refresh token, OIDC Core 11). The provider keeps its
defaults (public clients' refresh tokens rotate on every use) but for 20 s access
tokens, and it offers two acr values (urn:rig:pwd, urn:rig:mfa) for step-up; the
browser passes its development login and consent pages, whose login signs in at the
acr asked for (support/providers/oidc_provider/provider.mjs).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker_testing.daemon import short_temp_dir
from support.providers import checks, service_checks, step_up
from support.providers.node import NodeOidcProvider

pytestmark = pytest.mark.external  # Node

ACCESS_TOKEN_TTL = 20


@pytest.fixture(scope="module")
def provider() -> Iterator[NodeOidcProvider]:
    folder = short_temp_dir()
    with NodeOidcProvider(folder, ACCESS_TOKEN_TTL) as running:
        yield running
    shutil.rmtree(folder, ignore_errors=True)


def test_sign_in_by_issuer_url_then_userinfo(provider: NodeOidcProvider, socket_path: Path) -> None:
    checks.sign_in_then_userinfo(provider, socket_path)


def test_fifty_callers_past_75_percent_refresh_once(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    checks.fifty_callers_past_75_percent_refresh_once(provider, socket_path)


def test_restart_restores_the_session(provider: NodeOidcProvider, socket_path: Path) -> None:
    checks.restart_restores_the_session(provider, socket_path)


def test_a_provider_stalled_mid_refresh_signs_no_one_out(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    checks.a_stalled_refresh_is_awaited(provider, socket_path)


def test_a_revocation_at_the_provider_is_seen_within_60_s(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    checks.revocation_is_seen_within_60_s(provider, socket_path)


def test_conformance_i_cases_pass_against_it(provider: NodeOidcProvider, folder: Path) -> None:
    checks.conformance_i_cases_pass(type(provider), folder)


def test_a_step_up_to_a_stronger_acr_waits_for_one_sign_in(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    step_up.a_step_up_waits_for_a_sign_in_at_the_stronger_acr(
        provider, socket_path, *NodeOidcProvider.acr_values
    )


@pytest.mark.external
def test_an_acr_value_it_does_not_list_is_invalid_argument(
    provider: NodeOidcProvider, socket_path: Path
) -> None:
    """Only the acr values the provider lists (acr_values_supported) are asked for."""
    step_up.an_acr_value_it_does_not_list_is_refused(provider, socket_path)


def test_a_service_account_with_a_secret_shares_one_grant_per_lifetime(
    provider: NodeOidcProvider, folder: Path
) -> None:
    service_checks.two_apps_and_a_file_share_one_grant_per_lifetime(provider, folder)


def test_a_service_account_with_a_private_key_jwt_client(
    provider: NodeOidcProvider, folder: Path
) -> None:
    service_checks.two_apps_and_a_file_share_one_grant_per_lifetime(
        provider, folder, key=provider.kiosk_key
    )
