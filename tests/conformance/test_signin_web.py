"""The conformance cases on the web surface: the package's own (conformance/cases.py).

The same cases make the CI grid on every surface (scripts/conformance); here each runs
on the web surface on a stage of its own (a stub provider and a daemon), so a failure
shows in pytest with its traceback. Left to the grid: T8, whose request waits 50 s of
real time (tests/unit/test_refresh_contention.py checks it on a fake clock, and
tests/conformance/test_session_cases.py under 200 concurrent calls), and I1-I2, which
need a given provider (tests/integration/test_conformance_command.py runs them).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from signin_broker.oidc.code_flow import DeterministicSecrets
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location, query_of
from signin_broker_testing.conformance.cases import CASES, Case
from signin_broker_testing.conformance.catalog import BY_NAME
from signin_broker_testing.conformance.stage import Stage, Target
from signin_broker_testing.daemon import DaemonProcess
from support.signin import BEGIN, CALLBACK

IN_THE_GRID_ONLY = {"T8", "I1", "I2"}


@pytest.fixture
def stage() -> Iterator[Stage]:
    """What the grid gives each case: a stub provider and a daemon signed up to it."""
    stage = Stage(Target())
    yield stage
    stage.close()


@pytest.mark.parametrize(
    "case",
    [case for case in CASES.values() if case.id not in IN_THE_GRID_ONLY],
    ids=lambda case: case.id,
)
def test_the_contract_case_passes_on_the_web(case: Case, stage: Stage) -> None:
    case.run(stage, BY_NAME["web"])


@pytest.mark.parametrize("start", [BEGIN, "/user/login"])
def test_T1_the_sign_in_values_are_the_seeded_ones(
    broker: DaemonProcess,
    stub: StubProvider,
    browser: Browser,
    expected: DeterministicSecrets,
    start: str,
) -> None:
    """docs/contract.md §17: a test daemon's state, nonce and PKCE verifier are predictable."""
    response = browser.follow(browser.get(broker.web_url + start), until=stub.base_url)
    target = location(response)
    assert urlsplit(target).path == "/oauth/v2/authorize"
    assert "scope=openid+profile+email" in urlsplit(target).query  # joined by +
    query = query_of(target)
    assert query["redirect_uri"] == broker.web_url + CALLBACK
    assert query["state"] == expected.state()
    assert query["nonce"] == expected.nonce()
    assert query["code_challenge"] == create_s256_code_challenge(expected.code_verifier())
