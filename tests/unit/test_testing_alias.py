"""The old name of the test tooling, signin_broker.testing, is the new package itself."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.filterwarnings("ignore:signin_broker.testing is now:DeprecationWarning")
def test_old_names_are_the_new_modules_not_copies() -> None:
    import signin_broker_testing
    import signin_broker_testing.conformance.cases
    import signin_broker_testing.daemon
    from signin_broker.testing import StubProvider
    from signin_broker.testing.conformance import cases
    from signin_broker.testing.daemon import DaemonProcess

    assert DaemonProcess is signin_broker_testing.daemon.DaemonProcess
    assert StubProvider is signin_broker_testing.StubProvider
    assert cases is signin_broker_testing.conformance.cases
    assert sys.modules["signin_broker.testing.daemon"] is signin_broker_testing.daemon


def test_the_old_name_warns_that_it_goes() -> None:
    warned = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", "import signin_broker.testing"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert warned.returncode == 1
    assert "signin_broker.testing is now signin_broker_testing" in warned.stderr


def test_an_unknown_old_name_is_an_import_error_of_that_name() -> None:
    missing = subprocess.run(
        [sys.executable, "-c", "import signin_broker.testing.nothing_here"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "No module named 'signin_broker_testing.nothing_here'" in missing.stderr
