"""`signin-broker doctor` against real daemons, providers, keyrings and clocks.

Each scenario is set up for real (a stopped daemon, a provider that is gone, a clock
ten minutes off under libfaketime, a locked gnome-keyring, a state folder opened to the
group) and the finding that names it must say what was seen and what to do.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.forks import SWITCH, ForkedProcess
from signin_broker_testing.ledger import SecretLedger
from signin_broker_testing.models import DEFAULT_CLIENT
from support.clocks import faked_clock
from support.commands import signin_broker
from support.leaks import SecretIndex
from support.secret_service import secret_service
from support.signin import CALLBACK, signed_in_daemon
from support.storage import state_dir
from support.waiting import eventually

CHECKS = [
    "socket folder",
    "daemon",
    "provider main",
    "clock (main)",
    "tokens (user:1001)",
    "keyring",
    "state folder",
    "systemd units",
    "app policy",
]


pytestmark = pytest.mark.usefixtures("execd_daemons")


def doctor(
    daemon: DaemonProcess, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, dict[str, str]]]:
    """Run `signin-broker doctor --json` as the daemon's user would; its findings by name."""
    done = signin_broker(
        "--socket", str(daemon.socket_path), "doctor", "--json", *args, env=env or daemon.env
    )
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is (done.returncode == 0), done
    return done.returncode, {f["name"]: f for f in report["findings"]}


def failed(findings: dict[str, dict[str, str]]) -> list[str]:
    return [name for name, f in findings.items() if f["status"] == "fail"]


def test_a_healthy_set_up_passes_every_check_in_order(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--key-store", "file")
    code, findings = doctor(daemon)
    assert code == 0, findings
    assert list(findings) == CHECKS
    assert {f["status"] for f in findings.values()} == {"ok"}, findings
    assert findings["daemon"]["seen"].startswith(f"running: pid {daemon.pid}, version ")
    assert "started by manual" in findings["daemon"]["seen"]
    assert findings["provider main"]["seen"].startswith(f"{stub.issuer} answers")
    assert findings["tokens (user:1001)"]["seen"] == "Bearer: any tool can send them"
    shown = signin_broker("--socket", str(socket_path), "doctor", env=daemon.env)
    assert shown.returncode == 0 and shown.stdout.rstrip().endswith("all checks passed"), shown


def test_the_key_file_standing_in_for_a_plaintext_keyring_is_a_warning_that_says_so(
    stub: StubProvider, socket_path: Path
) -> None:
    """With keyrings.alt's PlaintextKeyring the only keyring (as on a headless box)."""
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon:
        code, findings = doctor(daemon)
    assert code == 0  # it works: keys are stored and read back
    keys = findings["keyring"]
    assert keys["status"] == "warn", keys
    assert f"key file {state_dir(socket_path) / 'keys.json'} instead of the keyring" in keys["seen"]
    assert "the only one is keyrings.alt's PlaintextKeyring" in keys["seen"]


def test_a_daemon_started_another_way_is_said_and_the_settings_examined_are_this_shells(
    stub: StubProvider, socket_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon whose command line the doctor does not know (here forked by the suite's
    fork server, as a wrapper program might start one): not its settings, silently."""
    monkeypatch.setenv(SWITCH, "1")
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon:
        assert isinstance(daemon.process, ForkedProcess)
        _, findings = doctor(daemon)
    said = findings["running daemon's settings"]
    assert said["status"] == "warn"
    assert said["seen"].startswith(f"the running daemon (pid {daemon.pid}) was not started as")
    assert "signin-brokerd" in said["action"]
    assert "provider main" not in findings  # this shell names no provider


def test_a_stopped_daemon_is_named_with_how_to_start_it(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, env={"SIGNIN_BROKER_ISSUER": stub.issuer})  # never run
    code, findings = doctor(daemon)
    assert code == 1
    assert failed(findings) == ["daemon"]
    assert findings["daemon"]["seen"] == f"not running: nothing serves {socket_path}"
    assert "signin-brokerd" in findings["daemon"]["action"]
    assert findings["provider main"]["status"] == "ok"  # the settings a daemon here would take
    shown = signin_broker("--socket", str(socket_path), "doctor", env=daemon.env)
    assert "FAIL  daemon" in shown.stdout and "to do: Start it with" in shown.stdout, shown


def test_a_misspelt_variable_of_the_running_daemon_is_named_with_the_setting_meant(
    stub: StubProvider, socket_path: Path
) -> None:
    env = {"SIGNIN_BROKER_ISUER": stub.issuer}  # the daemon's, not the shell's: from /proc
    flags = ("--issuer", stub.issuer, "--key-store", "file")
    with DaemonProcess(socket_path, *flags, env=env) as daemon:
        code, findings = doctor(daemon, env={k: v for k, v in daemon.env.items() if k not in env})
    assert code == 0  # a warning: the daemon runs, the variable does nothing
    assert findings["SIGNIN_BROKER_ISUER"] == {
        "check": "settings", "name": "SIGNIN_BROKER_ISUER", "status": "warn",
        "seen": "SIGNIN_BROKER_ISUER is set but is no setting: the daemon ignores it",
        "action": "did you mean SIGNIN_BROKER_ISSUER? (unset SIGNIN_BROKER_ISUER)",
    }  # fmt: skip


def test_an_unreachable_provider_says_so_and_what_to_check(socket_path: Path) -> None:
    # A port bound and never listened on: connections are refused, and no server another
    # test starts meanwhile can take it (a stopped stub's port could answer again).
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        issuer = f"http://127.0.0.1:{held.getsockname()[1]}"
        with DaemonProcess(socket_path, "--issuer", issuer) as daemon:
            code, findings = doctor(daemon)
    assert code == 1
    assert failed(findings) == ["provider main"]
    provider = findings["provider main"]
    assert provider["seen"].startswith(f"{issuer}: the discovery request failed"), provider
    assert provider["action"].startswith("check the network, and that `issuer` is exactly")
    assert findings["clock (main)"] == {
        "check": "clock", "name": "clock (main)", "status": "warn",
        "seen": "not compared: the provider did not answer",
        "action": "run the doctor again once it does",
    }  # fmt: skip


def test_a_clock_ten_minutes_fast_is_named_by_the_providers_date_header(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    env = faked_clock(tmp_path / "clock", "+10m")
    with DaemonProcess(socket_path, "--issuer", stub.issuer, env=env) as daemon:
        # The command itself on the true clock: under libfaketime CPython's time.sleep fails
        # now and then (EINVAL) in a process waiting with a timeout, as the command waits for
        # its child. The child, the daemon's side, takes the daemon's environment, faked clock
        # included: the clock compared with the provider's is the daemon's.
        code, findings = doctor(daemon, env={**daemon.env, "LD_PRELOAD": ""})
    assert code == 1
    assert failed(findings) == ["clock (main)"]
    assert findings["clock (main)"]["seen"] == (
        "this device's clock is 10 minutes ahead of the identity provider's (by its Date header)"
    )
    assert findings["clock (main)"]["action"].startswith("set the clock right (on Linux: timedatec")


def test_a_locked_keyring_is_named_and_an_unlocked_one_passes(
    stub: StubProvider, socket_path: Path
) -> None:
    home = socket_path.parent.parent / "home"
    with (
        secret_service(home) as env,
        DaemonProcess(socket_path, "--issuer", stub.issuer, env=env) as daemon,
    ):
        code, findings = doctor(daemon)
    assert findings["keyring"]["status"] == "ok", findings["keyring"]
    assert "SecretService" in findings["keyring"]["seen"]
    with (
        secret_service(home, unlock=False) as env,
        DaemonProcess(socket_path, "--issuer", stub.issuer, env=env) as daemon,
    ):
        code, findings = doctor(daemon)
    assert code == 1
    assert failed(findings) == ["keyring"]
    assert findings["keyring"]["seen"] == "the keyring refused: Failed to unlock the collection!"
    assert findings["keyring"]["action"].startswith("unlock the keyring (log in to the desktop")


def test_a_group_writable_state_folder_is_refused_with_the_chmod_to_fix_it(
    stub: StubProvider, socket_path: Path
) -> None:
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon:
        state = state_dir(socket_path)
        state.chmod(0o770)
        code, findings = doctor(daemon)
    assert code == 1
    # The keys are there too: the key file stands in for the test keyring (plaintext).
    assert failed(findings) == ["keyring", "state folder"]
    assert findings["keyring"]["seen"] == findings["state folder"]["seen"]
    assert findings["state folder"]["seen"] == (
        f"folder {state} can be written by other users (mode 0770)"
    )
    assert findings["state folder"]["action"] == (
        f"run `chmod 700 {state}` or choose another --state-dir"
    )


def test_the_support_bundle_holds_no_token_secret_or_code_the_stub_issued(
    socket_path: Path, tmp_path: Path
) -> None:
    """A confidential client, a sign-in, tokens handed out, a daemon logging at debug to a
    file (as `signin-brokerd 2>>FILE` does): the bundle has the log's last lines, the
    settings and the findings, and none of the secrets the stub issued or was given."""
    secret = "doctor-" + os.urandom(18).hex()
    secret_file = tmp_path / "client-secret"
    secret_file.write_text(secret)
    secret_file.chmod(0o600)
    client = replace(
        DEFAULT_CLIENT, token_endpoint_auth_method="client_secret_basic", client_secret=secret
    )
    log = tmp_path / "daemon.log"
    with StubProvider(clients=[client]) as stub:
        daemon = DaemonProcess(
            socket_path, "--issuer", stub.issuer, "--client-secret-file", str(secret_file)
        )
        with log.open("a") as out:
            process = subprocess.Popen(
                daemon.args, env=daemon.env, stdin=subprocess.DEVNULL, stderr=out
            )
        try:
            web = _web_url(log)
            with Browser() as browser:
                browser.get(
                    location(browser.follow(browser.get(web + "/user/login"), until=web + CALLBACK))
                )
            with BrokerClient(socket_path) as broker:
                issued = broker.get_token()
                broker.get_token(min_ttl_seconds=3600)  # a refresh: a rotated refresh token
            code, _ = doctor(daemon, "--bundle", str(tmp_path / "bundle.json"))
        finally:
            process.terminate()
            process.wait(15)
    bundle_path = tmp_path / "bundle.json"
    text = bundle_path.read_text()
    bundle = json.loads(text)
    assert code == 0, bundle["findings"]
    assert bundle_path.stat().st_mode & 0o777 == 0o600
    assert bundle["versions"]["daemon"] == bundle["versions"]["signin-broker"]
    assert bundle["settings"]["main"]["client_secret_file"] == str(secret_file)
    assert bundle["log"]["source"] == str(log)
    assert any('"sign-in page ready"' in line for line in bundle["log"]["lines"])
    assert [f["name"] for f in bundle["findings"]] == CHECKS
    secrets = SecretIndex([*SecretLedger.secrets(), secret])
    assert issued.access_token in SecretLedger.secrets() and len(secrets) > 4
    assert secrets.found_in(text) == []


def _web_url(log: Path) -> str:
    """The loopback page of a daemon logging to a file, once it is ready."""

    def ready() -> Any:
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("msg") == "ready":
                return record
        return None

    eventually(lambda: "sign-in page ready" in log.read_text(), "the daemon ready", 15, 0.05)
    return str(eventually(ready, "the ready record", 5)["web"]).rstrip("/")
