"""The second app of case I3: it asks the daemon for the token and the provider for the user.

`python -m signin_broker_testing.conformance.second_app SOCKET` prints the user's sub. It has no
sign-in of its own: with no token from the daemon it fails, and never opens a browser.
"""

from __future__ import annotations

import sys

import httpx2

from signin_broker.client import BrokerClient


def main(socket_path: str) -> int:
    """Get a token over the socket and show who the provider's userinfo says it belongs to."""
    with BrokerClient(socket_path, timeout=15) as broker:
        token = broker.get_token()
        issuer = broker.status().issuer
    discovery = httpx2.get(issuer.rstrip("/") + "/.well-known/openid-configuration", timeout=15)
    userinfo = httpx2.get(
        discovery.json()["userinfo_endpoint"],
        headers={"Authorization": token.authorization},
        timeout=15,
    )
    userinfo.raise_for_status()
    print(userinfo.json()["sub"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
