"""Settings a person can trace: managed defaults named in status and the log, misspellings named.

An organisation presets its issuer in a system config folder; `signin-broker status`
and the daemon's ready line say which file set it. A SIGNIN_BROKER_* variable that is
no setting is named at start with the setting nearest to it, its value never shown.
"""

from __future__ import annotations

import json
from pathlib import Path

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
