"""A signed-in token lives from when its code was redeemed, as the provider counts it.

Counted from when the sign-in was done instead (after the answer arrived, the id_token
was checked and the profile fetched), the daemon would believe a token alive after the
provider let it die: re-validation would then find it rejected and end the session as
revoked, where it only expired.
"""

from __future__ import annotations

from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from support.signin import signed_in_daemon

LATE = 2.0  # seconds the code exchange's answer waits after the stub issued its tokens


def test_the_expiry_counts_from_the_code_exchange_not_its_slow_answer(socket_path: Path) -> None:
    with StubProvider() as stub:
        stub.delay_token_response(LATE, after_processing=True)
        daemon = signed_in_daemon(stub, socket_path)
        with BrokerClient(socket_path) as client:
            served = client.get_token()
        info = stub.access_token_info(served.access_token)
        assert info is not None
        issued_until = info["expires_at"]
        assert isinstance(issued_until, float)
        assert served.expires_at_unix <= issued_until  # never later than the provider's
        assert served.expires_at_unix > issued_until - LATE  # nor early by the wait
        daemon.stop()
