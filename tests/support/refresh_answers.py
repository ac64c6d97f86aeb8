"""What the broken-answer tests ask of the stub and the daemon: what was sent, what was served."""

from __future__ import annotations

import time

from signin_broker.client import BrokerClient, Token
from signin_broker_testing import StubProvider


def presented(stub: StubProvider) -> list[str]:
    """The refresh tokens sent to the stub, in order."""
    return [r.params["refresh_token"] for r in stub.token_requests("refresh_token")]


def served_while_accepted(client: BrokerClient, stub: StubProvider, **kw: bool) -> Token:
    """A token from the daemon, which the provider must still accept."""
    token = client.get_token(**kw)
    info = stub.access_token_info(token.access_token)
    assert info is not None and info["active"], "a token the provider no longer accepts"
    return token


def renewed_from(client: BrokerClient, first: Token) -> Token | None:
    """A token other than `first`, asking the daemon to renew now (the app was refused)."""
    token = client.get_token(refused=True)
    return token if token.access_token != first.access_token else None


def only_the_old_token_until(
    client: BrokerClient, stub: StubProvider, first: Token, at: float
) -> None:
    """The old token, and no refresh sent, until `at` (bounded by the token's lifetime)."""
    sent = len(presented(stub))
    while time.time() < at:
        assert served_while_accepted(client, stub).access_token == first.access_token
        assert len(presented(stub)) == sent  # nothing sent meanwhile
        time.sleep(0.5)
