"""DPoP (RFC 9449) under attack: proofs only for allowed apps, each proof good once, the key kept.

One stub offering DPoP and one daemon with two accounts, its `dpop` setting asking for
DPoP (auto: wherever the provider offers it), serve the module; a made-up code sent to
the sign-in page has a daemon on the defaults of its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from signin_broker.client import BrokerClient, BrokerError
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support.accounts import ALICE, ALICE_ID, BOB, BOB_ID, daemon_with_accounts
from support.apps import App, rule, write_policy
from support.commands import signin_broker
from support.signin import CALLBACK, sign_in
from support.state import decrypted_record


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProvider]:
    with StubProvider(users=[ALICE, BOB], auto_approve=ALICE.sub, dpop=True) as provider:
        yield provider


@pytest.fixture(scope="module")
def daemon(stub: StubProvider) -> Iterator[DaemonProcess]:
    folder = short_temp_dir()
    daemon = daemon_with_accounts(
        stub, folder / "run" / "broker.sock", "--dpop", "auto", workspace=False
    )
    yield daemon
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def userinfo(stub: StubProvider) -> str:
    return stub.base_url + stub.paths.userinfo


def test_an_app_that_may_not_have_an_accounts_token_gets_no_proof_for_it(
    stub: StubProvider, daemon: DaemonProcess, tmp_path: Path
) -> None:
    bobs_app, denied = App(tmp_path, "bobs"), App(tmp_path, "denied")
    write_policy(daemon.socket_path, rule(bobs_app, "allow", [BOB_ID]), rule(denied, "deny"))
    try:
        for name in (ALICE_ID, ALICE.email, "user:404"):  # by id, by e-mail, or none at all
            answer = bobs_app.run(daemon.socket_path, "dpop", name, "GET", userinfo(stub))
            assert (answer["ok"], answer["code"]) == (False, "NOT_FOUND"), name
        assert bobs_app.run(daemon.socket_path, "dpop", BOB_ID, "GET", userinfo(stub))["ok"]
        refused = denied.run(daemon.socket_path, "dpop", ALICE_ID, "GET", userinfo(stub))
        assert refused["code"] == "PERMISSION_DENIED"
    finally:
        write_policy(daemon.socket_path)


def test_a_proof_is_good_for_one_method_url_and_token_once(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    url = userinfo(stub)
    with BrokerClient(daemon.socket_path) as broker:
        proof = broker.sign_dpop_proof("GET", url)
        other_token = broker.sign_dpop_proof("GET", url, scopes=["openid"])  # down-scoped
        elsewhere = broker.sign_dpop_proof("GET", "https://api.example.com/me")
        posted = broker.sign_dpop_proof("POST", url)
    assert other_token.access_token != proof.access_token
    token = {"Authorization": proof.authorization}
    for headers, method, why in [
        ({**token, "DPoP": posted.dpop}, "GET", "a POST's proof"),
        ({**token, "DPoP": proof.dpop}, "POST", "sent with another method"),
        ({**token, "DPoP": elsewhere.dpop}, "GET", "another URL's proof"),
        ({**token, "DPoP": other_token.dpop}, "GET", "another token's proof"),
        (token, "GET", "no proof at all"),
        ({"Authorization": f"Bearer {proof.access_token}"}, "GET", "the token as Bearer"),
    ]:
        answer = httpx.request(method, url, headers=headers)
        assert answer.status_code == 401, why
    assert httpx.get(url, headers=proof.headers).status_code == 200
    replayed = httpx.get(url, headers=proof.headers)
    assert replayed.status_code == 401 and "jti" in replayed.json()["error_description"]


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("GET POST", "https://api.example.com/"),
        ("", "https://api.example.com/"),
        ("GET", "ftp://api.example.com/"),
        ("GET", "/relative/path"),
        ("GET", "https://api.example.com/#fragment"),
        ("GET", "https://api.example.com/" + "a" * 5000),
        ("GET", "https://api.example.com/\r\nX-Injected: 1"),
    ],
)
def test_a_proof_for_a_malformed_request_is_invalid_argument(
    daemon: DaemonProcess, method: str, url: str
) -> None:
    with BrokerClient(daemon.socket_path) as broker:
        with pytest.raises(BrokerError) as refused:
            broker.sign_dpop_proof(method, url)
        assert refused.value.code.name == "INVALID_ARGUMENT"
        assert broker.status().pid  # the daemon goes on


def test_the_private_key_is_in_no_log_file_answer_or_bundle(
    stub: StubProvider, daemon: DaemonProcess, tmp_path: Path
) -> None:
    keys = [decrypted_record(daemon, account)["dpop_key"]["jwk"] for account in (ALICE_ID, BOB_ID)]
    private = [key["d"] for key in keys]
    assert all(len(d) >= 32 for d in private)
    with BrokerClient(daemon.socket_path) as broker:
        answers = [
            repr(broker.sign_dpop_proof("GET", userinfo(stub), account))
            + broker.sign_dpop_proof("GET", userinfo(stub), account).dpop
            for account in (ALICE_ID, BOB_ID)
        ]
        answers += [repr(broker.status()), repr(broker.accounts())]
        answers += [repr(row) for row in broker.audit_events()]
    bundle = tmp_path / "bundle.json"
    env = {**daemon.env, "SIGNIN_BROKER_ISSUER": stub.issuer}
    signin_broker("--socket", str(daemon.socket_path), "doctor", "--bundle", str(bundle), env=env)
    texts = [*answers, *daemon.lines, bundle.read_text()]
    files = [path for path in daemon.socket_path.parent.parent.rglob("*") if path.is_file()]
    assert files and bundle.stat().st_size > 0
    for d in private:
        assert not [text for text in texts if d in text]
        assert not [path for path in files if d.encode() in path.read_bytes()]


def test_a_made_up_code_on_the_page_teaches_nothing_and_every_tool_keeps_bearer_tokens(
    socket_path: Path,
) -> None:
    """Any process of the user can begin a sign-in on the page and answer it with a code.

    A provider that merely offers DPoP refuses a made-up code with a plain invalid_grant,
    with a proof and without: that shows nothing of DPoP. The sign-in ends (invalid_code),
    is not begun again bound to a key, and nothing is written to dpop-required.json, so
    the next sign-in still gets Bearer tokens, which git, kubectl, docker and curl send.
    """
    with (
        StubProvider(dpop=True) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
        Browser() as browser,
    ):
        authorize = stub.base_url + stub.paths.authorize
        begun = browser.follow(browser.get(daemon.web_url + "/user/login"), until=authorize)
        state = parse_qs(urlsplit(location(begun)).query)["state"][0]
        page = browser.get(daemon.web_url + CALLBACK, params={"state": state, "code": "made-up"})
        assert page.status_code == 200 and "invalid_code" in page.text, page.headers
        exchanges = stub.token_requests("authorization_code")
        assert [bool(e.headers.get("dpop")) for e in exchanges] == [False, True]
        assert len(authorizations(stub)) == 0  # never sent back to the provider bound
        learned = daemon.socket_path.parent / "state" / "signin-broker" / "dpop-required.json"
        assert not learned.exists()
        assert sign_in(browser, daemon).status_code == 303  # the person's own sign-in
        with BrokerClient(socket_path) as broker:
            assert broker.get_token().token_type == "Bearer"
            assert [p.dpop_required for p in broker.status().providers] == [False]
        assert not learned.exists()


def authorizations(stub: StubProvider) -> list[dict[str, str]]:
    """The authorization requests the provider saw (each a sign-in sent to it)."""
    return [r.params for r in stub.requests if r.path == stub.paths.authorize]
