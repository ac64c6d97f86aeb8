"""No token, refresh token, ID token, code or code verifier in a daemon's debug log.

The whole suite is scanned at its end (conftest's _no_secret_in_any_daemon_log, over
every daemon's lines and every secret a stub handed out). Here one daemon at debug goes
through everything that handles secrets (a browser and a device sign-in, a renewal in
the background, down-scoped and audience-bound tokens, sign-out by an app and from the
page) and its log is searched for each of them, and the finder the whole-suite scan
uses is shown to find what it must.
"""

from __future__ import annotations

from pathlib import Path

from signin_broker.client import BrokerClient, EventKind
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.ledger import SecretLedger
from support.accounts import ALICE, ALICE_ID, BOB, BOB_ID
from support.events import watching
from support.leaks import SecretIndex, leaks
from support.signin import sign_in

TOKEN = "hR4c2bW9xLqT1mZ8vN0pK3sD6fG5jA7eYuIoPl-_Q9w"  # the shape of a stub's access token
CALLS = 50
ID_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMDAxIn0.c2lnbmF0dXJlLW9mLXRoaXMtdG9rZW4tb25seQ"


def test_the_finder_finds_a_secret_whole_cut_short_or_glued_to_text() -> None:
    index = SecretIndex([TOKEN, ID_TOKEN])
    for line in [
        f'{{"msg":"refreshed","token":"{TOKEN}"}}',
        f"Authorization: Bearer {TOKEN}",
        f"url=https://idp.example/cb?code=x&access_token={TOKEN}&state=y",
        f"prefix{TOKEN[:16]}...",  # truncated, and glued to a word
        f"id_token_hint={ID_TOKEN}",
        "signature only: " + ID_TOKEN.rsplit(".", 1)[1],
    ]:
        assert index.found_in(line), line
    for line in [
        '{"msg":"signed in","account":"user:1001"}',
        ID_TOKEN.split(".", maxsplit=1)[0] + " (the header every ID token shares)",
        TOKEN[:8] + " (too short to tell)",
    ]:
        assert not index.found_in(line), line


def test_a_sign_in_renewal_and_sign_out_at_debug_log_no_secret(socket_path: Path) -> None:
    before = SecretLedger.secrets()
    with (
        # Tokens live 4 s, so the daemon renews one in the background within the test.
        StubProvider(
            users=[ALICE, BOB], auto_approve=ALICE.sub, access_token_ttl=4, device_interval=1
        ) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer, "--log-level", "debug") as daemon,
    ):
        with watching(socket_path) as events, Browser() as browser:
            sign_in(browser, daemon)
            assert events.wait_for(EventKind.SIGNED_IN).account == ALICE_ID
        with BrokerClient(socket_path) as client:
            with watching(socket_path) as events:
                started = client.begin_sign_in(device=True)
                events.wait_for(EventKind.SIGN_IN_PROGRESS)
                stub.approve_device(started.user_code, BOB.sub)
                assert events.wait_for(EventKind.SIGNED_IN).account == BOB_ID
            with watching(socket_path) as events:
                assert client.get_token(ALICE_ID).access_token
                events.wait_for(EventKind.REFRESHED)  # at 3 of the 4 s
            assert client.get_token(ALICE_ID, scopes=["openid"]).scopes == ("openid",)
            assert client.get_token(ALICE_ID, audience="https://api.example.com/").access_token
            assert client.sign_out(BOB_ID).was_signed_in
        with Browser() as browser:
            sign_in(browser, daemon)
            signed_out = browser.post(
                daemon.web_url + "/logout", headers={"Origin": daemon.web_url}
            )
            assert location(signed_out).startswith(stub.base_url + "/logout")
            browser.follow(browser.get(location(signed_out)))  # to the provider and home
        daemon.stop()  # every line it wrote has been read
    issued = SecretLedger.secrets() - before
    assert sum(secret.startswith("eyJ") for secret in issued) >= 3  # ID tokens of 3 sign-ins
    assert len(issued) >= 12  # and codes, verifiers, access and refresh tokens
    log = daemon.output()
    for secret in issued:
        assert secret not in log, f"a secret ({secret[:6]}...) is in the daemon's log"
    assert not leaks([daemon], issued), [str(leak) for leak in leaks([daemon], issued)]


def test_a_debug_log_does_not_grow_with_each_call_a_caller_makes(daemon: DaemonProcess) -> None:
    """At debug the HTTP/2 layer logged every header of every call: volume a caller controls."""
    with BrokerClient(daemon.socket_path) as client:
        client.status()  # the connection is open and its first lines are out
        daemon.expect_log(msg="ready")
        before = len(daemon.lines)
        for _ in range(CALLS):
            client.status()
    daemon.stop()  # every line it wrote has been read
    written = daemon.lines[before:]
    assert len(written) < CALLS // 2, "\n".join(written[:20])
