"""A second app on the same computer: it never signs in, it asks the broker for a token.

    python examples/app_userinfo.py ISSUER

It gets an access token over the broker's Unix socket (the SDK finds the socket) and
calls the provider's userinfo endpoint with it, arriving signed in as the user.
"""

from __future__ import annotations

import sys

import httpx2

from signin_broker import BrokerClient, DaemonNotRunning, NotSignedIn


def main(issuer: str) -> int:
    try:
        with BrokerClient() as broker:
            token = broker.get_token(min_ttl_seconds=60)
    except DaemonNotRunning as error:
        print(f"app: {error.message}", file=sys.stderr)
        return 3
    except NotSignedIn:
        print("app: nobody is signed in; run `signin-broker login`", file=sys.stderr)
        return 4
    print(f"app: got a token for {token.account}, valid {token.seconds_left():.0f} s more")
    discovery = httpx2.get(issuer + "/.well-known/openid-configuration").json()
    answer = httpx2.get(
        discovery["userinfo_endpoint"], headers={"Authorization": token.authorization}
    )
    answer.raise_for_status()
    claims = answer.json()
    print(f"app: the provider says hello to {claims.get('name')} <{claims.get('email')}>")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
