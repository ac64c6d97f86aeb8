"""The daemon process: socket folder and modes, single instance, stale sockets, signals, logs."""

from __future__ import annotations

import os
import signal
import socket
import stat
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, SignInState
from signin_broker_testing.daemon import DaemonProcess


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_socket_folder_is_0700_and_socket_is_0600(daemon: DaemonProcess) -> None:
    assert mode(daemon.socket_path.parent) == 0o700
    assert stat.S_ISSOCK(daemon.socket_path.lstat().st_mode)
    assert mode(daemon.socket_path) == 0o600
    folder = daemon.socket_path.parent
    sockets = [p.name for p in folder.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)]
    assert sockets == [daemon.socket_path.name], "one socket: no private one to dial instead"


def test_socket_is_born_0600_whatever_the_umask(socket_path: Path) -> None:
    old = os.umask(0)  # the daemon inherits a wide-open umask
    try:
        with DaemonProcess(socket_path) as daemon:
            assert mode(daemon.socket_path) == 0o600
            assert mode(daemon.socket_path.parent) == 0o700
    finally:
        os.umask(old)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_and_removes_the_socket(socket_path: Path, signum: int) -> None:
    daemon = DaemonProcess(socket_path).start()
    assert daemon.stop(signum) == 0
    assert not socket_path.exists()
    messages = [record["msg"] for record in daemon.records()]
    assert messages[-2:] == ["stopping", "stopped"]


def test_every_log_line_is_a_json_object_with_severity(daemon: DaemonProcess) -> None:
    daemon.stop()
    records = daemon.records()  # raises if any line is not JSON
    assert records
    for record in records:
        assert {"ts", "severity", "logger", "msg"} <= record.keys()
        assert record["severity"] in {"debug", "info", "warn", "error", "critical"}


def test_second_instance_refuses_with_clear_message_and_exit_1(daemon: DaemonProcess) -> None:
    second = DaemonProcess(daemon.socket_path).start(wait=False)
    assert second.wait_exit() == 1
    assert f"another signin-brokerd (pid {daemon.pid}) already serves" in second.output()
    with BrokerClient(daemon.socket_path) as client:  # the first one is untouched
        assert client.status().pid == daemon.pid


def test_stale_socket_of_a_crashed_daemon_is_taken_over(socket_path: Path) -> None:
    crashed = DaemonProcess(socket_path).start()
    crashed.kill()
    assert stat.S_ISSOCK(socket_path.lstat().st_mode), "SIGKILL leaves the socket file behind"
    with DaemonProcess(socket_path) as successor, BrokerClient(socket_path) as client:
        assert client.status().pid == successor.pid


def test_a_process_serving_the_socket_without_the_lock_is_not_displaced(socket_path: Path) -> None:
    socket_path.parent.mkdir(mode=0o700)
    squatter = socket.socket(socket.AF_UNIX)
    squatter.bind(str(socket_path))
    squatter.listen()
    try:
        daemon = DaemonProcess(socket_path).start(wait=False)
        assert daemon.wait_exit() == 1
        assert "already serves" in daemon.output()
        assert socket_path.exists()
    finally:
        squatter.close()


def test_refuses_to_replace_a_file_that_is_not_a_socket(socket_path: Path) -> None:
    socket_path.parent.mkdir(mode=0o700)
    socket_path.write_text("precious")
    daemon = DaemonProcess(socket_path).start(wait=False)
    assert daemon.wait_exit() == 1
    assert "is not a socket" in daemon.output()
    assert socket_path.read_text() == "precious"


@pytest.mark.parametrize("folder_mode", [0o755, 0o770, 0o1777])
def test_refuses_a_socket_folder_open_to_other_users(socket_path: Path, folder_mode: int) -> None:
    socket_path.parent.mkdir()
    socket_path.parent.chmod(folder_mode)
    daemon = DaemonProcess(socket_path).start(wait=False)
    assert daemon.wait_exit() == 1
    assert "is open to other users" in daemon.output()
    assert f"chmod 700 {socket_path.parent}" in daemon.output()


def test_refuses_a_socket_path_too_long_for_a_unix_socket(folder: Path) -> None:
    daemon = DaemonProcess(folder / ("x" * 120) / "broker.sock").start(wait=False)
    assert daemon.wait_exit() == 1
    assert "longer than" in daemon.output()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--revalidate-seconds", "61"],
            "revalidate_seconds (from --revalidate-seconds) must be between 1 and 60",
        ),
        (["--http", "192.0.2.1:8765"], "http (from --http) must be a loopback IP address"),
        (["--issuer", "http://idp.example.com"], "issuer (from --issuer) must be an https:// URL"),
        (["--scopes", "openid bad\\scope"], "is not a valid OAuth scope"),
        (["--log-level", "loud"], "log_level (from --log-level) must be one of"),
    ],
)
def test_bad_settings_exit_2_naming_the_setting(
    socket_path: Path, args: list[str], expected: str
) -> None:
    daemon = DaemonProcess(socket_path, *args).start(wait=False)
    assert daemon.wait_exit() == 2
    assert expected in daemon.output()
    assert not socket_path.exists()


def test_bad_config_file_exits_2(folder: Path, socket_path: Path) -> None:
    config = folder / "config.toml"
    config.write_text('issuer = "https://idp.example.com"\nrevalidate_second = 30\n')
    daemon = DaemonProcess(socket_path, "--config", str(config)).start(wait=False)
    assert daemon.wait_exit() == 2
    assert "unknown settings revalidate_second" in daemon.output()


def test_settings_reach_the_daemon_from_env_and_config_file(
    folder: Path, socket_path: Path
) -> None:
    config = folder / "config.toml"
    config.write_text('issuer = "https://file.example.com"\n')
    env = {"SIGNIN_BROKER_CONFIG": str(config)}
    with DaemonProcess(socket_path, env=env), BrokerClient(socket_path) as client:
        status = client.status()
        assert status.issuer == "https://file.example.com"
        assert status.sign_in_state is SignInState.SIGNED_OUT
    env["SIGNIN_BROKER_ISSUER"] = "https://env.example.com"
    with DaemonProcess(socket_path, env=env), BrokerClient(socket_path) as client:
        assert client.status().issuer == "https://env.example.com"
