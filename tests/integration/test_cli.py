"""The bundled `signin-broker` command against a real daemon: output, JSON and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from signin_broker import __version__
from signin_broker.client import BrokerClient
from signin_broker_testing.daemon import DaemonProcess
from support.commands import BIN, signin_broker


def cli(daemon_socket: Path, *args: str):
    return signin_broker("--socket", str(daemon_socket), *args)


def test_status_human_output_is_a_readable_table(shared_daemon: DaemonProcess) -> None:
    result = cli(shared_daemon.socket_path, "status")
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(None, 1) for line in result.stdout.splitlines() if "  " in line)
    assert lines["daemon"].startswith(f"running (pid {shared_daemon.pid}, version {__version__}")
    assert "started by manual" in lines["daemon"] and " MB resident)" in lines["daemon"]
    assert lines["socket"].strip() == str(shared_daemon.socket_path)
    assert "not configured" in result.stdout


def test_status_json_is_complete(shared_daemon: DaemonProcess) -> None:
    result = cli(shared_daemon.socket_path, "status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["pid"] == shared_daemon.pid
    assert status["sign_in_state"] == "not_configured"
    assert status["caller"]["uid"] == os.geteuid()


def test_token_when_not_signed_in_exits_4_with_what_to_do(shared_daemon: DaemonProcess) -> None:
    result = cli(shared_daemon.socket_path, "token")
    assert result.returncode == 4
    assert result.stdout == ""
    assert "not signed in" in result.stderr
    assert "signin-broker login" in result.stderr


def test_token_bad_request_exits_1_with_the_daemons_reason(shared_daemon: DaemonProcess) -> None:
    result = cli(shared_daemon.socket_path, "token", "--min-ttl", "-3")
    assert result.returncode == 1
    assert "invalid_argument: min_ttl_seconds must be between 0 and 86400" in result.stderr
    result = cli(shared_daemon.socket_path, "token", "--account", "user:ghost", "--json")
    assert result.returncode == 1
    assert "not_found: not found" in result.stderr


def test_accounts_and_logout_when_nobody_is_signed_in(shared_daemon: DaemonProcess) -> None:
    listed = cli(shared_daemon.socket_path, "accounts", "--json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
    human = cli(shared_daemon.socket_path, "accounts")
    assert human.returncode == 0 and "no accounts signed in" in human.stderr
    logout = cli(shared_daemon.socket_path, "logout", "--json")
    assert logout.returncode == 0
    assert json.loads(logout.stdout) == {
        "was_signed_in": False,
        "logout_url": "",
        "revocation": "unspecified",
        "revocation_error": "",
    }


def test_login_without_provider_says_how_to_configure_one(shared_daemon: DaemonProcess) -> None:
    result = cli(shared_daemon.socket_path, "login", "--no-browser")
    assert result.returncode == 1
    assert "set issuer" in result.stderr


def test_daemon_not_running_exits_3_and_says_how_to_start_it(folder: Path) -> None:
    for command in ("status", "token", "accounts", "logout", "login"):
        result = cli(folder / "nothing-here.sock", command)
        assert result.returncode == 3, (command, result.stderr)
        assert "daemon is not running" in result.stderr
        assert "signin-brokerd" in result.stderr


def test_status_json_with_no_daemon_says_so_on_stdout(folder: Path) -> None:
    result = cli(folder / "nothing-here.sock", "status", "--json")
    assert result.returncode == 3
    assert json.loads(result.stdout) == {
        "running": False,
        "socket": str(folder / "nothing-here.sock"),
    }


def test_global_options_may_follow_the_command_and_its_action(
    shared_daemon: DaemonProcess, folder: Path
) -> None:
    socket = str(shared_daemon.socket_path)
    after = signin_broker("status", "--socket", socket, "--timeout", "5")
    assert after.returncode == 0, after.stderr
    assert socket in after.stdout
    listed = signin_broker("accounts", "list", "--json", "--socket", socket)
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
    nowhere = str(folder / "nothing-here.sock")
    assert signin_broker("--socket", socket, "status", "--socket", nowhere).returncode == 3


def test_help_keeps_every_command_apart_from_its_description() -> None:
    result = signin_broker("--help")
    listed = result.stdout.split("commands:")[1]
    for name in ("install-service", "conformance", "client-secret", "docker-credential"):
        (line,) = [line for line in listed.splitlines() if line.strip().startswith(name)]
        assert line.strip()[len(name)] == " ", line


def test_a_reader_that_goes_away_gets_no_traceback(shared_daemon: DaemonProcess) -> None:
    """`audit --json | head -1`: the pipe closes while the command still writes."""
    with BrokerClient(shared_daemon.socket_path) as client:
        for _ in range(80):  # each read is an audit row: enough JSON to outgrow the buffer
            client.audit_events(limit=1)
    reader, writer = os.pipe()
    os.close(reader)  # gone before the first byte
    try:
        done = subprocess.run(
            [str(BIN / "signin-broker"), "--socket", str(shared_daemon.socket_path), "audit",
             "--json", "--limit", "200"],
            stdout=writer, stderr=subprocess.PIPE, text=True, timeout=30,
        )  # fmt: skip
    finally:
        os.close(writer)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


def test_usage_errors_exit_2(shared_daemon: DaemonProcess) -> None:
    assert cli(shared_daemon.socket_path, "frobnicate").returncode == 2
    assert cli(shared_daemon.socket_path, "token", "--min-ttl", "soon").returncode == 2
    assert signin_broker().returncode == 2


def test_version() -> None:
    result = signin_broker("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"signin-broker {__version__}")
