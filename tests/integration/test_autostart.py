"""Started on demand without a service manager: the CLI, the bridges and the SDK start it once.

As gpg's tools start gpg-agent (autostart.py): many callers at once start one daemon,
which exits when idle and is started again by the next caller; never where a service
manager is to own the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from signin_broker.autostart import LOG_NAME, UNIT, serves
from signin_broker.client import AsyncBrokerClient, BrokerClient, DaemonNotRunning
from signin_broker.daemon.idle_exit import TEST_SECONDS_ENV
from signin_broker.locations import AUTOSTART_ENV
from signin_broker_testing import StubProvider
from support.commands import BIN

CALLERS = 20
READY = '"msg":"ready"'


def _environment(folder: Path, **more: str) -> dict[str, str]:
    """A user with no service manager: settings in variables, folders of the test's own."""
    return {
        **os.environ,
        AUTOSTART_ENV: "1",
        "XDG_RUNTIME_DIR": str(folder),
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_CONFIG_DIRS": str(folder / "system-config"),
        "XDG_STATE_HOME": str(folder / "state"),
        "XDG_DATA_HOME": str(folder / "data"),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "SIGNIN_BROKER_HTTP": "127.0.0.1:0",
        **more,
    }


def _cli(socket_path: Path, env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "signin-broker"), "--socket", str(socket_path), *command],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _stop_any(socket_path: Path) -> None:
    """End the daemon the callers started, by the pid in its instance lock file."""
    lock = socket_path.parent / f".{socket_path.name}.lock"
    owner = lock.read_text().strip() if lock.exists() else ""
    if owner.isdigit():
        try:
            os.kill(int(owner), signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.kill(int(owner), 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def test_twenty_concurrent_cli_calls_with_nothing_serving_start_exactly_one_daemon(
    stub: StubProvider, folder: Path
) -> None:
    """The token command (JSON path) and status (the SDK) at once; the daemon, idle, exits
    and takes its socket with it, and the next call starts it again.

    The test watches the daemon's events while the callers come, as an app would, so that
    however slowly the last of them starts, it finds this daemon; its idle exit can then
    be short.
    """
    socket_path = folder / "run" / "broker.sock"
    env = _environment(folder, SIGNIN_BROKER_ISSUER=stub.issuer, **{TEST_SECONDS_ENV: "1"})
    log = socket_path.parent / LOG_NAME
    commands = [("token",), ("status",)] * (CALLERS // 2)
    try:
        with ThreadPoolExecutor(CALLERS) as pool:
            calls = pool.map(lambda command: _cli(socket_path, env, *command), commands)
            with _watching(socket_path):
                done = list(calls)
                status = _cli(socket_path, env, "status", "--json").stdout
        assert '"started_by": "autostart"' in status
        tokens = [
            result for command, result in zip(commands, done, strict=True) if command == ("token",)
        ]
        assert {result.returncode for result in tokens} == {4}, [r.stderr for r in tokens]
        assert all("not signed in" in result.stderr for result in tokens)
        assert all(
            result.returncode == 0
            for command, result in zip(commands, done, strict=True)
            if command == ("status",)
        ), [result.stderr for result in done]
        assert log.read_text().count(READY) == 1

        deadline = time.monotonic() + 30
        while socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not socket_path.exists(), "the idle daemon's socket is still there"
        assert "exiting: idle" in log.read_text()
        assert _cli(socket_path, env, "token").returncode == 4  # started again
        assert log.read_text().count(READY) == 2
    finally:
        _stop_any(socket_path)


@contextlib.contextmanager
def _watching(socket_path: Path) -> Iterator[None]:
    """Watch the events of the daemon that comes to serve the socket, until the block ends."""
    deadline = time.monotonic() + 30
    while not serves(str(socket_path)):
        assert time.monotonic() < deadline, "no daemon came to serve the socket"
        time.sleep(0.01)
    client = BrokerClient(socket_path, timeout=60)
    events = client.watch_events()
    next(events)  # the snapshot: the watch is under way
    try:
        yield
    finally:
        client.close()


def test_autostart_is_refused_with_the_reason_where_a_service_manager_owns_the_socket(
    folder: Path,
) -> None:
    """A user manager runs and the socket unit is installed: its socket is to serve, so
    the CLI and the SDK (sync and asyncio) say what to start instead, and start nothing."""
    env = _environment(folder)
    (folder / "systemd").mkdir()
    (folder / "systemd" / "private").touch()  # where a running user manager listens
    units = folder / "config" / "systemd" / "user"
    units.mkdir(parents=True)
    (units / UNIT).write_text("[Socket]\nListenStream=%t/signin-broker/broker.sock\n")
    socket_path = folder / "run" / "broker.sock"

    refused = _cli(socket_path, env, "token")
    assert refused.returncode == 3, refused.stderr
    assert f"{UNIT} is installed" in refused.stderr
    assert f"systemctl --user enable --now {UNIT}" in refused.stderr

    old = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with BrokerClient(socket_path, timeout=5) as client, pytest.raises(DaemonNotRunning) as sdk:
            client.status()
        with pytest.raises(DaemonNotRunning) as asyncio_sdk:
            asyncio.run(_status(socket_path))
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    assert "your systemd user manager is to" in str(sdk.value)
    assert "your systemd user manager is to" in str(asyncio_sdk.value)
    assert not (socket_path.parent / LOG_NAME).exists()
    assert not socket_path.exists()


async def _status(socket_path: Path) -> None:
    async with AsyncBrokerClient(socket_path, timeout=5) as client:
        await client.status()
