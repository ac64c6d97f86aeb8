"""A TV app: it signs the user in on their phone, through the broker, then uses the token.

    python examples/tv_app.py ISSUER

A TV has no browser the user can type into. The app asks the broker for a device
sign-in, shows the code and a QR code of the address (the person scans it with a
phone and approves there), waits for the outcome on the broker's event stream, then
calls the provider's userinfo endpoint with a token from the broker.
"""

from __future__ import annotations

import argparse
import sys

import segno
from _userinfo import who_is_it  # beside this file

from signin_broker import BrokerClient, BrokerError, DaemonNotRunning, EventKind


def main(issuer: str) -> int:
    try:
        with BrokerClient(timeout=30) as broker:
            events = broker.watch_events(timeout=600)
            next(events)  # the snapshot: from here on no event can be missed
            started = broker.begin_sign_in(device=True)
            print(f"tv: on your phone, open {started.verification_uri}", flush=True)
            print(f"tv: and enter the code {started.user_code}, or scan:", flush=True)
            segno.make(started.url, error="m").terminal(compact=True)
            for event in events:
                if event.sign_in_id != started.sign_in_id:
                    continue
                if event.kind is EventKind.SIGN_IN_FAILED:
                    print(f"tv: sign-in failed: {event.detail}", file=sys.stderr)
                    return 1
                if event.kind is EventKind.SIGNED_IN:
                    break
            token = broker.get_token(min_ttl_seconds=60)
    except DaemonNotRunning as error:
        print(f"tv: {error.message}", file=sys.stderr)
        return 3
    except BrokerError as error:  # e.g. this app is denied: `signin-broker apps` says why
        print(f"tv: the broker refused: {error.message}", file=sys.stderr)
        return 1
    who = who_is_it("tv", issuer, token.authorization)
    if who is None:
        return 1
    print(f"tv: welcome, {who}", flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("issuer", help="the provider's issuer URL, as the daemon knows it")
    sys.exit(main(parser.parse_args().issuer))
