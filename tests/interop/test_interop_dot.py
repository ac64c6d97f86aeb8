"""Interoperability with django-oauth-toolkit 3.4.1 (PyPI) on Django, started on loopback.

The daemon is told only the issuer (DOT's default, http://127.0.0.1:PORT/o) and the
client id; DOT keeps its defaults but for 20 s access tokens and reuse protection of
its rotating refresh tokens (see support/providers/dot_project/settings.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker_testing.daemon import short_temp_dir
from support.providers import checks, service_checks
from support.providers.dot import DjangoOAuthToolkit

ACCESS_TOKEN_TTL = 20


@pytest.fixture(scope="module")
def provider() -> Iterator[DjangoOAuthToolkit]:
    DjangoOAuthToolkit.check_installed()
    folder = short_temp_dir()
    with DjangoOAuthToolkit(folder, ACCESS_TOKEN_TTL) as running:
        yield running
    shutil.rmtree(folder, ignore_errors=True)


def test_sign_in_by_issuer_url_then_userinfo(
    provider: DjangoOAuthToolkit, socket_path: Path
) -> None:
    checks.sign_in_then_userinfo(provider, socket_path)


def test_fifty_callers_past_75_percent_refresh_once(
    provider: DjangoOAuthToolkit, socket_path: Path
) -> None:
    checks.fifty_callers_past_75_percent_refresh_once(provider, socket_path)


def test_restart_restores_the_session(provider: DjangoOAuthToolkit, socket_path: Path) -> None:
    checks.restart_restores_the_session(provider, socket_path)


def test_a_provider_stalled_mid_refresh_signs_no_one_out(
    provider: DjangoOAuthToolkit, socket_path: Path
) -> None:
    checks.a_stalled_refresh_is_awaited(provider, socket_path)


def test_a_revocation_at_the_provider_is_seen_within_60_s(
    provider: DjangoOAuthToolkit, socket_path: Path
) -> None:
    checks.revocation_is_seen_within_60_s(provider, socket_path)


def test_conformance_i_cases_pass_against_it(provider: DjangoOAuthToolkit, folder: Path) -> None:
    checks.conformance_i_cases_pass(type(provider), folder)


def test_a_service_account_with_a_secret_shares_one_grant_per_lifetime(
    provider: DjangoOAuthToolkit, folder: Path
) -> None:
    service_checks.two_apps_and_a_file_share_one_grant_per_lifetime(provider, folder)
