"""Settings a person can trace: managed defaults named in status and the log, misspellings named.

An organisation presets its issuer in a system config folder; `signin-broker status`
and the daemon's ready line say which file set it. A SIGNIN_BROKER_* variable that is
no setting is named at start with the setting nearest to it, its value never shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.signin import sign_in


def test_an_issuer_preset_by_the_organisation_signs_in_and_status_names_its_file(
    stub: StubProvider, socket_path: Path
) -> None:
    socket_path.parent.mkdir(mode=0o700)  # the daemon's own folder: private
    system = socket_path.parent / "system-config"  # where DaemonProcess points XDG_CONFIG_DIRS
    org = system / "signin-broker" / "config.d" / "10-org.toml"
    org.parent.mkdir(parents=True)
    org.write_text(f'issuer = "{stub.issuer}"\n')
    with DaemonProcess(socket_path) as daemon:  # no --issuer: the organisation's
        ready = daemon.expect_log(msg="ready")[0]
        assert ready["managed_config"] == [str(org)]
        assert ready["setting_sources"] == {"main": {"issuer": f"from {org}"}}
        with Browser() as browser:
            sign_in(browser, daemon)
        shown = signin_broker("--socket", str(socket_path), "status")
        assert f"issuer from {org}" in shown.stdout
        as_json = json.loads(signin_broker("--socket", str(socket_path), "status", "--json").stdout)
        assert as_json["providers"][0]["setting_sources"] == {"issuer": f"from {org}"}
        token = signin_broker("--socket", str(socket_path), "token")
        assert token.returncode == 0, token.stderr


def test_a_misspelt_variable_is_named_at_start_without_its_value(
    stub: StubProvider, socket_path: Path
) -> None:
    secret = "do-not-log-this-secret-7f3a"
    env = {"SIGNIN_BROKER_ISUER": stub.issuer, "SIGNIN_BROKER_CLIENT_SECRET": secret}
    with DaemonProcess(socket_path, "--issuer", stub.issuer, env=env) as daemon:
        daemon.expect_log(
            msg="ignored an environment variable that is no setting",
            variable="SIGNIN_BROKER_ISUER",
            nearest_setting="SIGNIN_BROKER_ISSUER",
            severity="warn",
        )
        daemon.expect_log(
            variable="SIGNIN_BROKER_CLIENT_SECRET",
            nearest_setting="SIGNIN_BROKER_CLIENT_SECRET_FILE",
        )
        daemon.stop()
        assert secret not in daemon.output()


@pytest.mark.usefixtures("execd_daemons")
def test_a_managed_file_read_before_and_gone_is_said_in_status_and_the_doctor(
    stub: StubProvider, socket_path: Path
) -> None:
    """A managed file deleted (or what it led to gone) is said in status and by the doctor:
    the daemon once started without it, silently."""
    socket_path.parent.mkdir(mode=0o700)
    org = socket_path.parent / "system-config" / "signin-broker" / "config.d" / "10-org.toml"
    org.parent.mkdir(parents=True)
    org.write_text('scopes = "openid profile email offline_access"\n')
    memory = socket_path.parent / "state" / "signin-broker" / "managed-config.json"

    def said_at_a_start() -> tuple[list[str], str, list[dict[str, str]]]:
        with DaemonProcess(socket_path, "--issuer", stub.issuer):
            socket = ("--socket", str(socket_path))
            as_json = json.loads(signin_broker(*socket, "status", "--json").stdout)
            text = signin_broker(*socket, "status").stdout
            doctor = json.loads(signin_broker(*socket, "doctor", "--json").stdout)
        found = [f for f in doctor["findings"] if f["name"] == "managed config"]
        return as_json["config_warnings"], text, found

    warnings, _, found = said_at_a_start()
    assert warnings == [] and [f["status"] for f in found] == ["ok"]
    org.unlink()
    for _ in range(2):  # at every start, until it is back or forgotten
        warnings, text, found = said_at_a_start()
        assert len(warnings) == 1 and warnings[0].startswith(
            f"managed config {org} was read at an earlier start and is not there now"
        ), warnings
        assert f"rm {memory}" in warnings[0]
        assert f"CONFIG           managed config {org} was read" in text, text
        assert [(f["status"], f["action"][:24]) for f in found] == [
            ("warn", "ask whoever manages this")
        ]
    memory.unlink()  # the person forgets it: removed on purpose
    assert said_at_a_start()[0] == []


def test_a_managed_symlink_another_user_could_redirect_stops_the_daemon(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    """config.d/10-org.toml leading to a root file in a folder another user can change stops
    the daemon: that user could swap it for any other root file, or delete it."""
    socket_path.parent.mkdir(mode=0o700)
    theirs = folder / "theirs"
    theirs.mkdir()
    theirs.chmod(0o777)  # as a folder of another user's would be to them
    (theirs / "org.toml").write_text(f'issuer = "{stub.issuer}"\n')
    drop_ins = socket_path.parent / "system-config" / "signin-broker" / "config.d"
    drop_ins.mkdir(parents=True)
    (drop_ins / "10-org.toml").symlink_to(theirs / "org.toml")
    daemon = DaemonProcess(socket_path).start(wait=False)
    assert daemon.wait_exit() == 2
    assert f"managed config {drop_ins / '10-org.toml'} could be changed by another user" in (
        daemon.output()
    )
    assert f"folder {theirs} (on the way to {theirs / 'org.toml'})" in daemon.output()
