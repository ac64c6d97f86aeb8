"""A refresh answered with nothing usable: its refresh token is in doubt, or spent for sure.

The stub rotates refresh tokens and ends the grant when a spent one comes back, as
panva's oidc-provider does. Its answer to the broken refresh (JSON cut short, 50 MB of
it) comes after it rotated the refresh token:
- once the provider has been seen to rotate, or before, at the first renewal (a public
  client's refresh tokens are rotated or sender-constrained, RFC 9700 4.14.2), an answer
  of its own (JSON, however broken) means the token was spent there: it is never sent
  again; the session serves its access token, status says it will end and why, and it
  ends once, when that token expires. Sent once more, the stub would end the grant.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, EventKind, NotSignedIn
from signin_broker_testing import StubProvider
from support.events import watching
from support.refresh_answers import only_the_old_token_until, presented, renewed_from
from support.signin import signed_in_daemon
from support.waiting import eventually

TTL = 10


@pytest.mark.parametrize(
    ("how", "seen_to_rotate"), [("cut_json", False), ("huge_body", False), ("cut_json", True)]
)
def test_a_broken_answer_spends_the_refresh_token_and_the_session_ends_once_at_expiry(
    socket_path: Path, how: str, seen_to_rotate: bool
) -> None:
    """Not seen to rotate yet (the first renewal), a public client's token may rotate too."""
    with StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2")
        with BrokerClient(socket_path, timeout=30) as client, watching(socket_path) as events:
            served = client.get_token()
            if seen_to_rotate:
                served = eventually(lambda: renewed_from(client, served), "a renewal")
            sent_before = len(presented(stub))
            stub.break_token_answers(how)
            eventually(
                lambda: renewed_from(client, served) or len(presented(stub)) > sent_before,
                "the broken renewal",
            )
            account = client.status().default
            assert account is not None and "never sent twice" in account.at_risk
            assert "sign in again before" in account.at_risk
            only_the_old_token_until(client, stub, served, served.expires_at_unix - 1)
            ended = eventually(lambda: client.status().ended_sessions, "the session's end")
            with pytest.raises(NotSignedIn):
                client.get_token()
            event = events.wait_for(EventKind.SIGNED_OUT)
        reason = ended[0].reason
        assert "the provider answered its last renewal unusably" in reason
        assert "sign in again" in reason and events.kinds().count(EventKind.SIGNED_OUT) == 1
        assert "unusably" in event.detail
        spent = presented(stub)
        assert len(spent) == len(set(spent)) and stub.reuses == []  # never sent twice
        daemon.stop()
