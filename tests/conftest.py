"""Fixtures shared by the whole suite: short temp folders and a running daemon."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker.locations import AUTOSTART_ENV
from signin_broker_testing import forks
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from signin_broker_testing.ledger import SecretLedger
from support.leaks import leaks

pytest_plugins = ["support.portability", "support.signin", "support.accounts"]

# A client that finds no daemon says so, as the tests expect, rather than starting one
# (autostart.py); the autostart tests turn it on for their own clients.
os.environ[AUTOSTART_ENV] = "0"


# xdist hands the modules out one at a time in this order, so the longest go first and the
# many short ones fill the workers' gaps at the end, instead of a long module starting
# last: by their seconds in the last full run (scripts/module_seconds.py writes them),
# then, for a module not yet timed, by folder, those that wait on real processes first.
MODULE_SECONDS = json.loads((Path(__file__).parent / "module_seconds.json").read_text())
FIRST_TO_LAST = ("interop", "browser", "integration", "conformance", "attacks", "unit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath

    def longest_first(item: pytest.Item) -> tuple[float, int]:
        seconds = MODULE_SECONDS.get(item.path.relative_to(root).as_posix(), 0.0)
        folder = item.path.parent.name
        rank = FIRST_TO_LAST.index(folder) if folder in FIRST_TO_LAST else len(FIRST_TO_LAST)
        return -seconds, rank

    items.sort(key=longest_first)  # stable: a module's tests keep their order


@pytest.fixture(scope="session", autouse=True)
def _no_secret_in_any_daemon_log() -> Iterator[None]:
    """No token, code or verifier a stub handed out is in any daemon's log (docs/contract.md §15).

    Daemons log at debug (see DaemonProcess); the check runs once the last test is done.
    """
    yield
    found = leaks(DaemonProcess.every, SecretLedger.secrets())
    assert not found, "secrets in daemon logs:\n" + "\n".join(map(str, found[:20]))


@pytest.fixture(autouse=True)
def _no_daemon_left_behind() -> Iterator[None]:
    """Stop the daemons a test started and did not stop (a failed assertion, say)."""
    before = len(DaemonProcess.started)  # a module's shared daemon is already in
    yield
    DaemonProcess.stop_started_since(before)


@pytest.fixture
def folder() -> Iterator[Path]:
    """A fresh private temp folder with a short path, removed afterwards."""
    path = short_temp_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def execd_daemons(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each daemon a fresh interpreter, not a fork (forks.py): for a test whose doctor reads
    the running daemon's command line and environment from /proc."""
    monkeypatch.setenv(forks.SWITCH, "0")


@pytest.fixture
def socket_path(folder: Path) -> Path:
    """Where a test daemon serves: a folder the daemon will create 0700."""
    return folder / "run" / "broker.sock"


@pytest.fixture
def daemon(socket_path: Path) -> Iterator[DaemonProcess]:
    """A running daemon with no identity provider configured."""
    with DaemonProcess(socket_path) as process:
        yield process


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[DaemonProcess]:
    """One daemon for a module's read-only tests, started once for them all."""
    path = short_temp_dir()
    with DaemonProcess(path / "run" / "broker.sock") as process:
        yield process
    shutil.rmtree(path, ignore_errors=True)
