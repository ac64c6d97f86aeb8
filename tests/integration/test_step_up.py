"""Step-up (RFC 9470) on the stub provider: a token request that waits for a stronger sign-in.

One daemon for the module, signed in as Alice; each test asks for the acr her session
does not have, so the order of the tests does not matter. The stub lists more acr
values than it signs people in at (GOLD and PLENTY), for step-ups nobody completes.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import requests

from signin_broker.client import BrokerClient, BrokerError, EventKind
from signin_broker.httpx import BrokerAuth as HttpxAuth
from signin_broker.requests import BrokerAuth as RequestsAuth
from signin_broker.session.signing_in.step_up_sign_ins import MAX_PENDING_PER_APP
from signin_broker.session.step_up import UNLISTED_ACR
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support.accounts import ALICE, BOB
from support.apps import App, outcome, policy_path, rule, write_policy
from support.commands import BIN
from support.events import EventLog, watching
from support.notifications import Notifications
from support.protected_api import ProtectedApi
from support.signin import CALLBACK, cli_login, sign_in, signed_in_daemon
from support.waiting import eventually

PWD, MFA, GOLD = "urn:stub:acr:pwd", "urn:stub:acr:mfa", "urn:stub:acr:gold"
PLENTY = tuple(f"urn:stub:acr:{n}" for n in range(24))
# What a hostile app would have the person read, as if the daemon said it.
LURE = "Your-account-is-locked:visit-http://evil.example/unlock"
WAITS = "a token request waits for a step-up sign-in"  # the daemon's log line
STEP_UP_SECONDS = 6  # the daemon's step_up_timeout_seconds here: a sign-in takes ~0.5 s


@pytest.fixture(scope="module")
def provider() -> Iterator[StubProvider]:
    with StubProvider(users=[ALICE, BOB], acr_values_supported=(PWD, MFA, GOLD, *PLENTY)) as stub:
        yield stub


@pytest.fixture(scope="module")
def stepping(provider: StubProvider) -> Iterator[tuple[DaemonProcess, Notifications]]:
    """A daemon signed in as Alice that waits STEP_UP_SECONDS for a step-up sign-in."""
    folder = short_temp_dir()
    notifications = Notifications(folder)
    daemon = signed_in_daemon(
        provider,
        folder / "run" / "broker.sock",
        "--step-up-timeout-seconds",
        str(STEP_UP_SECONDS),
        env=notifications.env,
    )
    yield daemon, notifications
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def current_and_stronger(socket_path: Path) -> tuple[str, str]:
    """The acr of the session now, and the one a test asks for (the other of the two)."""
    with BrokerClient(socket_path) as client:
        acr = client.get_token().acr
    assert acr in (PWD, MFA)
    return acr, MFA if acr == PWD else PWD


def step_up_url(events: EventLog) -> str:
    """The page address the step-up event tells the person of."""
    told = events.wait_for(EventKind.SIGN_IN_PROGRESS, timeout=STEP_UP_SECONDS)
    found = re.search(r"sign in at (http://\S+)", told.detail)
    assert found, told.detail
    return found.group(1)


def sign_in_at(daemon: DaemonProcess, url: str) -> httpx2.Response:
    """Open the address in a browser and go through the sign-in; the daemon's last page."""
    with Browser() as browser:
        response = browser.follow(browser.get(url), until=daemon.web_url + CALLBACK)
        return browser.get(location(response))


def test_apps_asking_for_another_acr_share_one_sign_in_and_others_are_served_meanwhile(
    provider: StubProvider, stepping: tuple[DaemonProcess, Notifications]
) -> None:
    daemon, notifications = stepping
    socket = daemon.socket_path
    before, wanted = current_and_stronger(socket)
    provider.clear_requests()
    token_command = [str(BIN / "signin-broker"), "--socket", str(socket), "token"]
    with (
        watching(socket) as events,
        BrokerClient(socket) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        cli = subprocess.Popen(
            [*token_command, "--acr-values", f"{wanted} {GOLD}", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        sdk = pool.submit(client.get_token, acr_values=[wanted, GOLD])  # the same, as a list
        url = step_up_url(events)
        meanwhile = client.get_token()  # an app that needs no step-up is served at once
        assert meanwhile.acr == before
        login, login_url = cli_login(socket, "--wait", "20")  # continues the step-up
        assert login_url == url
        assert "Sign-in failed" not in sign_in_at(daemon, url).text
        assert login.wait(20) == 0
        stepped = sdk.result(20)
        printed, said = cli.communicate(timeout=20)
    assert cli.returncode == 0, said
    shown = json.loads(printed)
    assert (stepped.acr, shown["acr"]) == (wanted, wanted)
    assert shown["access_token"] == stepped.access_token != meanwhile.access_token
    assert shown["auth_time_unix"] == stepped.auth_time_unix > 0
    asked = [r.params for r in provider.requests if r.path == provider.paths.authorize]
    assert len(asked) == 1  # one sign-in for both apps (single flight)
    assert asked[0]["acr_values"] == f"{wanted} {GOLD}"
    assert asked[0]["prompt"] == "login"
    with BrokerClient(socket) as client:
        assert client.get_token().acr == wanted  # the stepped-up sign-in is the session now
        assert [account.acr for account in client.accounts()] == [wanted]
    assert any(summary == "A stronger sign-in is needed" for summary, _ in notifications.sent())


def test_a_step_up_nobody_completes_is_failed_precondition_and_nothing_is_lost(
    stepping: tuple[DaemonProcess, Notifications],
) -> None:
    daemon = stepping[0]
    with (
        Browser() as browser,
        watching(daemon.socket_path) as events,
        BrokerClient(daemon.socket_path) as client,
        ThreadPoolExecutor(MAX_PENDING_PER_APP) as pool,
    ):
        sign_in(browser, daemon)  # the person's browser, signed in to the dashboard
        before = client.get_token()
        asked = pool.submit(client.get_token, acr_values=GOLD)  # nobody signs in
        url = step_up_url(events)
        cli = subprocess.Popen(  # the one-shot joins the same wait
            [str(BIN / "signin-broker"), "--socket", str(daemon.socket_path), "token",
             "--acr-values", GOLD],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        dashboard = browser.get(daemon.web_url + "/dashboard").text
        others = [  # as many different step-ups as one app may wait for at once
            pool.submit(client.get_token, acr_values=value)
            for value in PLENTY[: MAX_PENDING_PER_APP - 1]
        ]
        eventually(
            lambda: (
                len({e.sign_in_id for e in events.events if e.kind is EventKind.SIGN_IN_PROGRESS})
                == MAX_PENDING_PER_APP
            ),
            "every step-up waiting",
            timeout=STEP_UP_SECONDS / 2,
        )
        with pytest.raises(BrokerError) as one_too_many:
            client.get_token(acr_values=PLENTY[-1])
        with pytest.raises(BrokerError) as refused:
            asked.result(STEP_UP_SECONDS + 10)
        for other in others:
            with pytest.raises(BrokerError):
                other.result(STEP_UP_SECONDS + 10)
        after = client.get_token()
        printed, said = cli.communicate(timeout=STEP_UP_SECONDS + 10)
    assert (
        f"this app waits for {MAX_PENDING_PER_APP} other step-up sign-ins already"
        in one_too_many.value.message
    )
    assert cli.returncode != 0 and printed == ""
    assert "waiting for a stronger sign-in" in said  # said after a second
    assert "step-up sign-in required: acr urn:stub:acr:gold for user:1001" in said
    assert "An app needs a stronger sign-in" in dashboard and html.escape(url) in dashboard
    assert refused.value.code.name == "FAILED_PRECONDITION"
    assert refused.value.message.startswith(
        "step-up sign-in required: acr urn:stub:acr:gold for user:1001; no sign-in that"
        f" meets it came within {STEP_UP_SECONDS} s"
    )
    assert (after.access_token, after.acr) == (before.access_token, before.acr)


def test_a_sign_in_of_the_persons_own_that_meets_a_waiting_step_up_ends_the_wait(
    stepping: tuple[DaemonProcess, Notifications],
) -> None:
    daemon = stepping[0]
    _, wanted = current_and_stronger(daemon.socket_path)
    with (
        watching(daemon.socket_path) as events,
        BrokerClient(daemon.socket_path) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        asked = pool.submit(client.get_token, acr_values=wanted)
        waited_for = step_up_url(events)
        login, url = cli_login(daemon.socket_path, "--wait", "20", "--acr-values", wanted)
        assert url != waited_for  # a sign-in of its own, which happens to meet the step-up
        sign_in_at(daemon, url)
        assert login.wait(20) == 0
        assert asked.result(20).acr == wanted


def test_an_app_limited_to_other_accounts_can_neither_ask_for_nor_continue_a_step_up(
    stepping: tuple[DaemonProcess, Notifications],
) -> None:
    daemon = stepping[0]
    socket = daemon.socket_path
    _, wanted = current_and_stronger(socket)
    limited = App(socket.parent.parent / "apps", "limited")
    write_policy(socket, rule(limited, "allow", accounts=["user:1002"]))
    waits = len(daemon.logs_with(msg=WAITS))
    try:
        asked = limited.run(socket, "step_up", "user:1001", wanted)
        assert (asked["ok"], asked.get("code")) == (False, "NOT_FOUND")  # as for no account
        assert len(daemon.logs_with(msg=WAITS)) == waits  # no sign-in was begun for it
        with (
            watching(socket) as events,
            BrokerClient(socket) as client,
            ThreadPoolExecutor(1) as pool,
        ):
            stepping_up = pool.submit(client.get_token, acr_values=wanted)
            url = step_up_url(events)
            begun = limited.run(socket, "begin", "browser")  # no account of its own named
            sign_in_at(daemon, url)
            assert stepping_up.result(20).acr == wanted
    finally:
        policy_path(socket).unlink()
    assert begun.get("code") == "PERMISSION_DENIED", begun  # not the step-up of Alice's
    assert len(daemon.logs_with(msg=WAITS)) == waits + 1  # the allowed app's step-up only


def test_another_user_signing_in_at_a_step_up_replaces_nothing(
    provider: StubProvider, stepping: tuple[DaemonProcess, Notifications]
) -> None:
    daemon = stepping[0]
    _, wanted = current_and_stronger(daemon.socket_path)
    provider.approve_as(BOB.sub)
    try:
        with (
            watching(daemon.socket_path) as events,
            BrokerClient(daemon.socket_path) as client,
            ThreadPoolExecutor(1) as pool,
        ):
            asked = pool.submit(client.get_token, acr_values=wanted)
            page = sign_in_at(daemon, step_up_url(events))
            with pytest.raises(BrokerError) as refused:
                asked.result(20)
            accounts = [account.id for account in client.accounts()]
    finally:
        provider.approve_as(ALICE.sub)
    assert "another user signed in (user:1002)" in page.text
    assert refused.value.code.name == "FAILED_PRECONDITION"
    assert "another user signed in" in str(refused.value)
    assert accounts == ["user:1001"]  # Bob was not added, Alice not replaced


@pytest.mark.parametrize("short_of", ["acr", "max_age"])
def test_a_provider_answering_short_of_the_step_up_gives_an_error_not_a_weaker_token(
    short_of: str, provider: StubProvider, stepping: tuple[DaemonProcess, Notifications]
) -> None:
    daemon = stepping[0]
    current, wanted = current_and_stronger(daemon.socket_path)
    if short_of == "acr":
        provider.acr_override = current  # it signs the person in at the old strength
        asked_for, why = {"acr_values": wanted}, f"its acr is {current!r}"
    else:
        provider.auth_age = 3600  # it answers from an hour-old browser session
        asked_for, why = {"max_age_seconds": 1}, "the person authenticated 3600 s before"
        with BrokerClient(daemon.socket_path) as client:  # older than max_age, as it is now
            time.sleep(max(0.0, client.get_token().auth_time_unix + 2 - time.time()))
    try:
        with (
            watching(daemon.socket_path) as events,
            BrokerClient(daemon.socket_path) as client,
            ThreadPoolExecutor(1) as pool,
        ):
            before = client.get_token()
            asked = pool.submit(client.get_token, **asked_for)
            sign_in_at(daemon, step_up_url(events))
            with pytest.raises(BrokerError) as refused:
                asked.result(20)
            after = client.get_token()
    finally:
        provider.acr_override, provider.auth_age = None, 0
    assert refused.value.code.name == "FAILED_PRECONDITION"
    assert why in str(refused.value)
    assert after.access_token == before.access_token  # the session stays as it was
    asked = [r.params for r in provider.requests if r.path == provider.paths.authorize][-1]
    assert ("max_age" in asked, "prompt" in asked) == (short_of == "max_age", short_of == "acr")


def with_requests(url: str, auth: RequestsAuth) -> tuple[int, dict[str, object]]:
    answer = requests.get(url, auth=auth, timeout=STEP_UP_SECONDS + 10)
    return answer.status_code, answer.json()


def with_httpx(url: str, auth: HttpxAuth) -> tuple[int, dict[str, object]]:
    with httpx.Client(auth=auth) as http:
        answer = http.get(url)
    return answer.status_code, answer.json()


def with_async_httpx(url: str, auth: HttpxAuth) -> tuple[int, dict[str, object]]:
    async def run() -> tuple[int, dict[str, object]]:
        async with httpx.AsyncClient(auth=auth) as http:
            answer = await http.get(url)
        await auth.aclose()
        return answer.status_code, answer.json()

    return asyncio.run(run())


HTTP_CLIENTS = {
    "httpx": (HttpxAuth, with_httpx),
    "httpx-async": (HttpxAuth, with_async_httpx),
    "requests": (RequestsAuth, with_requests),
}


@pytest.mark.parametrize("name", list(HTTP_CLIENTS))
def test_the_http_auths_turn_a_step_up_401_into_one_completed_retry(
    name: str, provider: StubProvider, stepping: tuple[DaemonProcess, Notifications]
) -> None:
    daemon = stepping[0]
    _, wanted = current_and_stronger(daemon.socket_path)
    make_auth, send = HTTP_CLIENTS[name]
    auth: Any = make_auth(socket_path=daemon.socket_path)
    with (
        ProtectedApi(provider) as api,
        watching(daemon.socket_path) as events,
        ThreadPoolExecutor(1) as pool,
    ):
        api.acr_values = wanted
        answer = pool.submit(send, api.url, auth)
        sign_in_at(daemon, step_up_url(events))
        status, body = answer.result(20)
    auth.close()
    assert status == 200, body
    assert body["acr"] == wanted
    assert len(api.seen) == 2 and api.seen[0] != api.seen[1]  # one retry, with the new token


# An app of its own (a script at its own path): asks for one step-up per acr value given,
# all at once, and prints how each ended.
MANY_STEP_UPS = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from signin_broker.client import BrokerClient, BrokerError

socket_path, *values = sys.argv[1:]

def ask(value):
    try:
        return "acr " + broker.get_token(acr_values=value).acr
    except BrokerError as error:
        return f"{error.code.name}: {error.message}"

with BrokerClient(socket_path, timeout=120) as broker, ThreadPoolExecutor(len(values)) as pool:
    print(json.dumps(list(pool.map(ask, values))))
"""


def test_one_apps_twenty_step_ups_leave_another_apps_step_up_unaffected(
    stepping: tuple[DaemonProcess, Notifications],
) -> None:
    """20 step-ups of one app must not fill the shared slots: once they did, and other apps'
    step-ups failed at once."""
    daemon = stepping[0]
    socket = daemon.socket_path
    _, wanted = current_and_stronger(socket)
    folder = socket.parent.parent / "apps"
    greedy = folder / "greedy-app.py"
    greedy.write_text(MANY_STEP_UPS)
    honest = App(folder, "honest")
    with watching(socket) as events:
        flood = subprocess.Popen(
            [sys.executable, str(greedy), str(socket), *PLENTY[:20]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:

            def told() -> list[str]:
                return [e.detail for e in events.events if e.kind is EventKind.SIGN_IN_PROGRESS]

            eventually(lambda: len(told()) >= MAX_PENDING_PER_APP, "the greedy app's step-ups")
            asking = honest.start(socket, "step_up", "user:1001", wanted)
            url = eventually(
                lambda: next((d for d in told() if d.startswith(honest.id)), None),
                "the honest app's step-up told of",
                timeout=STEP_UP_SECONDS,
            )
            sign_in_at(daemon, re.findall(r"sign in at (http://\S+)", url)[0])
            stepped = outcome(asking, timeout=30)
            greedy_said, _ = flood.communicate(timeout=STEP_UP_SECONDS + 30)
        finally:
            flood.kill()
    assert stepped == {"ok": True, "account": "user:1001", "acr": wanted}
    ended = json.loads(greedy_said)
    waited = [said for said in ended if "no sign-in that meets it came" in said]
    refused = [said for said in ended if "this app waits for" in said]
    assert (len(waited), len(refused)) == (MAX_PENDING_PER_APP, 20 - MAX_PENDING_PER_APP), ended
    greedy_told = [detail for detail in told() if not detail.startswith(honest.id)]
    assert len(greedy_told) == MAX_PENDING_PER_APP
    for detail in greedy_told:  # the app that asked, and the acr values the provider lists
        assert re.fullmatch(
            rf"{re.escape(os.path.realpath(sys.executable))} {re.escape(str(greedy))} needs a"
            " stronger sign-in"
            r" of Alice Example \(acr urn:stub:acr:\d+\): sign in at http://\S+ or run"
            r" `signin-broker login`",
            detail,
        ), detail


def test_an_acr_value_the_provider_does_not_list_is_invalid_argument_and_begins_nothing(
    stepping: tuple[DaemonProcess, Notifications],
) -> None:
    """acr_values the provider does not list are refused before anything is shown: an app's
    were once shown to the person verbatim, whatever they said."""
    daemon = stepping[0]
    waits = len(daemon.logs_with(msg=WAITS))
    with watching(daemon.socket_path) as events, BrokerClient(daemon.socket_path) as client:
        for asked in (LURE, f"{MFA} urn:stub:acr:platinum"):
            with pytest.raises(BrokerError) as refused:
                client.get_token(acr_values=asked)
            assert refused.value.code.name == "INVALID_ARGUMENT"
            assert "not offered by the identity provider (its acr_values_supported:" in (
                refused.value.message
            )
        client.status()  # any event the refusals caused has reached the watcher by now
    assert [e for e in events.events if e.kind is EventKind.SIGN_IN_PROGRESS] == []
    assert len(daemon.logs_with(msg=WAITS)) == waits  # no sign-in begun


def test_where_the_provider_lists_no_acr_values_they_are_asked_for_but_never_shown(
    folder: Path,
) -> None:
    """The daemon cannot tell an acr value from a lure there: it shows the person neither."""
    with StubProvider(acr_values_supported=()) as quiet:
        daemon = signed_in_daemon(
            quiet, folder / "run" / "broker.sock", "--step-up-timeout-seconds", "0"
        )
        with watching(daemon.socket_path) as events, BrokerClient(daemon.socket_path) as client:
            with pytest.raises(BrokerError) as not_yet:
                client.get_token(acr_values=LURE)  # begun and told, not waited for (0 s)
            told = events.wait_for(EventKind.SIGN_IN_PROGRESS, timeout=10)
        with Browser() as browser:  # the provider is asked for it, as the app asked
            authorize = browser.get(re.findall(r"sign in at (http://\S+)", told.detail)[0])
        daemon.stop()
    assert not_yet.value.code.name == "FAILED_PRECONDITION"
    for said in (told.detail, not_yet.value.message):
        assert "evil" not in said and UNLISTED_ACR in said, said
    assert "acr_values=Your-account-is-locked" in location(authorize)
