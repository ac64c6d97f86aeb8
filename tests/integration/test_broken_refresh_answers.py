"""Issue 23 #3: a refresh answered badly never signs anyone out by the answer's shape.

The stub rotates refresh tokens and, as panva's oidc-provider does, ends the whole grant
when a spent one comes back (RFC 9700 4.14.2). Each broken answer comes after the stub
acted on the refresh (but a captive portal's page, which never reached it):
- an answer that still names the rotated refresh token usably keeps it, and the next
  renewal uses it: nothing is sent twice;
- an answer with nothing usable puts the refresh token in doubt: the daemon serves the
  old access token, sends nothing at once, and sends the old refresh token once more
  shortly before expiry; the stub had spent it, so that ends the session then, with
  status saying why (the one loss the design accepts: a refresh the provider completed
  while its answer was lost);
- an absurd lifetime is not believed, and a trickled answer is awaited.
No token is served that the provider no longer accepts, and what was accepted survives
a restart.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, Token
from signin_broker_testing import StubProvider
from signin_broker_testing.broken_answers import BROKEN_ANSWERS
from signin_broker_testing.daemon import DaemonProcess
from support.signin import signed_in_daemon
from support.waiting import eventually

TTL = 30  # the stub's access tokens; a refresh token in doubt is resent 7.5 s before expiry
ROTATION_KEPT = ("expires_in_word", "expires_in_negative", "huge_access_token")
NOTHING_USABLE = ("cut_json", "huge_body")
MB = 1 << 20


def presented(stub: StubProvider) -> list[str]:
    return [r.params["refresh_token"] for r in stub.token_requests("refresh_token")]


def served_while_accepted(client: BrokerClient, stub: StubProvider) -> Token:
    """A token from the daemon, which the provider must still accept."""
    token = client.get_token()
    info = stub.access_token_info(token.access_token)
    assert info is not None and info["active"], "a token the provider no longer accepts"
    return token


@pytest.mark.parametrize("how", BROKEN_ANSWERS)
def test_a_broken_refresh_answer_never_signs_anyone_out_by_its_shape(
    how: str, socket_path: Path
) -> None:
    with StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2")
        with BrokerClient(socket_path, timeout=30) as client:
            first = client.get_token()
            rss_before = client.status().rss_bytes
            stub.break_token_answers(how, seconds=3)
            assert client.get_token(refused=True).account == "user:1001"  # renew now
            eventually(lambda: presented(stub), "the refresh reached the stub")
            if how in NOTHING_USABLE:
                in_doubt(client, stub, first)
            else:
                renewed = eventually(
                    lambda: (t := client.get_token()).access_token != first.access_token and t,
                    "a renewed token",
                )
                for _ in range(10):  # 2 s of calls: each token served is one the stub accepts
                    served_while_accepted(client, stub)
                    time.sleep(0.2)
                spent = presented(stub)
                if how == "html":  # the portal's page never reached the stub: sent again
                    assert spent[0] == spent[1]
                else:
                    assert len(spent) == len(set(spent))  # the rotated one was kept and used
                assert stub.reuses == []
            rss_after = client.status().rss_bytes
        assert rss_after - rss_before < 10 * MB, (rss_before, rss_after)
        if how not in NOTHING_USABLE:  # whatever was accepted survives a restart
            last = client_token_now(socket_path)
            daemon.stop()
            with DaemonProcess(socket_path, "--issuer", stub.issuer):
                assert client_token_now(socket_path).access_token == last.access_token
            assert renewed.access_token != first.access_token
        daemon.stop()


def client_token_now(socket_path: Path) -> Token:
    with BrokerClient(socket_path) as client:
        return client.get_token()


def in_doubt(client: BrokerClient, stub: StubProvider, first: Token) -> None:
    """The old token until the resend shortly before expiry; then the stub's reuse ends it."""
    resend_at = first.expires_at_unix - TTL / 4
    while time.time() < resend_at - 2:  # bounded by the token's lifetime
        assert served_while_accepted(client, stub).access_token == first.access_token
        assert len(presented(stub)) == 1  # nothing sent at once
        time.sleep(0.5)
    ended = eventually(lambda: client.status().ended_sessions, "the resend's outcome")
    assert "having completed the renewal whose answer was lost" in ended[0].reason
    spent = presented(stub)
    assert len(spent) == 2 and spent[0] == spent[1] and stub.reuses == ["1001"]
