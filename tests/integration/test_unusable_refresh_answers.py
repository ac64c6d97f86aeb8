"""A refresh answered with nothing usable: its refresh token is in doubt, or spent for sure.

The stub rotates refresh tokens and ends the grant when a spent one comes back, as
panva's oidc-provider does. Its answer to the broken refresh (JSON cut short, 50 MB of
it) comes after it rotated the refresh token:
- at the first renewal, nobody knows yet whether the provider rotates: the old token
  serves, nothing is sent at once, and the refresh token is sent once more shortly
  before expiry to learn it; the stub had spent it, so that ends the session then, saying
  why (the one loss the design accepts: a refresh completed while its answer was lost);
- once the provider has been seen to rotate, an answer of its own (JSON, however broken)
  means the token was spent there: it is never sent again; the session serves its access
  token, status says it will end and why, and it ends once, when that token expires.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, EventKind, NotSignedIn
from signin_broker.session import schedule
from signin_broker_testing import StubProvider
from support.events import watching
from support.refresh_answers import only_the_old_token_until, presented, renewed_from
from support.signin import signed_in_daemon
from support.waiting import eventually

TTL = 10  # a refresh token in doubt is resent 2.5 s before expiry


@pytest.mark.parametrize("how", ["cut_json", "huge_body"])
def test_nothing_usable_at_the_first_renewal_puts_the_token_in_doubt_until_the_last_moment(
    how: str, socket_path: Path
) -> None:
    with StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2")
        with BrokerClient(socket_path, timeout=30) as client:
            first = client.get_token()
            stub.break_token_answers(how)
            assert client.get_token(refused=True).account == "user:1001"  # renew now
            eventually(lambda: presented(stub), "the refresh reached the stub")
            resend_at = schedule.last_moment(first.expires_at_unix, TTL)
            only_the_old_token_until(client, stub, first, resend_at - 1)
            ended = eventually(lambda: client.status().ended_sessions, "the resend's outcome")
        assert "having completed the renewal whose answer was lost" in ended[0].reason
        spent = presented(stub)
        assert len(spent) == 2 and spent[0] == spent[1] and stub.reuses == ["1001"]
        daemon.stop()


def test_a_broken_answer_from_a_provider_seen_to_rotate_is_never_answered_by_a_resend(
    socket_path: Path,
) -> None:
    with StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2")
        with BrokerClient(socket_path, timeout=30) as client, watching(socket_path) as events:
            rotated = eventually(lambda: renewed_from(client, client.get_token()), "a renewal")
            stub.break_token_answers("cut_json")
            eventually(
                lambda: renewed_from(client, rotated) or len(presented(stub)) == 2,
                "the broken renewal",
            )
            account = client.status().default
            assert account is not None and "never sent twice" in account.at_risk
            assert "sign in again before" in account.at_risk
            only_the_old_token_until(client, stub, rotated, rotated.expires_at_unix - 1)
            ended = eventually(lambda: client.status().ended_sessions, "the session's end")
            with pytest.raises(NotSignedIn, match="not JSON"):
                client.get_token()
            event = events.wait_for(EventKind.SIGNED_OUT)
        reason = ended[0].reason
        assert "the provider answered its last renewal unusably" in reason
        assert "not JSON" in reason and "sign in again" in reason
        assert "not JSON" in event.detail and events.kinds().count(EventKind.SIGNED_OUT) == 1
        spent = presented(stub)
        assert len(spent) == len(set(spent)) == 2 and stub.reuses == []  # never sent twice
        daemon.stop()
