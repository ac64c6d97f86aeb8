"""The contract's isolation cases and I3, mapped onto the broker, against a real daemon.

Tenants are accounts (`user:<id>`, `user:<id>:workspace:<wid>`); the caller is an app,
identified by the kernel; what an app may see is the user's app policy. Each app here
is a separate process (support.apps). The isolation table's ids carry the prefix iso_
(iso_T7 is row-level isolation; plain T7 is the sign-in table's deep link). iso_T1
beyond these lives in test_callers.py (other OS users, the private socket); iso_T10
and iso_T12 concern org-scoped tables, which the broker does not have. iso_T11's record
is a pending device (QR) sign-in.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from signin_broker.client import BrokerClient, EventKind
from signin_broker.store.audit_log import FOR_ACCOUNT_SQL, FOR_APP_SQL
from signin_broker.store.keys import FileKeyStore
from signin_broker.store.tenants import MissingTenantKey
from signin_broker.store.vault import Vault
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support.accounts import ALICE, ALICE_AT_7, ALICE_ID, BOB, BOB_ID, daemon_with_accounts
from support.apps import App, rule, write_policy
from support.commands import BIN
from support.events import watching
from support.signin import login_through_the_cli, sign_in
from support.state import key_store_has, state_files

NOT_FOUND = {"ok": False, "code": "NOT_FOUND", "message": "not found"}
SECOND_APP = Path(__file__).parents[2] / "examples" / "app_userinfo.py"


@pytest.fixture(scope="module")
def shared_people() -> Iterator[StubProvider]:
    with StubProvider(users=[ALICE, BOB], auto_approve=ALICE.sub) as provider:
        yield provider


@pytest.fixture(scope="module")
def accounts_daemon(shared_people: StubProvider) -> Iterator[DaemonProcess]:
    """Alice (the default), Bob and Alice in workspace 7, for the tests that only read.

    Each writes the policy for its own apps (the whole file: no rule of another test's
    stays) and changes no account; a test that signs out or removes one has a daemon of
    its own.
    """
    folder = short_temp_dir()
    daemon = daemon_with_accounts(shared_people, folder / "run" / "broker.sock")
    yield daemon
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def audit_db(daemon: DaemonProcess) -> sqlite3.Connection:
    path = daemon.socket_path.parent / "state" / "signin-broker" / "audit.sqlite3"
    return sqlite3.connect(path)


def test_I3_a_second_app_arrives_signed_in_without_its_own_oauth_flow(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    with Browser() as browser:
        login, _ = login_through_the_cli(daemon, browser)  # app 1: the bundled CLI
    assert login.wait(timeout=30) == 0
    stub.clear_requests()
    second = subprocess.run(  # app 2: another program, started afterwards
        [sys.executable, str(SECOND_APP), stub.issuer],
        env={**daemon.env, "SIGNIN_BROKER_SOCKET": str(socket_path)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "hello to Alice Example" in second.stdout  # the provider knows it as the same user
    paths = [request.path for request in stub.requests]
    assert "/oauth/v2/authorize" not in paths  # no OAuth flow of its own
    assert not stub.token_requests("authorization_code")
    with BrokerClient(socket_path) as client:
        apps = {app.script: app for app in client.apps().apps}
    assert apps[str(SECOND_APP)].tokens_issued == 1
    assert str(BIN / "signin-broker") in apps  # two different apps, one sign-in
    daemon.stop()


def test_iso_T1_an_app_the_user_denied_is_refused_and_sees_nothing(
    people: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = daemon_with_accounts(people, socket_path, workspace=False)
    denied = App(tmp_path, "denied")
    write_policy(socket_path, rule(denied, "deny"))
    refused = denied.run(socket_path, "token")
    assert refused["code"] == "PERMISSION_DENIED"
    assert "signin-broker apps allow" in refused["message"]
    listing = denied.run(socket_path, "accounts")  # a denied app may not even list them
    assert listing["code"] == "PERMISSION_DENIED"
    assert denied.run(socket_path, "status") == {"ok": True, "default": "", "count": 0}
    daemon.stop()


def test_iso_T2_an_app_sees_only_the_accounts_it_is_allowed(
    accounts_daemon: DaemonProcess, tmp_path: Path
) -> None:
    socket_path = accounts_daemon.socket_path
    bobs_app, everyones_app = App(tmp_path, "bobs"), App(tmp_path, "everyones")
    write_policy(socket_path, rule(bobs_app, "allow", [BOB_ID]))
    assert bobs_app.run(socket_path, "accounts")["accounts"] == [BOB_ID]
    assert bobs_app.run(socket_path, "token")["account"] == BOB_ID  # its default is Bob
    assert bobs_app.run(socket_path, "status") == {"ok": True, "default": BOB_ID, "count": 1}
    assert everyones_app.run(socket_path, "accounts")["accounts"] == [ALICE_ID, BOB_ID, ALICE_AT_7]
    assert everyones_app.run(socket_path, "token")["account"] == ALICE_ID


def test_iso_T3_another_account_is_not_found_exactly_like_a_missing_one(
    accounts_daemon: DaemonProcess, tmp_path: Path
) -> None:
    socket_path = accounts_daemon.socket_path
    bobs_app = App(tmp_path, "bobs")
    write_policy(socket_path, rule(bobs_app, "allow", [BOB_ID]))
    assert bobs_app.run(socket_path, "token", ALICE_ID) == NOT_FOUND  # exists, not Bob's
    assert bobs_app.run(socket_path, "token", "user:9999") == NOT_FOUND  # does not exist
    assert bobs_app.run(socket_path, "audit", ALICE_ID) == NOT_FOUND


def test_iso_T4_a_write_naming_another_account_is_refused_and_changes_nothing(
    people: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = daemon_with_accounts(people, socket_path, workspace=False)
    bobs_app = App(tmp_path, "bobs")
    write_policy(socket_path, rule(bobs_app, "allow", [BOB_ID]))
    for action in ("sign_out", "remove", "use"):
        for target in (ALICE_ID, "user:9999"):  # the same answer whether it exists or not
            refused = bobs_app.run(socket_path, action, target)
            assert refused["code"] == "INVALID_ARGUMENT", (action, target, refused)
            assert "not an account this app may act on" in refused["message"]
    with BrokerClient(socket_path) as client:
        assert [a.id for a in client.accounts()] == [ALICE_ID, BOB_ID]
        assert client.status().default_account == ALICE_ID
    assert bobs_app.run(socket_path, "sign_out", BOB_ID) == {"ok": True, "was_signed_in": True}
    daemon.stop()


def test_iso_T5_a_workspace_account_is_seen_by_the_apps_allowed_to_it(
    shared_people: StubProvider, accounts_daemon: DaemonProcess, tmp_path: Path
) -> None:
    socket_path = accounts_daemon.socket_path
    workspace_app = App(tmp_path, "workspace")
    write_policy(socket_path, rule(workspace_app, "allow", [ALICE_AT_7]))
    assert workspace_app.run(socket_path, "accounts")["accounts"] == [ALICE_AT_7]
    token = workspace_app.run(socket_path, "token", ALICE_AT_7)
    assert token["account"] == ALICE_AT_7
    claims = httpx2.get(
        shared_people.base_url + "/oauth/v2/userinfo",
        headers={"Authorization": f"Bearer {token['access_token']}"},
    ).json()
    assert claims["sub"] == "1001" and claims["workspace_id"] == "7"
    with BrokerClient(socket_path) as client:
        listed = {a.id: a for a in client.accounts()}
    assert listed[ALICE_AT_7].workspace_id == "7" and listed[ALICE_ID].workspace_id == ""


def test_iso_T6_a_workspace_account_is_not_found_for_apps_not_allowed_to_it(
    shared_people: StubProvider, accounts_daemon: DaemonProcess, tmp_path: Path
) -> None:
    socket_path = accounts_daemon.socket_path
    personal_app = App(tmp_path, "personal")
    write_policy(socket_path, rule(personal_app, "allow", [ALICE_ID]))
    assert personal_app.run(socket_path, "accounts")["accounts"] == [ALICE_ID]
    assert personal_app.run(socket_path, "token", ALICE_AT_7) == NOT_FOUND
    assert personal_app.run(socket_path, "token", "user:1001:workspace:8") == NOT_FOUND


def test_iso_T6_a_workspace_the_user_is_not_a_member_of_gives_no_account(
    people: StubProvider, socket_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", people.issuer).start()
    people.approve_as("1002")  # Bob is in no workspace
    with watching(socket_path) as events, Browser() as browser:
        page = sign_in(browser, daemon, "/user/login?workspace_id=7")
        failed = events.wait_for(EventKind.SIGN_IN_FAILED)
    assert "access_denied" in failed.detail, failed
    assert "not a member of workspace 7" in failed.detail  # the provider's own words
    assert "access_denied" in page.text or page.status_code >= 400
    with BrokerClient(socket_path) as client:
        assert client.accounts() == []
    daemon.stop()


def test_iso_T7_the_stores_refuse_any_access_without_a_tenant_key(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "accounts", FileKeyStore(tmp_path / "state.key"))
    vault.save(ALICE_ID, {"secret": "kept"})
    for key in ("", "1001", "workspace:7", "user:", "user:1001:", "*"):
        with pytest.raises(MissingTenantKey):
            vault.load(key)
        with pytest.raises(MissingTenantKey):
            vault.save(key, {"x": 1})
        with pytest.raises(MissingTenantKey):
            vault.delete(key)
    assert vault.load(ALICE_ID) == {"secret": "kept"}


def test_iso_T8_the_daemons_audit_reads_use_the_tenant_and_actor_indexes(
    accounts_daemon: DaemonProcess, tmp_path: Path
) -> None:
    socket_path = accounts_daemon.socket_path
    with BrokerClient(socket_path) as client:
        for _ in range(20):
            client.get_token()
        assert client.audit_events(account=ALICE_ID)  # written, and read through the API
    with audit_db(accounts_daemon) as db:
        db.execute("ANALYZE")
        for sql, index, params in (
            (FOR_ACCOUNT_SQL, "audit_log_target_created", {"account": ALICE_ID, "app": ""}),
            (FOR_APP_SQL, "audit_log_actor_created", {"app": "x", "accounts": f'["{ALICE_ID}"]'}),
        ):
            plan = " | ".join(
                row[-1]
                for row in db.execute(
                    "EXPLAIN QUERY PLAN " + sql, {**params, "before_id": None, "limit": 10}
                )
            )
            assert f"USING INDEX {index}" in plan, plan
            assert "SCAN audit_log" not in plan, plan


@pytest.mark.parametrize("retention_days", ["30", "0"])
def test_iso_T9_removing_an_account_records_it_first_then_deletes_all_of_it(
    people: StubProvider, socket_path: Path, retention_days: str
) -> None:
    daemon = daemon_with_accounts(
        people, socket_path, "--audit-retention-days", retention_days, workspace=False
    )
    with BrokerClient(socket_path) as client:
        client.get_token(BOB_ID)
        assert key_store_has(daemon, f"{BOB_ID}:state-key")
        assert len(state_files(socket_path)) == 2
        client.remove_account(BOB_ID)
        assert [a.id for a in client.accounts()] == [ALICE_ID]
        client.get_token(ALICE_ID)
    daemon.stop()
    assert not key_store_has(daemon, f"{BOB_ID}:state-key")
    assert key_store_has(daemon, f"{ALICE_ID}:state-key")
    assert len(state_files(socket_path)) == 1
    with audit_db(daemon) as db:
        rows = db.execute(
            "SELECT id, action, resource, deleted_unix FROM audit_log"
            " WHERE target_account = ? ORDER BY id",
            (BOB_ID,),
        ).fetchall()
        alice_rows = db.execute(
            "SELECT count(*) FROM audit_log WHERE target_account = ? AND deleted_unix IS NULL",
            (ALICE_ID,),
        ).fetchone()[0]
    assert alice_rows >= 2  # Alice's rows are untouched
    if retention_days == "0":
        assert rows == []  # gone at once
        return
    assert rows and all(deleted for *_, deleted in rows)  # soft-deleted, purged after 30 days
    removal = [
        row_id
        for row_id, action, resource, _ in rows
        if (action, resource) == ("delete", "account")
    ]
    session_end = [row_id for row_id, action, resource, _ in rows if resource == "session"]
    assert removal and session_end and removal[0] < session_end[0]  # recorded before cleanup


def test_iso_T11_a_device_sign_in_is_not_found_from_a_caller_of_another_account(
    people: StubProvider, socket_path: Path, tmp_path: Path
) -> None:
    daemon = daemon_with_accounts(people, socket_path, workspace=False)
    alices_app, bobs_app, kiosk = (
        App(tmp_path, "alices"),
        App(tmp_path, "bobs"),
        App(tmp_path, "kiosk"),
    )
    write_policy(
        socket_path, rule(alices_app, "allow", [ALICE_ID]), rule(bobs_app, "allow", [BOB_ID])
    )
    alices = alices_app.run(socket_path, "device", ALICE_ID)  # Alice signs in again on a TV
    assert alices["ok"], alices
    shown = alices_app.run(socket_path, "qr", alices["sign_in_id"])
    assert shown["media_type"] == "image/svg+xml" and shown["size"] > 500
    assert bobs_app.run(socket_path, "qr", alices["sign_in_id"]) == NOT_FOUND
    assert bobs_app.run(socket_path, "qr", "no-such-sign-in") == NOT_FOUND  # the same answer
    refused = bobs_app.run(socket_path, "device", ALICE_ID)  # nor can Bob's app begin one
    assert refused["code"] == "INVALID_ARGUMENT"
    kiosks = kiosk.run(socket_path, "device")  # a new account: the sign-in is the app's own
    assert kiosk.run(socket_path, "qr", kiosks["sign_in_id"])["ok"]
    assert bobs_app.run(socket_path, "qr", kiosks["sign_in_id"]) == NOT_FOUND
    assert alices_app.run(socket_path, "qr", alices["sign_in_id"])["ok"]  # still pending
    daemon.stop()
