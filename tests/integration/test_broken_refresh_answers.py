"""A refresh answered badly never signs anyone out by the answer's shape.

The stub rotates refresh tokens and, as panva's oidc-provider does, ends the whole grant
when a spent one comes back (RFC 9700 4.14.2). Each broken answer here comes after the
stub acted on the refresh (but a captive portal's page, which never reached it):
- an answer that still names the rotated refresh token usably keeps it, and the next
  renewal uses it: nothing is sent twice;
- a captive portal's page is not the provider: the same refresh token goes again;
- an absurd lifetime is not believed, and a trickled answer is awaited.
No token is served that the provider no longer accepts, and what was accepted survives
a restart. Answers with nothing usable: test_unusable_refresh_answers.py; slow ones,
against oidc-provider: tests/interop/test_interop_refresh_answers.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, Token
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.refresh_answers import presented, renewed_from, served_while_accepted
from support.signin import signed_in_daemon
from support.waiting import eventually

TTL = 30  # the stub's access tokens: no renewal falls due by itself during a case
MB = 1 << 20


@pytest.mark.parametrize(
    "how", ["expires_in_word", "expires_in_negative", "expires_in_huge", "html", "trickle"]
)
def test_a_broken_refresh_answer_never_signs_anyone_out_by_its_shape(
    how: str, socket_path: Path
) -> None:
    with StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2")
        with BrokerClient(socket_path, timeout=30) as client:
            first = client.get_token()
            rss_before = client.status().rss_bytes
            stub.break_token_answers(how, seconds=3)
            renewed = eventually(lambda: renewed_from(client, first), "a renewed token")
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
            last = client.get_token()
        assert rss_after - rss_before < 10 * MB, (rss_before, rss_after)
        daemon.stop()
        with DaemonProcess(socket_path, "--issuer", stub.issuer):  # what was accepted survives
            assert client_token_now(socket_path).access_token == last.access_token
        assert renewed.access_token != first.access_token


def client_token_now(socket_path: Path) -> Token:
    with BrokerClient(socket_path) as client:
        return client.get_token()
