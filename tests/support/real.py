"""Skips for real parts a laptop may lack; CI forbids them (SIGNIN_BROKER_TEST_REQUIRE_REAL=1)."""

from __future__ import annotations

import os

import pytest

REQUIRE_REAL_ENV = "SIGNIN_BROKER_TEST_REQUIRE_REAL"


def unavailable(reason: str) -> None:
    """Skip the test, or fail it where CI promised the real part is installed."""
    if os.environ.get(REQUIRE_REAL_ENV) == "1":
        pytest.fail(f"{reason} (and {REQUIRE_REAL_ENV}=1 forbids skipping)")
    pytest.skip(reason)
