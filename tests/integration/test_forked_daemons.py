"""A daemon forked from the fork server is what `python -m signin_broker.daemon.main` starts.

The suite forks its daemons (signin_broker_testing/forks.py) to spare each one the
interpreter's start and the imports. Each test here starts the same daemon both ways and
compares what can be seen from outside: its descriptors, folders, exit statuses and stderr.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.forks import SWITCH, ForkedProcess

BOTH_WAYS = pytest.mark.parametrize("forks", ["1", "0"], ids=["forked", "exec"])


def descriptors(daemon: DaemonProcess) -> list[tuple[int, str]]:
    """Each open descriptor and what it is, without inode numbers or the test's folder."""
    found = []
    for fd in sorted(os.listdir(f"/proc/{daemon.pid}/fd"), key=int):
        target = os.readlink(f"/proc/{daemon.pid}/fd/{fd}")
        target = re.sub(r":\[\d+\]", ":", target).replace(str(daemon.socket_path.parent), "~")
        found.append((int(fd), target))
    return found


def started(folder: Path, forks: str, monkeypatch: pytest.MonkeyPatch) -> DaemonProcess:
    monkeypatch.setenv(SWITCH, forks)
    folder.mkdir(mode=0o700)
    return DaemonProcess(folder / "broker.sock").start()


def test_a_forked_daemon_holds_the_descriptors_an_execd_one_does(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its standard streams, its own folders (from its environment) and nothing of the fork
    server's: no control socket, no pidfd of another daemon."""
    forked = started(folder / "forked", "1", monkeypatch)
    execd = started(folder / "exec", "0", monkeypatch)
    assert isinstance(forked.process, ForkedProcess)
    assert isinstance(execd.process, subprocess.Popen)
    seen = descriptors(forked)
    assert seen == descriptors(execd)
    assert (3, "~/.broker.sock.lock") in seen
    assert (16, "~/state/signin-broker/audit.sqlite3") in seen
    assert forked.stop() == execd.stop() == 0


@BOTH_WAYS
def test_a_wrong_setting_ends_with_status_2_and_says_why(
    forks: str, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SWITCH, forks)
    daemon = DaemonProcess(folder / "broker.sock", "--revalidate-seconds", "soon")
    assert daemon.start(wait=False).wait_exit() == 2
    assert daemon.output().startswith("signin-brokerd: ")
    assert "revalidate" in daemon.output()


@BOTH_WAYS
def test_a_killed_daemon_ends_by_its_signal(
    forks: str, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = started(folder / "daemon", forks, monkeypatch)
    daemon.kill()
    assert daemon.wait_exit() == -signal.SIGKILL


@pytest.mark.parametrize(
    "env",
    [{"PYTHONPATH": "/nowhere"}, {"LD_PRELOAD": "libc.so.6"}, {"PYTHONHASHSEED": "12345"}],
    ids=["PYTHONPATH", "LD_PRELOAD", "PYTHONHASHSEED"],
)
def test_a_variable_read_as_the_interpreter_starts_makes_it_exec(
    env: dict[str, str], folder: Path
) -> None:
    """A variable with a value of its own that the interpreter reads as it starts: a fresh
    interpreter, as before."""
    with DaemonProcess(folder / "broker.sock", env=env) as daemon:
        assert isinstance(daemon.process, subprocess.Popen)
        assert daemon.alive


@pytest.mark.usefixtures("execd_daemons")
def test_a_test_that_reads_the_daemons_proc_gets_a_fresh_interpreter(folder: Path) -> None:
    with DaemonProcess(folder / "broker.sock") as daemon:
        assert isinstance(daemon.process, subprocess.Popen)
        assert daemon.alive


@BOTH_WAYS
def test_a_keyring_backend_of_its_own_is_the_one_used(
    forks: str, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keyring reads PYTHON_KEYRING_BACKEND at its first use, in the daemon's main(): a
    fork carries it."""
    monkeypatch.setenv(SWITCH, forks)
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
    with DaemonProcess(folder / "broker.sock", env=env) as daemon:
        assert isinstance(daemon.process, ForkedProcess) is (forks == "1")
        ready = daemon.wait_for_log("sign-in page ready")
        assert ready["storage"].startswith("memory only: no usable keyring (keyring.backends.null)")
