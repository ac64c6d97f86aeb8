"""The audience flood, against the real daemon: bounded provider grants.

One app asking for 1,000 distinct `audience` values made 1,000 refresh grants at the
provider in 7 s, and the daemon cached every token for good. Now each app has a budget
of scoped grants (a burst, then a steady rate; RESOURCE_EXHAUSTED over it) and each
account caches a bounded number of scoped tokens, least recently used out first.
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc

from signin_broker.client import BrokerClient, BrokerError
from signin_broker_testing import StubProvider
from support.signin import signed_in_daemon

FLOOD = 1000
# The daemon's budget of scoped grants per app (session.limits; test_abuse_audience_limits.py
# holds the code to these numbers). Not imported, so that this test runs on any tree.
BURST, PER_SECOND = 20, 2.0


def audience(i: int) -> str:
    return f"https://api{i}.example/"


def test_a_flood_of_distinct_audiences_makes_a_bounded_number_of_provider_grants(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    before = len(stub.token_requests("refresh_token"))
    served, refused = 0, []
    with BrokerClient(daemon.socket_path, timeout=30) as app:
        started = time.monotonic()
        for i in range(FLOOD):
            try:
                app.get_token(audience=audience(i))
                served += 1
            except BrokerError as error:
                refused.append(error)
        elapsed = time.monotonic() - started
        grants = len(stub.token_requests("refresh_token")) - before
        assert served <= grants
        assert grants <= BURST + PER_SECOND * elapsed + 1, (grants, elapsed)
        assert refused, "nothing was refused"
        assert {e.code for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert "try again in" in refused[0].message
        # The daemon keeps serving: the default token, and a cached audience, with no grant.
        assert app.get_token().account == "user:1001"
        assert app.get_token(audience=audience(0)).account == "user:1001"
        assert len(stub.token_requests("refresh_token")) - before == grants
    assert daemon.alive
    assert not [r for r in daemon.records() if r.get("msg") == "unexpected error"]
    daemon.stop()
