"""A restricted or denied app must not see other accounts through any RPC.

Before the fix an app allowed only Alice's account saw, through WatchEvents, another
app's device sign-in with its user code and Bob's sign-out and sign-in; through
ListApps, rules naming Bob's account; through ListAuditEvents, rows naming Bob's
account. A denied app saw all of that too, could begin sign-ins, and could allow
itself with SetAppPolicy. Each app here is a separate process (support.apps), each
daemon has two accounts at the stub (support.accounts): Alice (A) and Bob (B).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signin_broker.client import AppDecision, BrokerClient, EventKind
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from support.accounts import ALICE, ALICE_ID, BOB, BOB_ID, daemon_with_accounts, sign_in_as
from support.apps import App, outcome, policy_path, rule, write_policy
from support.events import watching
from support.signin import CALLBACK

DENIED = "PERMISSION_DENIED"
WATCH_SECONDS = "90"  # a watcher's bound; each one ends well before at its marker event


@pytest.fixture
def two_people() -> Iterator[StubProvider]:
    """Alice and Bob at a stub whose device codes are polled every second."""
    with StubProvider(users=[ALICE, BOB], auto_approve=ALICE.sub, device_interval=1) as stub:
        yield stub


@pytest.fixture
def daemon(two_people: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    """A daemon with Alice (the default) and Bob signed in; still serving at the end."""
    daemon = daemon_with_accounts(two_people, socket_path, workspace=False)
    yield daemon
    assert daemon.alive, daemon.output()
    with BrokerClient(socket_path, timeout=10) as client:
        assert client.status().account_count >= 1
    daemon.stop()


def start_watching(app: App, socket_path: Path, *until: str) -> subprocess.Popen[str]:
    """The app watches until an event of this kind (and account); returns once it watches."""
    process = app.start(socket_path, "watch", WATCH_SECONDS, *until)
    assert process.stderr is not None
    process.stderr.readline()  # "watching" after the snapshot; "" if the watch failed
    return process


def watched(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """The events a watcher saw, after it stopped at its marker."""
    seen = outcome(process)
    assert seen["ok"], seen
    events: list[dict[str, Any]] = seen["events"]
    return events


def names_bob(text: str) -> bool:
    return any(mark in text for mark in (BOB_ID, BOB.sub, BOB.name, BOB.email))


def test_watch_events_shows_a_restricted_app_neither_other_accounts_nor_others_sign_ins(
    two_people: StubProvider, daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    alices_app, kiosk = App(tmp_path, "alices"), App(tmp_path, "kiosk")
    write_policy(socket_path, rule(alices_app, "allow", [ALICE_ID]))  # the kiosk: the default
    marker = ("SIGNED_IN", ALICE_ID)  # the last event; every watcher may see it
    restricted = start_watching(alices_app, socket_path, *marker)
    own = start_watching(kiosk, socket_path, *marker)
    with watching(socket_path) as everything:  # an app allowed all, not the kiosk
        first = kiosk.run(socket_path, "device")  # a device sign-in for a new account
        second = kiosk.run(socket_path, "device")  # replaces the first: its failure is told
        assert first["ok"] and second["ok"], (first, second)
        with BrokerClient(socket_path) as owner:
            bobs = owner.begin_sign_in(device=True, account=BOB_ID)  # Bob on a TV
            assert owner.sign_out(BOB_ID).was_signed_in  # also ends Bob's device sign-in
        assert sign_in_as(two_people, daemon, BOB.sub) == BOB_ID
        assert sign_in_as(two_people, daemon, ALICE.sub) == ALICE_ID  # the marker
        seen_by_restricted, seen_by_kiosk = watched(restricted), watched(own)
        seen_by_all = [event.as_dict() for event in everything.events]

    kiosks_sign_ins = {first["sign_in_id"], second["sign_in_id"]}
    codes = {first["user_code"], second["user_code"], bobs.user_code}
    assert seen_by_restricted[-1]["kind"] == "SIGNED_IN", seen_by_restricted
    for event in seen_by_restricted:
        assert event["account"] in (ALICE_ID, ""), event
        assert event["sign_in_id"] not in kiosks_sign_ins | {bobs.sign_in_id}, event
        assert not any(code in event["detail"] for code in codes), event
        assert not names_bob(json.dumps(event)), event
    assert any(e["account"] == BOB_ID for e in seen_by_kiosk)  # the kiosk may see Bob: allowed
    kiosks_own = [(e["kind"], e["sign_in_id"]) for e in seen_by_kiosk if e["sign_in_id"]]
    assert ("SIGN_IN_PROGRESS", first["sign_in_id"]) in kiosks_own
    assert ("SIGN_IN_FAILED", first["sign_in_id"]) in kiosks_own
    assert ("SIGN_IN_PROGRESS", second["sign_in_id"]) in kiosks_own
    progress = next(e for e in seen_by_kiosk if e["sign_in_id"] == first["sign_in_id"])
    assert first["user_code"] in progress["detail"]
    # An app allowed every account sees Bob's events, but not the kiosk's own sign-ins.
    assert any(e["account"] == BOB_ID for e in seen_by_all)
    for event in seen_by_all:
        assert event["sign_in_id"] not in kiosks_sign_ins, event
        assert first["user_code"] not in event["detail"], event
        assert second["user_code"] not in event["detail"], event


def test_list_apps_is_refused_to_a_restricted_and_a_denied_app(
    daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    alices_app, bobs_app, denied = (App(tmp_path, n) for n in ("alices", "bobs", "denied"))
    write_policy(
        socket_path,
        rule(alices_app, "allow", [ALICE_ID]),
        rule(bobs_app, "allow", [BOB_ID]),
        rule(denied, "deny"),
    )
    for app in (alices_app, denied):
        refused = app.run(socket_path, "apps")
        assert refused.get("code") == DENIED, refused
        assert not names_bob(refused["message"]), refused
    with BrokerClient(socket_path) as owner:  # the user's own, unrestricted client
        listed = {app.id: app for app in owner.apps().apps}
    assert listed[bobs_app.id].accounts == (BOB_ID,)
    assert listed[denied.id].decision is AppDecision.DENY


def test_set_app_policy_is_refused_to_a_restricted_app_widening_its_own_rule(
    daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    alices_app = App(tmp_path, "alices")
    write_policy(socket_path, rule(alices_app, "allow", [ALICE_ID]))
    before = policy_path(socket_path).read_bytes()
    refused = alices_app.run(socket_path, "set_policy", alices_app.id, "allow")  # every account
    assert refused.get("code") == DENIED, refused
    assert policy_path(socket_path).read_bytes() == before
    assert alices_app.run(socket_path, "accounts")["accounts"] == [ALICE_ID]
    assert alices_app.run(socket_path, "token", BOB_ID).get("code") == "NOT_FOUND"


def test_list_audit_events_gives_a_restricted_app_only_its_accounts_rows(
    daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    alices_app, bobs_app, denied = (App(tmp_path, n) for n in ("alices", "bobs", "denied"))
    write_policy(
        socket_path,
        rule(alices_app, "allow", [ALICE_ID]),
        rule(bobs_app, "allow"),
        rule(denied, "deny"),
    )
    with BrokerClient(socket_path) as owner:
        owner.get_token(ALICE_ID)
        owner.get_token(BOB_ID)
        owner.set_app_policy(bobs_app.id, AppDecision.ALLOW, accounts=[BOB_ID])  # no account's
        assert owner.audit_events(account=BOB_ID)  # the read is a row of no account, naming Bob
        everyones = owner.audit_events()
    assert any(row.resource == "app_policy" and BOB_ID in row.payload_json for row in everyones)
    assert bobs_app.run(socket_path, "token")["account"] == BOB_ID  # Bob's app's own row

    rows = alices_app.run(socket_path, "audit")
    assert rows["ok"], rows
    assert rows["rows"], rows  # Alice's token and sign-in rows
    for row in rows["rows"]:
        assert row["target_account"] == ALICE_ID, row
        assert not names_bob(json.dumps(row)), row
    assert alices_app.run(socket_path, "audit", BOB_ID).get("code") == "NOT_FOUND"
    for account in ("", ALICE_ID, BOB_ID):
        refused = denied.run(socket_path, "audit", account)
        assert refused.get("code") == DENIED, (account, refused)


def test_a_denied_app_can_neither_allow_itself_nor_begin_a_sign_in_nor_see_a_device_code(
    daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    denied, kiosk, other = (App(tmp_path, n) for n in ("denied", "kiosk", "other"))
    write_policy(socket_path, rule(denied, "deny"))  # the kiosk and the other: the default
    before = policy_path(socket_path).read_bytes()
    for accounts in ((), (ALICE_ID,)):
        refused = denied.run(socket_path, "set_policy", denied.id, "allow", *accounts)
        assert refused.get("code") == DENIED, refused
    assert policy_path(socket_path).read_bytes() == before
    assert denied.run(socket_path, "token").get("code") == DENIED  # still denied
    for method in ("device", "browser"):
        refused = denied.run(socket_path, "begin", method)
        assert refused.get("code") == DENIED, (method, refused)
    kiosks = kiosk.run(socket_path, "device")
    assert kiosks["ok"], kiosks
    assert denied.run(socket_path, "qr", kiosks["sign_in_id"]).get("code") == DENIED
    assert other.run(socket_path, "qr", kiosks["sign_in_id"]) == {
        "ok": False,
        "code": "NOT_FOUND",
        "message": "not found",
    }
    assert kiosk.run(socket_path, "qr", kiosks["sign_in_id"])["ok"]  # still pending, its own


def test_an_app_that_asks_cannot_answer_its_own_request_once(
    daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    """Its second process calls SetAppPolicy(once) for itself: refused, the first still waits."""
    asking = App(tmp_path, "asking")
    write_policy(socket_path, rule(asking, "ask"))
    waiting = asking.start(socket_path, "token")
    deadline = time.monotonic() + 30
    with BrokerClient(socket_path) as owner:
        while not any(app.waiting and app.id == asking.id for app in owner.apps().apps):
            assert time.monotonic() < deadline, "the app never waited"
            time.sleep(0.05)
        for decision in ("allow", "deny"):
            refused = asking.run(socket_path, "answer_once", asking.id, decision)
            assert refused.get("code") == DENIED, refused
        assert waiting.poll() is None  # not answered by itself
        _, answered = owner.set_app_policy(asking.id, AppDecision.DENY, once=True)
    assert answered == 1
    assert outcome(waiting).get("code") == DENIED  # the person's answer, not the app's


def test_watch_events_and_list_accounts_are_refused_to_a_denied_app(
    two_people: StubProvider, daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    denied = App(tmp_path, "denied")
    write_policy(socket_path, rule(denied, "deny"))
    watch = denied.start(socket_path, "watch", WATCH_SECONDS, "SIGNED_IN", BOB_ID)
    with BrokerClient(socket_path) as owner:
        owner.sign_out(BOB_ID)
    assert sign_in_as(two_people, daemon, BOB.sub) == BOB_ID  # an event it would stop at
    refused = outcome(watch)
    assert refused.get("code") == DENIED, refused
    refused = denied.run(socket_path, "accounts")
    assert refused.get("code") == DENIED, refused
    assert denied.run(socket_path, "status") == {"ok": True, "default": "", "count": 0}


def test_an_app_that_waits_for_the_users_answer_reads_nothing_meanwhile(
    daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    undecided = App(tmp_path, "undecided")
    write_policy(socket_path, rule(undecided, "ask"))
    with BrokerClient(socket_path) as owner:
        owner.get_token(BOB_ID)
        owner.set_app_policy(undecided.id, AppDecision.ASK, accounts=[BOB_ID])
    assert undecided.run(socket_path, "accounts") == {"ok": True, "accounts": []}
    assert undecided.run(socket_path, "audit") == {"ok": True, "rows": []}
    assert undecided.run(socket_path, "audit", BOB_ID).get("code") == "NOT_FOUND"
    assert undecided.run(socket_path, "status") == {"ok": True, "default": "", "count": 0}
    before = policy_path(socket_path).read_bytes()
    for action, *args in (("apps",), ("set_policy", undecided.id, "allow")):
        refused = undecided.run(socket_path, action, *args)
        assert refused.get("code") == DENIED, refused
        assert "did not answer" not in refused["message"], refused  # refused, not asked
    assert policy_path(socket_path).read_bytes() == before
    with BrokerClient(socket_path) as owner:
        (listed,) = [app for app in owner.apps().apps if app.id == undecided.id]
    assert not listed.waiting  # nothing it did asked the user


def test_get_status_does_not_tell_an_app_that_unseen_accounts_are_signed_in(
    daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    nobodys, denied = App(tmp_path, "nobodys"), App(tmp_path, "denied")
    write_policy(socket_path, rule(nobodys, "allow", ["user:9999"]), rule(denied, "deny"))
    for app in (nobodys, denied):  # as for an app limited to an account that does not exist
        assert app.run(socket_path, "state") == {"ok": True, "state": "SIGNED_OUT", "count": 0}


def test_an_app_limited_to_some_accounts_signs_in_again_only_those_and_only_as_them(
    two_people: StubProvider, daemon: DaemonProcess, socket_path: Path, tmp_path: Path
) -> None:
    """It cannot begin a new account's sign-in, nor end one of its own as another person.

    Else an app allowed only Alice's account would add (or renew) Bob's session, and
    drive the loopback page with sign-ins the person never asked for.
    """
    alices_app, kiosk = App(tmp_path, "alices"), App(tmp_path, "kiosk")
    write_policy(socket_path, rule(alices_app, "allow", [ALICE_ID]))  # the kiosk: the default
    for method in ("device", "browser"):
        refused = alices_app.run(socket_path, "begin", method)
        assert refused.get("code") == DENIED, (method, refused)
        assert "name one" in refused["message"]
    assert kiosk.run(socket_path, "begin", "browser")["ok"]  # allowed every account
    with BrokerClient(socket_path) as client:
        bobs_token = client.get_token(BOB_ID).access_token
    begun = alices_app.run(socket_path, "begin", "browser", ALICE_ID)
    assert begun["ok"], begun
    two_people.approve_as(BOB.sub)  # and Bob signs in at the provider
    try:
        with watching(socket_path) as events, Browser() as browser:
            landed = browser.follow(browser.get(begun["url"]), until=daemon.web_url + CALLBACK)
            page = browser.get(location(landed))
            failed = events.wait_for(EventKind.SIGN_IN_FAILED)
    finally:
        two_people.approve_as(ALICE.sub)
    assert page.status_code == 200 and "wrong_account" in page.text, page.text
    assert "another account signed in" in failed.detail
    with BrokerClient(socket_path) as client:
        assert client.get_token(BOB_ID).access_token == bobs_token  # Bob's session untouched
