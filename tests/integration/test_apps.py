"""Per-app policy: allow, deny and ask, the policy file, `signin-broker apps`, and accounts."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from signin_broker.client import AppDecision, BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.accounts import ALICE_ID, BOB_ID, daemon_with_accounts
from support.apps import App, outcome, policy_path, rule, write_policy
from support.commands import BIN, signin_broker
from support.signin import sign_in, signed_in_daemon


def cli(daemon: DaemonProcess, *args: str) -> tuple[int, str, str]:
    result = signin_broker("--socket", str(daemon.socket_path), *args)
    return result.returncode, result.stdout, result.stderr


def wait_until_waiting(socket_path: Path, app: App, timeout: float = 30) -> None:
    """Until the daemon lists the app's request as waiting for the user's answer."""
    deadline = time.monotonic() + timeout
    with BrokerClient(socket_path) as client:
        while time.monotonic() < deadline:
            if any(a.waiting and a.script == str(app.path) for a in client.apps().apps):
                return
            time.sleep(0.05)
    raise AssertionError(f"{app.name} never waited for an answer")


def test_apps_are_told_apart_by_their_script_and_listed_with_their_use(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    mail, calendar = App(tmp_path, "mail"), App(tmp_path, "calendar")
    assert mail.run(socket_path, "token")["ok"]
    assert mail.run(socket_path, "token")["ok"]
    assert calendar.run(socket_path, "token")["ok"]
    code, out, _ = cli(daemon, "apps", "--json")
    assert code == 0
    listed = {app["script"]: app for app in json.loads(out)["apps"]}
    assert listed[str(mail.path)]["tokens_issued"] == 2
    assert listed[str(calendar.path)]["tokens_issued"] == 1
    assert listed[str(mail.path)]["id"] == mail.id
    assert listed[str(mail.path)]["decision"] == "allow"
    assert listed[str(mail.path)]["decided"] is False  # the default for new apps
    code, out, err = cli(daemon, "apps")
    assert mail.name in out and "allow*" in out and "default for new apps (allow)" in err
    daemon.stop()


def test_deny_from_the_cli_refuses_the_app_and_is_written_to_the_policy_file(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    mail = App(tmp_path, "mail")
    assert mail.run(socket_path, "token")["ok"]
    code, _, err = cli(daemon, "apps", "deny", mail.name)  # a unique file name is enough
    assert code == 0 and "deny" in err
    refused = mail.run(socket_path, "token")
    assert refused["code"] == "PERMISSION_DENIED"
    assert mail.id in refused["message"]  # says how to allow it
    policy = policy_path(socket_path)
    assert stat.S_IMODE(policy.stat().st_mode) == 0o600
    assert f'app = "{mail.id}"' in policy.read_text() and 'decision = "deny"' in policy.read_text()
    assert cli(daemon, "apps", "reset", mail.name)[0] == 0  # back to the default
    assert mail.run(socket_path, "token")["ok"]
    daemon.stop()


def asking_daemon(
    stub: StubProvider, socket_path: Path, folder: Path, *args: str
) -> tuple[DaemonProcess, Path]:
    """A signed-in daemon asking the user about new apps, with a notify-send that notes
    each notification's title in the returned file."""
    notified = folder / "notified"
    fake_bin = folder / "bin"
    fake_bin.mkdir()
    notify_send = fake_bin / "notify-send"
    notify_send.write_text(f'#!/bin/sh\nprintf "%s\\n" "$2" >> {notified}\n')
    notify_send.chmod(0o755)
    daemon = signed_in_daemon(
        stub,
        socket_path,
        "--new-apps",
        "ask",
        *args,
        env={"PATH": f"{fake_bin}:{os.environ['PATH']}"},
    )
    return daemon, notified


def test_ask_answered_allow_lets_the_waiting_request_through(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon, notified = asking_daemon(stub, socket_path, tmp_path)
    mail = App(tmp_path, "mail")
    waiting = mail.start(socket_path, "token")
    wait_until_waiting(socket_path, mail)
    deadline = time.monotonic() + 10  # the notification is sent beside the request
    while not notified.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _lines(notified) == [f"{mail.name} asks for your sign-in"], daemon.output()
    assert waiting.poll() is None  # still waiting for the user
    code, _, err = cli(daemon, "apps", "allow", str(mail.path))
    assert code == 0 and "answered its waiting request" in err
    assert outcome(waiting)["account"] == "user:1001"
    assert mail.run(socket_path, "token")["ok"]  # the answer is remembered
    daemon.stop()


def test_every_app_that_waits_gets_its_notification(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    """Regression: spawned from the event loop, a quarter of the notifiers died of SIGSEGV."""
    daemon, notified = asking_daemon(stub, socket_path, tmp_path, "--ask-timeout-seconds", "2")
    apps = [App(tmp_path / "apps", f"app{number}") for number in range(12)]
    for waiting in [app.start(socket_path, "token") for app in apps]:
        assert outcome(waiting)["code"] == "PERMISSION_DENIED"  # nobody answered
    deadline = time.monotonic() + 10
    while len(_lines(notified)) < len(apps) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(_lines(notified)) == sorted(f"{app.name} asks for your sign-in" for app in apps)
    assert not daemon.logs_with(msg="the desktop notification failed")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_ask_answered_deny_refuses_the_waiting_request(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "ask")
    mail = App(tmp_path, "mail")
    waiting = mail.start(socket_path, "token")
    wait_until_waiting(socket_path, mail)
    with BrokerClient(socket_path) as client:
        app, answered = client.set_app_policy(mail.id, AppDecision.DENY)
    assert answered == 1 and app.decision is AppDecision.DENY
    assert outcome(waiting)["code"] == "PERMISSION_DENIED"
    daemon.stop()


def test_ask_without_an_answer_times_out_with_permission_denied(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "ask", "--ask-timeout-seconds", "1")
    mail = App(tmp_path, "mail")
    began = time.monotonic()
    refused = mail.run(socket_path, "token")
    assert refused["code"] == "PERMISSION_DENIED"
    assert "did not answer within 1 s" in refused["message"]
    assert time.monotonic() - began < 20
    assert mail.run(socket_path, "accounts") == {"ok": True, "accounts": []}  # nothing seen
    daemon.stop()


def test_a_broken_policy_file_is_reported_and_the_last_good_policy_stays(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    mail = App(tmp_path, "mail")
    write_policy(socket_path, rule(mail, "deny"))
    assert mail.run(socket_path, "token")["code"] == "PERMISSION_DENIED"
    policy_path(socket_path).write_text('[[apps]]\napp = "unterminated\n')
    assert mail.run(socket_path, "token")["code"] == "PERMISSION_DENIED"  # still denied
    out = cli(daemon, "apps", "--json")[1]
    assert "is not valid TOML" in json.loads(out)["policy_error"]
    assert "last good policy stays in force" in json.loads(out)["policy_error"]
    daemon.expect_log(msg="the app policy file cannot be used", severity="error")
    write_policy(socket_path, rule(mail, "allow"))
    assert mail.run(socket_path, "token")["ok"]
    assert json.loads(cli(daemon, "apps", "--json")[1])["policy_error"] == ""
    assert daemon.alive
    daemon.stop()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('[[apps]]\napp = "x"\ndecision = "maybe"\n', "decision must be"),
        ('[[apps]]\ndecision = "allow"\n', "app must be"),
        ('[[apps]]\napp = "x"\ndecision = "allow"\nscopes = ["bad scope"]\n', "valid OAuth scope"),
        ('[[apps]]\napp = "x"\ndecision = "allow"\nsha256 = "abc"\n', "sha256 must be"),
        ('[[apps]]\napp = "x"\ndecision = "allow"\nwho = 1\n', "unknown key 'who'"),
        ('default = "allow"\n', "unknown key 'default'"),
        ("[[apps]]\nscopes = " + "[" * 5000 + "]" * 5000, "apps.toml nests too deeply"),
    ],
)
def test_policy_file_mistakes_are_named(text: str, reason: str) -> None:
    from signin_broker.daemon.apps.policy import PolicyError, parse

    with pytest.raises(PolicyError, match=reason):
        parse(text)


def test_an_app_limited_to_an_account_and_scopes_gets_only_those(
    people: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = daemon_with_accounts(people, socket_path, workspace=False)
    mail = App(tmp_path, "mail")
    write_policy(socket_path, rule(mail, "allow", [BOB_ID], ["openid", "email"]))
    token = mail.run(socket_path, "token")
    assert token["account"] == BOB_ID and sorted(token["scopes"]) == ["email", "openid"]
    assert people.access_token_info(token["access_token"])["scope"] == "email openid"
    refused = mail.run(socket_path, "token", BOB_ID, "profile")
    assert refused["code"] == "PERMISSION_DENIED" and "limits this app" in refused["message"]
    daemon.stop()


def test_a_pinned_app_is_refused_once_its_file_changes(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    mail = App(tmp_path, "mail")
    assert mail.run(socket_path, "token")["ok"]
    assert cli(daemon, "apps", "allow", "--pin", mail.name)[0] == 0
    assert mail.run(socket_path, "token")["ok"]
    mail.path.write_text(mail.path.read_text() + "\n# changed\n")
    refused = mail.run(socket_path, "token")
    assert refused["code"] == "PERMISSION_DENIED" and "sha256 changed" in refused["message"]
    daemon.stop()


def test_naming_an_unknown_app_is_not_found(stub: StubProvider, socket_path: Path) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    code, _, err = cli(daemon, "apps", "allow", "nothing-like-it")
    assert code == 1 and "not_found" in err and "has used the broker" in err
    daemon.stop()


# -- several accounts ------------------------------------------------------------------


def test_accounts_use_and_remove_from_the_cli(people: StubProvider, socket_path: Path) -> None:
    daemon = daemon_with_accounts(people, socket_path, workspace=False)
    code, out, _ = cli(daemon, "accounts")
    assert code == 0 and f"* {ALICE_ID}" in out and BOB_ID in out
    code, _, err = cli(daemon, "accounts", "use", BOB_ID)
    assert code == 0 and "is now the default" in err
    with BrokerClient(socket_path) as client:
        assert client.get_token().account == BOB_ID
    code, _, err = cli(daemon, "accounts", "remove", ALICE_ID)
    assert code == 0 and "Removed user:1001" in err
    code, out, _ = cli(daemon, "accounts", "--json")
    assert [a["id"] for a in json.loads(out)] == [BOB_ID]
    assert cli(daemon, "accounts", "remove")[0] == 2  # removal never guesses
    daemon.stop()
    restarted = DaemonProcess(socket_path, "--issuer", people.issuer).start()
    with BrokerClient(socket_path) as client:  # the default and the removal survive
        assert [(a.id, a.is_default) for a in client.accounts()] == [(BOB_ID, True)]
    restarted.stop()


def test_audit_shows_who_got_tokens_and_what_changed(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    mail = App(tmp_path, "mail")
    assert mail.run(socket_path, "token")["ok"]
    assert cli(daemon, "apps", "deny", mail.name)[0] == 0
    code, out, _ = cli(daemon, "audit", "--json")
    assert code == 0
    rows = json.loads(out)
    seen = {(row["action"], row["resource"], row["actor_app"]) for row in rows}
    assert ("create", "account", "browser (loopback sign-in page)") in seen
    assert ("issue_token", "token", mail.id) in seen
    assert any(a == "update" and r == "app_policy" for a, r, _ in seen)
    assert [row["id"] for row in rows] == sorted((row["id"] for row in rows), reverse=True)
    assert all(isinstance(row["payload"], dict) and "payload_json" not in row for row in rows)
    assert all("access_token" not in json.dumps(row["payload"]) for row in rows)
    with BrokerClient(socket_path) as client:  # the same token again: counted, audited once
        for _ in range(5):
            client.get_token()
        mine = [
            row
            for row in client.audit_events(limit=1000)
            if row.actor_pid == os.getpid() and row.action == "issue_token"
        ]
    assert len(mine) == 1 and mine[0].times >= 5  # one row that counts its times
    code, out, _ = cli(daemon, "audit", "--app", mail.id, "--json")
    assert {row["actor_app"] for row in json.loads(out)} == {mail.id}
    code, out, _ = cli(daemon, "audit")
    assert "issue_token" in out and mail.name in out
    assert max(map(len, out.splitlines())) <= 130, out  # a row fits a wide terminal
    daemon.stop()


def test_audit_rows_outlive_a_logout_and_go_with_a_removal(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path) as client:
        client.get_token()
    assert cli(daemon, "logout")[0] == 0
    code, out, _ = cli(daemon, "audit", "--json")
    kept = {(row["target_account"], row["action"]) for row in json.loads(out)}
    assert {("user:1001", "issue_token"), ("user:1001", "delete")} <= kept  # signed out, not gone
    assert "user:1001" in cli(daemon, "audit")[1]
    with Browser() as browser:
        sign_in(browser, daemon)
    assert cli(daemon, "accounts", "remove", "user:1001")[0] == 0
    code, out, _ = cli(daemon, "audit", "--json")
    assert code == 0
    assert not [row for row in json.loads(out) if row["target_account"] == "user:1001"]
    daemon.stop()


def test_an_answer_for_once_records_nothing_and_needs_a_waiting_request(
    stub: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "ask")
    mail = App(tmp_path, "mail")
    waiting = mail.start(socket_path, "token")
    wait_until_waiting(socket_path, mail)
    code, _, err = cli(daemon, "apps", "allow", "--once", mail.id)
    assert code == 0 and "allow this once" in err
    assert outcome(waiting)["account"] == "user:1001"
    assert (
        not policy_path(socket_path).exists() or mail.id not in policy_path(socket_path).read_text()
    )
    code, _, err = cli(daemon, "apps", "deny", "--once", mail.id)  # nothing waits now
    assert code != 0 and "no request of" in err and "waits for an answer" in err
    again = mail.start(socket_path, "token")  # it asks again: the answer was for once
    wait_until_waiting(socket_path, mail)
    code, _, _ = cli(daemon, "apps", "deny", "--once", mail.id)
    assert code == 0
    assert outcome(again)["code"] == "PERMISSION_DENIED"
    assert daemon.alive
    daemon.stop()


def test_the_apps_table_ends_with_its_footer_on_a_line_of_its_own(
    stub: StubProvider, socket_path: Path
) -> None:
    """In one pipe the footer (stderr) follows the table: it once came first, or on its last row."""
    daemon = signed_in_daemon(stub, socket_path)
    assert cli(daemon, "token")[0] == 0  # an app that got a token: a row
    command = [str(BIN / "signin-broker"), "--socket", str(daemon.socket_path), "apps"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as in a shell
    shown = subprocess.run(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True
    ).stdout.splitlines()
    daemon.stop()
    assert shown[0].startswith("APP "), shown
    assert len(shown) >= 3 and "signin-broker" in shown[-2], shown
    assert shown[-1].startswith("* the default for new apps (allow); policy file: "), shown
    assert not any("* the default" in line for line in shown[:-1]), shown
