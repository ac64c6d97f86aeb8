"""A second app on the same computer: it never signs in, it asks the broker for a token.

    python examples/app_userinfo.py ISSUER

It gets an access token over the broker's Unix socket (the SDK finds the socket) and
calls the provider's userinfo endpoint with it, arriving signed in as the user.
"""

from __future__ import annotations

import argparse
import sys

from _userinfo import who_is_it  # beside this file

from signin_broker import BrokerClient, BrokerError, DaemonNotRunning, NotSignedIn


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
    except BrokerError as error:  # e.g. this app is denied: `signin-broker apps` says why
        print(f"app: the broker refused: {error.message}", file=sys.stderr)
        return 1
    print(f"app: got a token for {token.account}, valid {token.seconds_left():.0f} s more")
    who = who_is_it("app", issuer, token.authorization)
    if who is None:
        return 1
    print(f"app: the provider says hello to {who}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("issuer", help="the provider's issuer URL, as the daemon knows it")
    sys.exit(main(parser.parse_args().issuer))
